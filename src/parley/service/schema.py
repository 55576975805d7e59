"""What parley's service adds to agent-service-toolkit's schema (`parley.compat.service_toolkit`).

The toolkit's models stay as they are, so its client parses parley's answers; parley's extra
fields (`thread_id`, `events`, ...) are ones the toolkit's models ignore.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from parley.compat.service_toolkit import (
    ChatHistory,
    ChatMessage,
    ServiceMetadata,
    StreamInput,
    ToolCall,
    UserInput,
)
from parley.messages import Msg
from parley.service.runs_protocol import MultitaskStrategy, OnDisconnect

__all__ = [
    "AgentDescription",
    "ApprovalInput",
    "ApprovalStreamInput",
    "ErrorDetail",
    "EventsMode",
    "Interrupt",
    "ModelInfo",
    "RunCreate",
    "RunInfo",
    "ServiceChatHistory",
    "ServiceChatMessage",
    "ServiceInfo",
    "ServiceStreamInput",
    "ServiceUserInput",
    "ThreadDetail",
    "ThreadInfo",
    "ThreadList",
    "ThreadStatus",
    "error_responses",
]

EventsMode = Literal["toolkit", "parley"]
"""The frames a stream sends: the toolkit's (`token`, `message`, `interrupt`, `error`) or
parley's agent events (`text_delta`, `tool_call_started`, ..., `run_ended`)."""

ThreadStatus = Literal["idle", "running", "awaiting_approval"]
RunStatusName = Literal[
    "pending", "running", "completed", "max_iters", "interrupted", "awaiting_approval", "error"
]


class ErrorDetail(BaseModel):
    """An error answer (401, 404, 409, 502, 503): what went wrong, in words."""

    detail: str


