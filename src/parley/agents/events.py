"""What a running agent reports: small typed events, one union discriminated on `type`.

`agent.stream(...)` yields these, in this order for one tool round::

    RunStarted
    ToolCallStarted, ToolCallArgumentsDelta...      the model writes the call
    ToolCallEnded, MessageCompleted(assistant)      its message is whole
    ToolResult..., MessageCompleted(tool)           the tools answered
    TextDelta..., MessageCompleted(assistant)       the model answers
    RunEnded

Every event is a pydantic model with a literal `type` tag, so a stream of them is JSON
(`event.model_dump_json()`, one per server-sent event) and parses back into the same classes
with `AgentEventAdapter.validate_json(...)`.

A run spoken through `parley.agents.speech.TTSMiddleware` also carries audio, one block per
stretch of answer text: `AudioStarted`, `AudioDelta`... (base64 PCM), `AudioEnded`. Audio is
events only: memory keeps the text, never the sound.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from parley.messages import Msg, ToolCallBlock, ToolResultBlock
from parley.models.response import ChatUsage

__all__ = [
    "AgentEvent",
    "AgentEventAdapter",
    "ApprovalRequested",
    "AudioDelta",
    "AudioEnded",
    "AudioStarted",
    "MaxItersReached",
    "MessageCompleted",
    "RunEnded",
    "RunError",
    "RunStarted",
    "RunStatus",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallArgumentsDelta",
    "ToolCallEnded",
    "ToolCallStarted",
    "ToolResult",
]

RunStatus = Literal["completed", "max_iters", "interrupted", "awaiting_approval", "error"]
"""How a run ended: a final answer, the iteration limit, cancelled, parked for a person's
approval, or a failure (see `RunError`)."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunStarted(_Event):
    """A run began (a new reply, or a resumed one)."""

    type: Literal["run_started"] = "run_started"
    run_id: str
    agent: str
    attempt: int = 1
    """Which start of the run this is: a service's worker taking over a run whose worker
    stopped starts it again (2, 3...); a reader drops the unfinished message before it."""


class TextDelta(_Event):
    """More answer text from the model."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(_Event):
    """More of the model's reasoning."""

    type: Literal["thinking_delta"] = "thinking_delta"
    text: str


class ToolCallStarted(_Event):
    """The model began a tool call (its id and the tool's name are known)."""

    type: Literal["tool_call_started"] = "tool_call_started"
    call_id: str
    name: str


class ToolCallArgumentsDelta(_Event):
    """More of a tool call's argument text, as the model writes it."""

    type: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"
    call_id: str
    delta: str


class ToolCallEnded(_Event):
    """A tool call is whole: its arguments parsed (or kept raw when they are not JSON)."""

    type: Literal["tool_call_ended"] = "tool_call_ended"
    call: ToolCallBlock


class ToolResult(_Event):
    """A tool answered a call (an error result when it failed, was denied or unknown)."""

    type: Literal["tool_result"] = "tool_result"
    result: ToolResultBlock


class MessageCompleted(_Event):
    """A message the run added to memory: the model's turn, or a round of tool results."""

    type: Literal["message_completed"] = "message_completed"
    msg: Msg


class ApprovalRequested(_Event):
    """Calls wait for a person's approval; `agent.resume(interrupt_id, ...)` continues."""

    type: Literal["approval_requested"] = "approval_requested"
    interrupt_id: str
    calls: list[ToolCallBlock]


class MaxItersReached(_Event):
    """The run made `iters` model calls, its limit, without reaching a final answer."""

    type: Literal["max_iters_reached"] = "max_iters_reached"
    iters: int


class RunError(_Event):
    """The run failed: `kind` is the exception's class name (`ModelHTTPError`, ...)."""

    type: Literal["run_error"] = "run_error"
    message: str
    kind: str


class AudioStarted(_Event):
    """A block of speech began: the audio of one stretch of the answer's text."""

    type: Literal["audio_started"] = "audio_started"
    block_id: str
    media_type: str
    """The audio's format: raw 16-bit PCM, `audio/pcm;rate=22050`."""


class AudioDelta(_Event):
    """More audio of a block: base64 PCM that follows the block's previous pieces."""

    type: Literal["audio_delta"] = "audio_delta"
    block_id: str
    data: str
    media_type: str


class AudioEnded(_Event):
    """A block of speech ended: how many seconds of audio it held, or why it stopped.

    `error` is set when the voice failed: the answer's text is whole, its audio is not.
    """

    type: Literal["audio_ended"] = "audio_ended"
    block_id: str
    seconds: float = 0.0
    """Seconds of audio the block held."""
    text: str = ""
    """The text the block speaks."""
    error: str | None = None


class RunEnded(_Event):
    """The run ended: how (`status`), the last assistant message, and the summed usage."""

    type: Literal["run_ended"] = "run_ended"
    status: RunStatus
    final: Msg | None = None
    usage: ChatUsage = Field(default_factory=ChatUsage)


AgentEvent = Annotated[
    RunStarted
    | TextDelta
    | ThinkingDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallEnded
    | ToolResult
    | MessageCompleted
    | ApprovalRequested
    | MaxItersReached
    | RunError
    | AudioStarted
    | AudioDelta
    | AudioEnded
    | RunEnded,
    Field(discriminator="type"),
]
"""Any agent event, discriminated on its `type` tag."""

AgentEventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
"""Validates and dumps agent events: `AgentEventAdapter.validate_json(data)`."""
