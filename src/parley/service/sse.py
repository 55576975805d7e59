"""A run's events as server-sent events: the toolkit's frames, or parley's own.

Toolkit frames (`/stream`'s default) are what agent-service-toolkit's client reads: `token`,
`message` (a `ChatMessage`), `error`, and parley's `interrupt` just before the end. Only
`data:` lines are sent, never comments or pings: that client stops at any other line.
Parley frames are the agent events themselves (`parley.agents.events`) with the thread and
run ids added. Both end with `data: [DONE]`.

A stream that follows a run's event log (`GET /runs/{id}/stream`, `event_frames`) adds to
each frame an `id:` line: the event's number in the log (`7`), or for the second, third...
frame one event makes, `7.1`, `7.2` (toolkit frames: a message with several tool results).
A client that reconnects with the last id it saw as `Last-Event-ID` gets every frame after
it exactly once (`parse_frame_id`). While the run is quiet such a stream sends a
`: heartbeat` comment every few seconds (`with_heartbeats`), so that proxies and clients'
idle watchdogs keep the connection. `stream_frames` (the run's own request) sends neither.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from parley.service.runs_protocol import UnknownEventIdError
from parley.service.schema import EventsMode, Interrupt

__all__ = [
    "DONE",
    "HEARTBEAT",
    "HEARTBEAT_INTERVAL",
    "FrameId",
    "chat_message_dicts",
    "event_frames",
    "frame",
    "interrupt_of",
    "make_interrupt",
    "parse_frame_id",
    "stream_frames",
    "with_heartbeats",
]

DONE = "data: [DONE]\n\n"
"""The last frame of every stream."""
HEARTBEAT = ": heartbeat\n\n"
"""An SSE comment: clients skip it, proxies and idle watchdogs see a live connection."""
HEARTBEAT_INTERVAL = 5.0
"""Seconds of quiet before a heartbeat (LangGraph's server's; the JS SDK's watchdog gives up
after three missed ones, HAProxy's `timeout server` is longer)."""

FrameId = tuple[int, int]
"""A frame's place in a run's stream: (the event's number, which of its frames: 0, 1...)."""


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


def _frames_of(
    event: AgentEvent, *, thread_id: str, run_id: str, mode: EventsMode, stream_tokens: bool
) -> list[str]:
    if mode == "parley":
        if stream_tokens or not isinstance(event, TextDelta):
            return [_parley_frame(event, thread_id=thread_id, run_id=run_id)]
        return []
    return _toolkit_frames(event, thread_id=thread_id, run_id=run_id, stream_tokens=stream_tokens)


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


def parse_frame_id(run_id: str, header: str | None) -> FrameId | None:
    """Where a `Last-Event-ID` says the client is: the last frame it has, if any.

    None: no header (live only); `(0, 0)` for `-1` (from the start); else the frame `N` or
    `N.k` names.

    Raises:
        UnknownEventIdError: Not an id a run's stream gives (400).
    """
    if header is None:
        return None
    text = header.strip()
    if text == "-1":
        return (0, 0)
    seq, dot, part = text.partition(".")
    if _is_number(seq) and int(seq) > 0 and (not dot or (_is_number(part) and int(part) > 0)):
        return (int(seq), int(part) if dot else 0)
    raise UnknownEventIdError(run_id, header)


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 12


def _frame_id(seq: int, part: int) -> str:
    return f"id: {seq}\n" if part == 0 else f"id: {seq}.{part}\n"


async def event_frames(
    events: AsyncIterator[tuple[int, AgentEvent]],
    *,
    thread_id: str,
    run_id: str,
    mode: EventsMode,
    stream_tokens: bool,
    seen: FrameId | None = None,
) -> AsyncIterator[str]:
    """The frames of a run's numbered events, each with its `id:` line, then `[DONE]`.

    `seen`: the last frame the client has (from `parse_frame_id`); the frames of that event
    up to it are not sent again (`events` start at that event, or after it).
    """
    async for seq, event in events:
        texts = _frames_of(
            event, thread_id=thread_id, run_id=run_id, mode=mode, stream_tokens=stream_tokens
        )
        for part, text in enumerate(texts):
            if seen is not None and (seq, part) <= seen:
                continue
            yield _frame_id(seq, part) + text
    yield DONE


async def with_heartbeats(
    frames: AsyncIterator[str], interval: float = HEARTBEAT_INTERVAL
) -> AsyncIterator[str]:
    """`frames`, with a `: heartbeat` comment after every `interval` seconds of quiet.

    The next frame is awaited in a task of its own, never cancelled by the wait: a frame
    late by a heartbeat is still the next one sent.
    """
    source = aiter(frames)
    pending: asyncio.Future[str] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield HEARTBEAT
                continue
            try:
                text = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            yield text
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()