_ERRORS = {
    401: "Missing, unknown or revoked credentials (when auth is on).",
    404: "An unknown agent, thread, run or interrupt (another user's is unknown too: each "
    "user has thread ids of their own).",
    409: "The thread is busy with another run, or the interrupt was answered already.",
    502: "The run failed: the model or the agent failed.",
    503: "The database does not answer.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of a route's error answers (FastAPI documents 422 itself)."""
    return {code: {"model": ErrorDetail, "description": _ERRORS[code]} for code in codes}


class ModelInfo(BaseModel):
    """The model the built-in agent runs on, and why (`parley.providers.auto.ModelChoice`)."""

    spec: str = Field(description="The model, as `provider:model`.", examples=["local"])
    source: str = Field(
        description="What chose it: `setting`, `env:<VARIABLE>` (a provider key), `ollama`, "
        "`pulled` or `embedded`.",
        examples=["embedded"],
    )
    reason: str = Field(description="Why this one, and how to choose another, in words.")
    tiny: bool = Field(
        description="The embedded 135M model: weak answers; pull a better one "
        "(`parley models pull qwen3-1.7b`)."
    )


class ServiceInfo(ServiceMetadata):
    """The toolkit's `/info`, and the model the built-in agent runs on."""

    model: ModelInfo | None = Field(
        None,
        description="The model the settings' agents run on, and why; null when the served "
        "agents bring their own models.",
    )


class ServiceChatMessage(ChatMessage):
    """A toolkit `ChatMessage` that also names the thread it belongs to."""

    thread_id: str | None = Field(None, description="The thread the message is in.")


class ServiceChatHistory(ChatHistory):
    """A toolkit `ChatHistory` that also names its thread."""

    messages: list[ServiceChatMessage]  # type: ignore[assignment]  # each names its thread
    thread_id: str = Field(description="The thread the history is of.")


_SPEAK = Field(
    False,
    description="Speak the answer: the run's events carry its audio (`audio_started`, "
    "`audio_delta` with base64 PCM, `audio_ended`) as parley frames (`events: parley`); the "
    "toolkit's frames leave audio out. The service's voice is its `tts` setting.",
)


_MULTITASK: Any = Field(
    "reject",
    description="On a busy thread: `reject` (wait up to the busy timeout, then 409), "
    "`enqueue` (run after its runs, in order), `interrupt` (stop them, keeping their partial "
    "answers) or `rollback` (stop and delete them with their messages).",
)


class ServiceStreamInput(StreamInput):
    """The toolkit's `StreamInput`, plus the choice of frames and speech."""

    events: EventsMode = Field(
        "toolkit",
        description="`toolkit`: token/message/interrupt/error frames (the toolkit's client "
        "reads these); `parley`: every agent event (text and tool-call deltas, results, "
        "the run's end with usage).",
    )
    speak: StrictBool = _SPEAK
    multitask_strategy: MultitaskStrategy = _MULTITASK
    on_disconnect: OnDisconnect = Field(
        "cancel",
        description="What the client leaving mid-stream does: `cancel` stops the run "
        "(keeping its partial answer); `continue` lets it finish and be stored.",
    )


class ServiceUserInput(UserInput):
    """The toolkit's `UserInput`, plus what to do on a busy thread."""

    multitask_strategy: MultitaskStrategy = _MULTITASK


class Interrupt(BaseModel):
    """A run parked until a person approves tool calls; answer at `/approvals/{id}/...`."""

    interrupt_id: str
    thread_id: str
    run_id: str
    calls: list[ToolCall]


class ApprovalInput(BaseModel):
    """The answer to an interrupt: one verdict for all its calls, or one per call id."""

    # Strict: consent is a JSON true, never a string or number pydantic would read as one.
    approved: StrictBool | dict[str, StrictBool] = Field(
        description="true/false for every awaiting call, or {call_id: bool} (a call left out "
        "is denied).",
        examples=[True, {"call_abc": True}],
    )


class ApprovalStreamInput(ApprovalInput):
    """An interrupt's answer, continuing as a stream."""

    stream_tokens: bool = Field(True, description="Whether to stream LLM tokens to the client.")
    events: EventsMode = "toolkit"
    speak: StrictBool = _SPEAK


class ThreadInfo(BaseModel):
    """A thread as listed: its title (the first question, shortened), agent and times."""

    thread_id: str
    title: str
    agent: str
    created_at: datetime
    updated_at: datetime
    status: ThreadStatus


class ThreadList(BaseModel):
    """One page of threads, newest first; pass `next` as `before` for the next page."""

    threads: list[ThreadInfo]
    next: str | None = None


class ThreadDetail(ThreadInfo):
    """A thread with its messages (parley's `Msg` JSON) and unanswered interrupts.

    `run_ids[i]` is the run that added `messages[i]` (None for messages no run wrote, such
    as the history an OpenAI-style request brings), for feedback on an earlier answer.
    """

    messages: list[Msg]
    run_ids: list[str | None] = Field(default_factory=list)  # none from an older service
    pending: list[Interrupt]


class RunInfo(BaseModel):
    """A run: where it ran, its status, and what it used.

    `pending`: waiting its turn (its thread is busy) or for a worker; `started_at` is when
    it was queued until a worker starts it. `attempt` counts its starts (a takeover after
    its worker stopped is one more).
    """

    run_id: str
    thread_id: str
    agent: str
    model: str
    status: RunStatusName
    error: str | None = None
    usage: dict[str, Any] | None = None
    started_at: datetime
    ended_at: datetime | None = None
    queued_at: datetime | None = None
    attempt: int = 0
    multitask_strategy: MultitaskStrategy = "reject"
    kwargs: dict[str, Any] = Field(default_factory=dict)


class RunCreate(BaseModel):
    """A background run: started without waiting (202); read, join or cancel it by its id."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(description="The question, as the user's message.")
    agent: str | None = Field(None, description="The agent to run (default: the default one).")
    thread_id: str | None = Field(
        None, description="The thread to run on (made when new; a new one when not given)."
    )
    model: str | None = Field(None, description="A model alias the service offers.")
    multitask_strategy: MultitaskStrategy = Field(
        "enqueue",
        description="On a busy thread: `enqueue` (run after its runs, in order), `reject` "
        "(409), `interrupt` (stop them, keeping their partial answers) or `rollback` (stop "
        "and delete them with their messages).",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Kept with the run and shown as it is (metadata)."
    )


class AgentDescription(BaseModel):
    """An agent as `GET /agents` shows it: parley's full view (the real model name too)."""

    key: str
    description: str
    model: str
    tools: list[str]
    default: bool
