"""An agent's memory: the conversation it keeps between replies.

`Memory` is deliberately small and async, so that the HTTP service can back it with its
thread store (each call a query) and an agent neither knows nor cares. `InMemoryMemory`, a
list, is the default.

A memory is one conversation: its `thread_id` keys the tools' per-conversation state (the
code interpreter's session), and one run at a time may use it (a second run started while
one is going is refused with `UserError`: two runs would interleave their messages).
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from parley.messages import Msg

__all__ = ["InMemoryMemory", "Memory"]


class Memory(ABC):
    """The messages of one conversation, oldest first.

    The agent adds its input, each model turn and each round of tool results as they
    complete; it reads everything back before each model call (and trims a copy to the
    model's context, never the memory itself). The system prompt is not stored: it is the
    agent's, added to each prompt.
    """

    _thread_id: str | None = None
    active_run: str | None = None
    """The id of the run using this memory now, if any (set by the run itself)."""
    active_key: str | None = None
    """That run's own key (two attempts of one run may share its id; set by the run)."""

    @property
    def thread_id(self) -> str:
        """The conversation's id (the service's thread); a generated one unless set."""
        if self._thread_id is None:
            self._thread_id = f"memory_{uuid.uuid4().hex}"
        return self._thread_id

    @thread_id.setter
    def thread_id(self, value: str) -> None:
        self._thread_id = value

    @abstractmethod
    async def add(self, msgs: Msg | Sequence[Msg]) -> None:
        """Append one message or several, in order."""

    @abstractmethod
    async def get(self) -> list[Msg]:
        """Every message, oldest first (a new list the caller may change)."""

    @abstractmethod
    async def clear(self) -> None:
        """Forget every message."""


class InMemoryMemory(Memory):
    """Memory held in a Python list: the default, gone when the process ends.

    Args:
        msgs: Messages to start with.
    """

    def __init__(self, msgs: Iterable[Msg] = ()) -> None:
        self._msgs: list[Msg] = list(msgs)

    async def add(self, msgs: Msg | Sequence[Msg]) -> None:
        """Append one message or several, in order."""
        if isinstance(msgs, Msg):
            self._msgs.append(msgs)
        else:
            self._msgs.extend(msgs)

    async def get(self) -> list[Msg]:
        """Every message, oldest first."""
        return list(self._msgs)

    async def clear(self) -> None:
        """Forget every message."""
        self._msgs.clear()

    def __len__(self) -> int:
        return len(self._msgs)

    def __repr__(self) -> str:
        return f"InMemoryMemory({len(self._msgs)} messages)"
