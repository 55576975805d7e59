"""A response as Qwen-Agent shows it while it is made: the completed messages, then the live turn.

Fed parley's events (an agent run's, or a model stream's turned into events), it gives the
whole response so far after each change, as Qwen-Agent's `run` and `BaseChatModel.chat`
yield it: completed messages converted by `from_msgs` (their `extra` holding parley's record,
so that the response given back as history reads back as the very same messages), then the
turn being streamed in the plain shape Qwen-Agent streams.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parley.agents import (
    AgentEvent,
    MessageCompleted,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallStarted,
)
from parley.compat.qwen._groups import FID
from parley.compat.qwen.convert import from_msgs
from parley.compat.qwen.schema import ASSISTANT, FunctionCall, Message
from parley.messages import Msg

__all__ = ["QwenMessages", "QwenResponse", "Response", "output"]

QwenResponse = list[Message] | list[dict[str, Any]]
"""A response: Qwen-Agent `Message`s, or their dicts when the input was all dicts."""

QwenMessages = Sequence[Message | Mapping[str, Any]]
"""Qwen-Agent messages as agents take them: `Message`s or dicts, mixed."""


def output(messages: list[Message], as_dicts: bool) -> QwenResponse:
    """The messages, or their dicts (as `model_dump()` writes them)."""
    return [m.model_dump() for m in messages] if as_dicts else messages


class Response:
    """A response being made; `feed` it events, read `messages()`.

    Args:
        name: The name on the live turn's messages (the agent's), or None.
    """

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._done: list[Msg] = []
        self._converted: list[Message] = []
        self._thinking = ""
        self._text = ""
        self._calls: dict[str, list[str]] = {}  # call id -> [name, arguments so far]

    def feed(self, event: AgentEvent) -> bool:
        """Take in one event; whether the response changed."""
        if isinstance(event, TextDelta):
            self._text += event.text
        elif isinstance(event, ThinkingDelta):
            self._thinking += event.text
        elif isinstance(event, ToolCallStarted):
            self._calls[event.call_id] = [event.name, ""]
        elif isinstance(event, ToolCallArgumentsDelta):
            self._calls.setdefault(event.call_id, ["", ""])[1] += event.delta
        elif isinstance(event, MessageCompleted):
            self._complete(event.msg)
        else:
            return False
        return True

    def _complete(self, msg: Msg) -> None:
        if self._name is None and msg.name == "":
            msg = msg.model_copy(update={"name": None})  # the unnamed agent's messages
        self._done.append(msg)
        # The whole list each time: how a message is written depends on the one before it.
        self._converted = from_msgs(self._done)
        self._thinking = self._text = ""
        self._calls = {}

    def messages(self) -> list[Message]:
        """The response so far: a new list (completed messages are shared between lists)."""
        return [*self._converted, *self._live()]

    def _live(self) -> list[Message]:
        # The shape Qwen-Agent's oai.py streams: reasoning, text, then one message per call.
        name = self._name
        live = []
        if self._thinking:
            live.append(Message(ASSISTANT, "", reasoning_content=self._thinking, name=name))
        if self._text:
            live.append(Message(ASSISTANT, self._text, name=name))
        for call_id, (function, arguments) in self._calls.items():
            call = FunctionCall.partial(function, arguments)  # still streaming
            live.append(Message(ASSISTANT, "", name=name, function_call=call, extra={FID: call_id}))
        return live
