"""Qwen-Agent's `BasicDocQA` (`DocQAAgent`): one model call over the retrieved passages.

Like `Assistant` it retrieves for the newest question from its `files` and the files of the
user's messages, but puts the passages in the system message under an instruction to answer
from them, and calls the model once, without tools.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._rag import without_files
from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.schema import SYSTEM, Message

__all__ = ["BasicDocQA"]

DEFAULT_NAME = "Basic DocQA"
DEFAULT_DESC = (
    "Answers by retrieving the detail of the knowledge base that the question is about; for "
    "questions about one place in the documents, such as 'describe table 1'."
)
_PROMPT = {
    "en": (
        "Read the reference material below closely, and answer the user's question from it "
        "in a clear, well-ordered reply.\n{ref_doc}"
    ),
    "zh": "请仔细阅读下面的参考资料，并据此条理清晰地回答用户的问题。\n{ref_doc}",  # noqa: RUF001
}


class BasicDocQA(Assistant):
    """Retrieves for the question, then answers in one model call (see the module docs)."""

    default_name = DEFAULT_NAME
    default_description = DEFAULT_DESC

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        """Retrieve, put the passages in the system message, and call the model."""
        knowledge = self._retrieve(messages, lang, None)
        prompt = _PROMPT.get(lang, _PROMPT["en"]).format(ref_doc=knowledge)
        messages = without_files(messages)
        if messages and messages[0].role == SYSTEM and isinstance(messages[0].content, str):
            messages[0] = messages[0].model_copy(
                update={"content": f"{messages[0].content}\n\n{prompt}"}
            )
        else:
            messages.insert(0, Message(SYSTEM, prompt))
        return self._call_llm(messages)
