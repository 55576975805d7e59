"""Qwen-Agent's `WriteFromScratch`: an article from reference material, in three steps.

1. summarize the material (an `Assistant` given it as `knowledge`);
2. outline the article for the user's title (`OutlineWriting`, from the summary);
3. write each top-level section of the outline (`ExpandWriting`), in order.

The response shows each step under a `>` heading, then what it wrote, growing as the
models stream. The outline's sections are its lines that start with a Roman numeral and a
`.` or `)` (Qwen-Agent takes any line starting with I, V, X, L, C, D or M, so also
"In short..."); no such line, no sections.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.writing import ExpandWriting, OutlineWriting
from parley.compat.qwen.schema import ASSISTANT, USER, Message

__all__ = ["DEFAULT_PLAN", "WriteFromScratch", "is_roman_numeral"]

DEFAULT_PLAN = ("summarize", "outline", "expand")
_SUMMARIZE = {
    "en": "Summarize the main points of the reference material.",
    "zh": "总结参考资料的主要内容。",
}
_ROMAN = re.compile(r"^[IVXLCDM]+[.)]")


def is_roman_numeral(line: str) -> bool:
    """Whether the line starts with a Roman numeral and `.` or `)` (an outline section)."""
    return _ROMAN.match(line.strip()) is not None


class WriteFromScratch(Agent):
    """Writes an article for the last message's title (see the module docs).

    Run keywords: `knowledge` (the reference material), `lang` (`en` or `zh`).
    """

    def _run(  # type: ignore[override]
        self, messages: list[Message], knowledge: str = "", lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        response = [Message(ASSISTANT, f">\n> The plan: {', '.join(DEFAULT_PLAN)}\n")]
        yield response
        response.append(Message(ASSISTANT, ">\n> Summary of the material: \n"))
        yield response
        summarizer = Assistant(llm=self.llm)
        request = [Message(USER, _SUMMARIZE.get(lang, _SUMMARIZE["en"]))]
        summary = yield from self._step(
            response, summarizer, request, knowledge=knowledge, lang=lang
        )
        response.append(Message(ASSISTANT, ">\n> Outline: \n"))
        yield response
        outliner = OutlineWriting(llm=self.llm)
        outline = yield from self._step(response, outliner, messages, knowledge=summary, lang=lang)
        response.append(Message(ASSISTANT, ">\n> Writing: \n"))
        yield response
        sections = [line.strip() for line in outline.split("\n") if is_roman_numeral(line)]
        for index, section in enumerate(sections):
            response.append(Message(ASSISTANT, ">\n# "))
            yield response
            yield from self._step(
                response,
                ExpandWriting(llm=self.llm),
                messages,
                knowledge=knowledge,
                outline=outline,
                index=str(index + 1),
                capture=section,
                capture_later=sections[index + 1] if index + 1 < len(sections) else "",
                lang=lang,
            )

    @staticmethod
    def _step(
        response: list[Message], agent: Agent, messages: list[Message], **kwargs: Any
    ) -> Generator[list[Message], None, str]:
        """Run one writer, showing its text after `response`; return what it wrote."""
        chunk: list[Message] = []
        for answer in agent.run(messages, **kwargs):
            chunk = [m if isinstance(m, Message) else Message.model_validate(m) for m in answer]
            yield response + chunk
        response.extend(chunk)
        return chunk[-1].get_text_content() if chunk else ""
