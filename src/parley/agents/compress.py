"""Compressing old turns: what the context budget sends instead of the turns it drops.

With `ContextBudget(..., strategy="summarize")` (`Agent(..., context_strategy="summarize")`),
the turns the budget would drop are summarized by a model (the agent's own unless another is
given), as AgentScope compresses a conversation past its model's `context_size`. The summary
goes into the prompt as a system message right after the system prompt, and is kept: the next
call reuses it, and when more turns must go, the model summarizes the kept summary together
with the newly dropped turns only. The dropped set is made of whole turns and whole tool
rounds (a call and its results go together), so no summary splits a call from its result.
The memory itself is never changed.

A failed summary call (any `ModelError`) falls back to trimming, logged: the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from parley.agents._text import message_text
from parley.errors import ModelError
from parley.messages import Msg

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["SUMMARY_INSTRUCTIONS", "SUMMARY_PREFIX", "Summarizer", "is_summary"]

logger = logging.getLogger("parley.agents")

SUMMARY_INSTRUCTIONS = (
    "You compress conversations. Summarize the conversation you are given so that the summary "
    "can stand in for it: keep every fact, decision, name, number, file, tool result and open "
    "question that later turns may need; leave out greetings and repetition. Write only the "
    "summary, in the conversation's language."
)
"""What the summarizing model is told."""

SUMMARY_PREFIX = "Summary of the earlier conversation (its turns were compressed):\n"
"""How the summary message starts, for the model that reads it."""

SUMMARY_TOKENS = 512
"""The most tokens a summary may take (the budget asks for less in a small context window)."""

_MARK = "context_summary"


def is_summary(msg: Msg) -> bool:
    """Whether `msg` is a summary the context budget made."""
    return msg.metadata.get(_MARK) is not None


def _transcript(msgs: Sequence[Msg]) -> str:
    lines = []
    for msg in msgs:
        speaker = f"{msg.role} ({msg.name})" if msg.name else msg.role
        lines.append(f"{speaker}: {message_text(msg)}")
    return "\n".join(lines)


class Summarizer:
    """Summarizes dropped turns and keeps the summaries (see the module docstring).

    Args:
        model: The model that writes the summaries.
    """

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        # The summary of a run of dropped messages, by the ids it covers (oldest first).
        self._kept: dict[tuple[str, ...], Msg] = {}

    async def summary(self, dropped: Sequence[Msg], max_tokens: int = SUMMARY_TOKENS) -> Msg | None:
        """A system message summarizing `dropped` (oldest first); None if the model failed.

        `max_tokens` bounds the summary (the summarizing model's `max_tokens`).
        """
        ids = tuple(m.id for m in dropped)
        if ids in self._kept:
            return self._kept[ids]
        earlier, new = self._reusable(ids), list(dropped)
        if earlier is not None:
            new = new[len(earlier.metadata[_MARK]) :]
        try:
            text = await self._summarize(earlier, new, max_tokens)
        except ModelError as exc:
            logger.warning("context budget: the summary failed (%s); old turns trimmed", exc)
            return None
        made = Msg.system(SUMMARY_PREFIX + text)
        made.metadata[_MARK] = list(ids)
        if len(self._kept) > 64:
            self._kept.clear()
        self._kept[ids] = made
        return made

    def _reusable(self, ids: tuple[str, ...]) -> Msg | None:
        """The kept summary of the longest run of `ids` it starts with."""
        best: Msg | None = None
        for covered, summary in self._kept.items():
            longer = best is None or len(covered) > len(best.metadata[_MARK])
            if longer and ids[: len(covered)] == covered:
                best = summary
        return best

    async def _summarize(self, earlier: Msg | None, new: Sequence[Msg], max_tokens: int) -> str:
        parts = []
        if earlier is not None:
            parts.append("The summary so far:\n" + earlier.text.removeprefix(SUMMARY_PREFIX))
        parts.append("The turns to add to it:\n" if earlier else "The conversation:\n")
        parts[-1] += _transcript(new)
        request = [Msg.system(SUMMARY_INSTRUCTIONS), Msg.user("\n\n".join(parts))]
        response = await self.model.chat(request, max_tokens=max_tokens)
        return response.text.strip()
