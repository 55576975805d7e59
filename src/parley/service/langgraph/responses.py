"""What LangGraph's run routes answer: runs as `Run`s, streams of frames, and results.

A stream follows the run's events (`backend.LgRun.follow`) from its first, makes its frames
(`streams.FrameMaker`) and sends those after the frame the client has, with heartbeats; when
it ends (the run's end, or its client gone) its frames are closed at once and, with
`on_disconnect: cancel`, a run still going is stopped. A result (`wait`, `join`) is the
thread's values at the run's end, newlines before it while the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from parley.agents.events import ApprovalRequested, MessageCompleted
from parley.service.langgraph.backend import LangGraphRuns, LgRun, assistant_id, lg_status
from parley.service.langgraph.convert import messages_of
from parley.service.langgraph.state import thread_values
from parley.service.langgraph.streams import FrameMaker, interrupt_dicts, sse
from parley.service.sse import HEARTBEAT_INTERVAL, FrameId, with_heartbeats
from parley.service.state import ServiceState
from parley.service.store import RunRecord

__all__ = [
    "HEARTBEAT_SECONDS",
    "SSE_HEADERS",
    "final_values",
    "record_dict",
    "result_response",
    "run_dict",
    "run_path",
    "sse_error",
    "stream_response",
]

HEARTBEAT_SECONDS = HEARTBEAT_INTERVAL
"""How long a stream or a wait stays silent before it sends a keep-alive."""
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def run_path(run: LgRun) -> str:
    """The run's path under the mount (`Content-Location`): stateless runs have their own."""
    if run.kwargs.get("stateless"):
        return f"/runs/{run.run_id}"
    return f"/threads/{run.thread_id}/runs/{run.run_id}"


def run_dict(run: LgRun) -> dict[str, Any]:
    """A run as LangGraph's `Run`."""
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": assistant_id(run.agent),
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "status": run.status,
        "metadata": run.metadata,
        "multitask_strategy": run.multitask_strategy,
        "kwargs": {k: v for k, v in run.kwargs.items() if k != "stateless"},
    }


def record_dict(record: RunRecord) -> dict[str, Any]:
    """A run this process did not start, as LangGraph's `Run` from its store record."""
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "assistant_id": assistant_id(record.agent),
        "created_at": record.started_at.isoformat(),
        "updated_at": (record.ended_at or record.started_at).isoformat(),
        "status": lg_status(record.status),
        "metadata": {},
        "multitask_strategy": "reject",
        "kwargs": {},
    }


def _maker(run: LgRun, modes: frozenset[str]) -> FrameMaker:
    return FrameMaker(
        run_id=run.run_id,
        thread_id=run.thread_id,
        assistant_id=assistant_id(run.agent),
        graph_id=run.agent,
        modes=modes,
        initial=run.initial,
    )


async def _frames(run: LgRun, modes: frozenset[str], seen: FrameId | None) -> AsyncIterator[str]:
    """The run's SSE text after the frame `seen` (None: its events from now on).

    Every event is read from the first, those whose frames are not sent too: they make the
    values the later frames hold.
    """
    maker: FrameMaker | None = None  # made at the first event: a queued run's thread is
    # read when a worker opens it
    last = seen if seen is not None else (len(run.events or []), 1 << 30)
    async for seq, event in run.follow(0):
        maker = maker or _maker(run, modes)
        for part, frame in enumerate(maker.frames(seq, event)):
            if (seq, part) > last:
                yield sse(frame)


def stream_response(
    backend: LangGraphRuns,
    run: LgRun,
    modes: frozenset[str],
    after: FrameId | None,
    *,
    cancel_on_disconnect: bool,
) -> StreamingResponse:
    """The run's stream after the frame `after` (None: live), `Location` its own path."""

    async def body() -> AsyncIterator[str]:
        frames = with_heartbeats(_frames(run, modes, after), HEARTBEAT_SECONDS)
        try:
            async for text in frames:
                yield text
        except Exception as exc:  # the stream broke: say so as LangGraph does
            yield sse_error(exc)
        finally:  # now, not when the collector finds it: it waits on the run's events
            close = getattr(frames, "aclose", None)
            if close is not None:
                await close()

    async def left() -> None:
        if cancel_on_disconnect and not run.done.is_set():
            await backend.cancel(run.run_id, run.user_id)

    headers = SSE_HEADERS | {
        "Location": f"{run_path(run)}/stream",
        "Content-Location": run_path(run),
    }
    return _RunStream(body(), headers=headers, on_end=left)


class _RunStream(StreamingResponse):
    """A run's SSE stream; when it ends (the run's end, or its client gone), `on_end` runs.

    Its frames are closed then, not whenever the garbage collector gets to them, and
    `on_end` runs outside the response's cancelled scope, so it can wait for what it asks.
    """

    def __init__(
        self,
        frames: AsyncIterator[str],
        *,
        headers: dict[str, str],
        on_end: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(frames, media_type="text/event-stream", headers=headers)
        self.on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the frames; then close them and run `on_end`."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                await close()
            await self.on_end()


def sse_error(exc: Exception) -> str:
    """A failed stream's last frame (`event: error`)."""
    data = json.dumps({"error": type(exc).__name__, "message": str(exc)})
    return f"event: error\r\ndata: {data}\r\n\r\n"


def final_values(run: LgRun) -> dict[str, Any] | None:
    """What `wait` and `join` answer for an ended run (None: its events were dropped)."""
    if run.events is None:
        return None
    if run.error is not None:
        return {"__error__": {"error": run.error.kind, "message": run.error.message}}
    msgs = list(run.initial)
    interrupts: list[dict[str, Any]] = []
    for event in run.events:
        if isinstance(event, MessageCompleted):
            msgs.append(event.msg)
        elif isinstance(event, ApprovalRequested):
            interrupts = interrupt_dicts(event.interrupt_id, event.calls)
    values: dict[str, Any] = {"messages": messages_of(msgs)}
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


async def _result(state: ServiceState, run: LgRun) -> AsyncIterator[str]:
    while not run.done.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.done.wait(), HEARTBEAT_SECONDS)
        if not run.done.is_set():
            yield "\n"  # keeps proxies from cutting a long wait; JSON ignores it
    values = final_values(run)
    if values is None:
        values = await thread_values(state.store, run.thread_id, run.user_id)
    yield json.dumps(values, ensure_ascii=False)


def result_response(state: ServiceState, run: LgRun, *, location: str) -> StreamingResponse:
    """The thread's values at the run's end (`wait`, `join`), `Location` where to ask again."""
    headers = {"Location": location, "Content-Location": run_path(run)}
    return StreamingResponse(_result(state, run), media_type="application/json", headers=headers)
