"""Qwen-Agent's `ArticleAgent`: writes an article, or continues one, from its documents.

An `Assistant` (its `files`, and files attached to the messages): it retrieves what the
documents hold for the request, shows it (`> Search for relevant information`), then
writes: the whole article (`run(..., full_article=True)`, `WriteFromScratch`) or a
continuation of the text given (`ContinueWriting`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.write_from_scratch import WriteFromScratch
from parley.compat.qwen.agents.writing import ContinueWriting
from parley.compat.qwen.schema import ASSISTANT, Message

__all__ = ["ArticleAgent"]


class ArticleAgent(Assistant):
    """Writes from its documents (see the module docs); takes `Assistant`'s arguments."""

    def _run(
        self,
        messages: list[Message],
        lang: str = "en",
        full_article: bool = False,
        **kwargs: Any,
    ) -> Iterator[QwenMessages]:
        """Retrieve, then write the article (`full_article`) or continue the text."""
        found = self._retrieve(messages, lang, kwargs.get("max_ref_token"))
        response: list[Message] = []
        if found:
            response.append(
                Message(ASSISTANT, f">\n> Search for relevant information: \n{found}\n")
            )
            yield response
        writer: Agent
        if full_article:
            writer = WriteFromScratch(llm=self.llm)
        else:
            writer = ContinueWriting(llm=self.llm)
            response.append(Message(ASSISTANT, ">\n> Writing Text: \n"))
            yield response
        for written in writer.run(messages, lang=lang, knowledge=found):
            if written:
                yield response + list(written)
