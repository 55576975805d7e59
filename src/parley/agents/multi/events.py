"""What routers and group chats report, beside the events of the agents they run.

`router.stream(...)` yields `Routed`, then the chosen agent's own events (`RunStarted`...
`RunEnded`, see `parley.agents.events`). `chat.stream(...)` yields, for each turn,
`SpeakerSelected`, the speaker's events, then `ChatMessage` with what the turn added to the
conversation; it ends with `ChatPaused` (a person's turn, or an approval) or `ChatEnded`.

Like the agents' events, each is a pydantic model with a literal `type` tag: a stream is
JSON, and `RouterEventAdapter` / `GroupChatEventAdapter` parse it back.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from parley.agents.events import AgentEvent
from parley.messages import Msg
from parley.models.response import ChatUsage

__all__ = [
    "ChatEnded",
    "ChatMessage",
    "ChatPaused",
    "EndReason",
    "GroupChatEvent",
    "GroupChatEventAdapter",
    "Routed",
    "RouterEvent",
    "RouterEventAdapter",
    "SelectionMethod",
    "SpeakerSelected",
]

SelectionMethod = Literal["round_robin", "random", "manual", "auto", "mention"]
"""How a speaker was picked: the chat's selection, or an `@name` in the last message."""

EndReason = Literal["max_rounds", "stopped", "no_speaker", "error"]
"""Why a chat ended: its round limit, its stop condition, no one picked to speak, a failure."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Routed(_Event):
    """A router picked the agent that answers.

    Attributes:
        agent: The chosen agent's name.
        reason: Why, as the routing model put it (when it did).
        fallback: The model's pick was not valid, so the default agent answers.
        usage: What the routing call cost.
    """

    type: Literal["routed"] = "routed"
    agent: str
    reason: str | None = None
    fallback: bool = False
    usage: ChatUsage = Field(default_factory=ChatUsage)


class SpeakerSelected(_Event):
    """A group chat picked who speaks next (`round` counts turns of this run from 1)."""

    type: Literal["speaker_selected"] = "speaker_selected"
    speaker: str
    round: int
    method: SelectionMethod


class ChatMessage(_Event):
    """A message joined the group chat's conversation: the task, a reply, a person's words."""

    type: Literal["chat_message"] = "chat_message"
    msg: Msg


class ChatPaused(_Event):
    """The chat waits: for the person `waiting_for`, or for approval (`interrupt_id` set).

    `chat.resume(...)` continues it.
    """

    type: Literal["chat_paused"] = "chat_paused"
    waiting_for: str
    interrupt_id: str | None = None


class ChatEnded(_Event):
    """The chat ended after `rounds` turns of this run (see `EndReason`)."""

    type: Literal["chat_ended"] = "chat_ended"
    reason: EndReason
    rounds: int


RouterEvent = Annotated[Routed | AgentEvent, Field(discriminator="type")]
"""Any event of a routed reply, discriminated on its `type` tag."""

GroupChatEvent = Annotated[
    SpeakerSelected | ChatMessage | ChatPaused | ChatEnded | AgentEvent,
    Field(discriminator="type"),
]
"""Any event of a group chat, discriminated on its `type` tag."""

RouterEventAdapter: TypeAdapter[RouterEvent] = TypeAdapter(RouterEvent)
"""Validates and dumps router events."""

GroupChatEventAdapter: TypeAdapter[GroupChatEvent] = TypeAdapter(GroupChatEvent)
"""Validates and dumps group chat events."""
