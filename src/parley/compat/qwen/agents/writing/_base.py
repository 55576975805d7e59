"""The writing agents' common step: the last user message wrapped in a prompt, one call."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent
from parley.compat.qwen.schema import Message
from parley.errors import ConfigurationError


class PromptedWriting(Agent):
    """An agent whose run is one model call on the last message wrapped in `PROMPTS[lang]`."""

    PROMPTS: ClassVar[Mapping[str, str]] = {}

    def _prompt(self, lang: str, request: str, knowledge: str, **kwargs: Any) -> str:
        template = self.PROMPTS.get(lang)
        if template is None:
            raise ConfigurationError(
                f"{type(self).__name__} writes in {' or '.join(self.PROMPTS)}, not {lang!r}"
            )
        return template.format(ref_doc=knowledge, user_request=request, **kwargs)

    def _run(  # type: ignore[override]
        self, messages: list[Message], knowledge: str = "", lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        messages = copy.deepcopy(messages)
        last = messages[-1]
        last.content = self._prompt(lang, last.get_text_content(), knowledge, **kwargs)
        return self._call_llm(messages)
