"""A run's events as server-sent events: the toolkit's frames, or parley's own.

Toolkit frames (`/stream`'s default) are what agent-service-toolkit's client reads: `token`,
`message` (a `ChatMessage`), `error`, and parley's `interrupt` just before the end. Only
`data:` lines are sent, never comments or pings: that client stops at any other line.
Parley frames are the agent events themselves (`parley.agents.events`) with the thread and
run ids added. Both end with `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from parley.agents.events import (
    AgentEvent,
    ApprovalRequested,
    MessageCompleted,
    RunError,
    TextDelta,
)
from parley.compat.service_toolkit import msgs_to_chat_messages
from parley.messages import Msg, ToolCallBlock
from parley.service.schema import EventsMode, Interrupt

__all__ = [
    "DONE",
    "chat_message_dicts",
    "frame",
    "interrupt_of",
    "make_interrupt",
    "stream_frames",
]

DONE = "data: [DONE]\n\n"
"""The last frame of every stream."""


# Line breaks to Python's `str.splitlines`, hence to httpx's `iter_lines` (the toolkit's
# client, parley's): JSON leaves them raw, so a text holding one would split its frame.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def frame(data: Any) -> str:
    """One SSE frame holding `data` as JSON, on one line for every line splitter."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if "\x85" in text or "\u2028" in text or "\u2029" in text:  # rare: scans beat translate
        text = text.translate(_LINE_BREAKS)
    return f"data: {text}\n\n"


def chat_message_dicts(msg: Msg, *, run_id: str | None, thread_id: str) -> list[dict[str, Any]]:
    """A message as the toolkit's `ChatMessage` JSON (one per tool result), with `thread_id`."""
    out = []
    for chat in msgs_to_chat_messages([msg], run_id=run_id):
        data = chat.model_dump(mode="json")
        data["thread_id"] = thread_id
        out.append(data)
    return out


def interrupt_of(event: ApprovalRequested, *, thread_id: str, run_id: str) -> Interrupt:
    """The interrupt an approval request announces."""
    return make_interrupt(event.interrupt_id, event.calls, thread_id=thread_id, run_id=run_id)


def make_interrupt(
    interrupt_id: str, calls: Iterable[ToolCallBlock], *, thread_id: str, run_id: str
) -> Interrupt:
    """An interrupt with its awaiting calls as the toolkit's `ToolCall`s."""
    return Interrupt.model_validate(
        {
            "interrupt_id": interrupt_id,
            "thread_id": thread_id,
            "run_id": run_id,
            "calls": [
                {"name": call.name, "args": call.input, "id": call.id, "type": "tool_call"}
                for call in calls
            ],
        }
    )


def _toolkit_frames(
    event: AgentEvent, *, thread_id: str, run_id: str, stream_tokens: bool
) -> list[str]:
    if isinstance(event, TextDelta):
        return [frame({"type": "token", "content": event.text})] if stream_tokens else []
    if isinstance(event, MessageCompleted):
        return [
            frame({"type": "message", "content": data})
            for data in chat_message_dicts(event.msg, run_id=run_id, thread_id=thread_id)
        ]
    if isinstance(event, ApprovalRequested):
        interrupt = interrupt_of(event, thread_id=thread_id, run_id=run_id)
        return [frame({"type": "interrupt", "content": interrupt.model_dump(mode="json")})]
    if isinstance(event, RunError):
        return [frame({"type": "error", "content": event.message})]
    return []


def _parley_frame(event: AgentEvent, *, thread_id: str, run_id: str) -> str:
    data = event.model_dump(mode="json", exclude_none=True)
    data["thread_id"] = thread_id
    data["run_id"] = run_id
    return frame(data)


async def stream_frames(
    events: AsyncIterator[AgentEvent],
    *,
    thread_id: str,
    run_id: str,
    mode: EventsMode,
    stream_tokens: bool,
) -> AsyncIterator[str]:
    """The frames of a run's events, then `[DONE]`."""
    async for event in events:
        if mode == "parley":
            if stream_tokens or not isinstance(event, TextDelta):
                yield _parley_frame(event, thread_id=thread_id, run_id=run_id)
            continue
        for text in _toolkit_frames(
            event, thread_id=thread_id, run_id=run_id, stream_tokens=stream_tokens
        ):
            yield text
    yield DONE
