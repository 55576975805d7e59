"""Qwen-Agent's `UserAgent`: a real person's seat in a group chat.

Its turn answers with one user message holding `PENDING_USER_INPUT`, which tells the group
chat (and the application around it) to stop and wait for what the person types.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agent import Agent
from parley.compat.qwen.schema import USER, Message

__all__ = ["PENDING_USER_INPUT", "UserAgent"]

PENDING_USER_INPUT = "<!-- INTERRUPT: PENDING_USER_INPUT -->"
"""The content of a `UserAgent`'s turn: the chat waits for the person (Qwen-Agent's marker)."""


class UserAgent(Agent):
    """A real person in a group chat: its turn is a request for their input.

    Takes `Agent`'s arguments; it calls no model (the embedded default one is never loaded).
    """

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: Any
    ) -> Iterator[QwenMessages]:
        yield [Message(USER, PENDING_USER_INPUT, name=self.name)]
