"""`Participant`, who a hub or a group chat holds; `HumanParticipant`, a person among agents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from parley.agents.memory import InMemoryMemory, Memory
from parley.errors import UserError
from parley.messages import Msg

__all__ = ["HumanParticipant", "Participant"]


class Participant(Protocol):
    """One side of a multi-agent conversation: an `Agent` or a `HumanParticipant`.

    `name` is unique in its hub or chat; `description` tells a selecting model who it is;
    `observe` takes in what the others say.
    """

    name: str
    description: str

    async def observe(self, msgs: Msg | Sequence[Msg]) -> None:
        """Take in messages from the others, without answering."""
        ...


class HumanParticipant:
    """A person in a group chat: on their turn the chat pauses until they speak.

    `chat.run()` returns (and `chat.stream()` ends) paused, waiting for this participant;
    `await chat.resume("their words")` goes on. What the others say is kept in `memory`, so
    an interface can show the person the conversation.

    Args:
        name: How the others see them (the `name` of their messages).
        description: Who they are, for a selecting model.
        memory: Where what they observe is kept; a new `InMemoryMemory` by default.
    """

    def __init__(
        self,
        name: str = "user",
        description: str = "A person taking part in the conversation.",
        memory: Memory | None = None,
    ) -> None:
        if not name:
            raise UserError("a participant needs a name")
        self.name = name
        self.description = description
        self.memory: Memory = memory if memory is not None else InMemoryMemory()

    def __repr__(self) -> str:
        return f"HumanParticipant(name={self.name!r})"

    async def observe(self, msgs: Msg | Sequence[Msg]) -> None:
        """Keep messages from the others in `memory`."""
        await self.memory.add(msgs)

    def message(self, content: str | Msg) -> Msg:
        """Their words as a user message carrying their name.

        Raises:
            UserError: A message that is not a user message.
        """
        if isinstance(content, str):
            return Msg.user(content, name=self.name)
        if content.role != "user":
            raise UserError(f"{self.name} speaks in user messages, not {content.role} ones")
        return (
            content if content.name == self.name else content.model_copy(update={"name": self.name})
        )
