"""What LangGraph's run routes answer: runs as `Run`s, streams of frames, and results.

A stream follows the run's event log (`LangGraphRuns.follow`, any replica's) from its first
event, makes its frames (`streams.FrameMaker`, from the thread as the run started, read from
the store) and sends those after the frame the client has, with heartbeats; when it ends
(the run's end, or its client gone) its frames are closed at once and, with
`on_disconnect: cancel`, a run still going is stopped. A result (`wait`, `join`) is the
thread's values at the run's end (from the log), newlines before it while the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from parley.agents.events import ApprovalRequested, MessageCompleted, RunError
from parley.errors import NotFoundError
from parley.messages import Msg
from parley.service.langgraph.backend import LangGraphRuns, assistant_id, lg_status, options_of
from parley.service.langgraph.convert import messages_of
from parley.service.langgraph.state import thread_values
from parley.service.langgraph.streams import FrameMaker, interrupt_dicts, sse
from parley.service.runs_protocol import ACTIVE_STATUSES, EventsExpiredError
from parley.service.sse import HEARTBEAT_INTERVAL, FrameId, with_heartbeats
from parley.service.store import RunRecord

__all__ = [
    "HEARTBEAT_SECONDS",
    "SSE_HEADERS",
    "created_run_dict",
    "final_values",
    "result_response",
    "run_dict",
    "run_path",
    "sse_error",
    "stream_response",
]

HEARTBEAT_SECONDS = HEARTBEAT_INTERVAL
"""How long a stream or a wait stays silent before it sends a keep-alive."""
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def run_path(run: RunRecord) -> str:
    """The run's path under the mount (`Content-Location`): stateless runs have their own."""
    if options_of(run).get("stateless"):
        return f"/runs/{run.run_id}"
    return f"/threads/{run.thread_id}/runs/{run.run_id}"


def run_dict(run: RunRecord) -> dict[str, Any]:
    """A run (its store record, with the LangGraph options stored in it) as LangGraph's `Run`."""
    options = options_of(run)
    created = run.queued_at or run.started_at
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": assistant_id(run.agent),
        "created_at": created.isoformat(),
        "updated_at": (run.ended_at or run.started_at).isoformat(),
        "status": lg_status(run.status),
        "metadata": dict(options.get("metadata") or {}),
        "multitask_strategy": str(options.get("multitask_strategy") or run.multitask_strategy),
        "kwargs": {k: v for k, v in options.items() if k != "stateless"},
    }


def created_run_dict(run: RunRecord) -> dict[str, Any]:
    """A run as its creation answers it: `pending`, as it was made.

    LangGraph's server answers a new run as it was made, however far it has gone by the time
    the answer is written (a quick run may have ended already; `GET` tells where it is now).
    """
    made = run_dict(run)
    return made | {"status": "pending", "updated_at": made["created_at"]}


def _maker(run: RunRecord, modes: frozenset[str], initial: list[Msg]) -> FrameMaker:
    return FrameMaker(
        run_id=run.run_id,
        thread_id=run.thread_id,
        assistant_id=assistant_id(run.agent),
        graph_id=run.agent,
        modes=modes,
        initial=initial,
    )


async def _frames(
    backend: LangGraphRuns, run: RunRecord, modes: frozenset[str], last: FrameId
) -> AsyncIterator[str]:
    """The run's SSE text after the frame `last`, read from its event log.

    Every event is read from the first, those whose frames are not sent too: they make the
    values the later frames hold.
    """
    maker: FrameMaker | None = None  # made at the first event: a queued run's thread is
    # read once a worker opened it
    async with backend.reading(run.run_id):
        async for seq, event in backend.follow(run, 0):
            if maker is None:
                maker = _maker(run, modes, await backend.initial_messages(run))
            for part, frame in enumerate(maker.frames(seq, event)):
                if (seq, part) > last:
                    yield sse(frame)
        await backend.read_to_end(run)


async def _chained(first: asyncio.Future[str], rest: AsyncIterator[str]) -> AsyncIterator[str]:
    """The frame `first` will be, then the others (`rest` is closed at the end, now)."""
    try:
        try:
            text = await first
        except StopAsyncIteration:
            return
        yield text
        async for text in rest:
            yield text
    finally:
        if not first.done():
            first.cancel()
            with contextlib.suppress(BaseException):
                await first
        close = getattr(rest, "aclose", None)
        if close is not None:
            await close()


async def stream_response(
    backend: LangGraphRuns,
    run: RunRecord,
    modes: frozenset[str],
    after: FrameId | None,
    *,
    cancel_on_disconnect: bool,
) -> StreamingResponse:
    """The run's stream after the frame `after` (None: live), `Location` its own path.

    Raises:
        UnknownEventIdError: `after` names no event of the run (400).
        EventsExpiredError: The run's events are no longer kept (410).
    """
    # 400 and 410 now, before the stream starts; and where "live" begins.
    start = await backend.events.check(run.run_id, None if after is None else after[0])
    last = after if after is not None else (start or 0, 1 << 30)

    async def body() -> AsyncIterator[str]:
        source = _frames(backend, run, modes, last)
        # Its first frame (`metadata`) leads, as LangGraph's does, unless it is a real
        # heartbeat's time coming (a queued run).
        first = asyncio.ensure_future(anext(source))
        try:
            await asyncio.wait({first}, timeout=HEARTBEAT_INTERVAL)
        except BaseException:
            first.cancel()
            raise
        frames = with_heartbeats(_chained(first, source), HEARTBEAT_SECONDS)
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
        if not cancel_on_disconnect:
            return
        now = await backend.get(run.run_id, run.user_id)
        if now is not None and now.status in ACTIVE_STATUSES:
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


async def final_values(backend: LangGraphRuns, run: RunRecord) -> dict[str, Any]:
    """What `wait` and `join` answer for an ended run: the thread's values at its end.

    Read from the run's event log (its thread as it started, and what it added); once its
    events are no longer kept, the thread as it is now.
    """
    msgs: list[Msg] | None = None
    interrupts: list[dict[str, Any]] = []
    try:
        async for _, event in backend.follow(run, 0):
            if msgs is None:
                msgs = await backend.initial_messages(run)
            if isinstance(event, RunError):
                return {"__error__": {"error": event.kind, "message": event.message}}
            if isinstance(event, MessageCompleted):
                msgs.append(event.msg)
            elif isinstance(event, ApprovalRequested):
                interrupts = interrupt_dicts(event.interrupt_id, event.calls)
    except (EventsExpiredError, NotFoundError):
        msgs = None
    if msgs is None:  # no events kept (or none written): the thread as it is
        return await thread_values(backend.state.store, run.thread_id, run.user_id)
    values: dict[str, Any] = {"messages": messages_of(msgs)}
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


async def _result(backend: LangGraphRuns, run: RunRecord) -> AsyncIterator[str]:
    async with backend.reading(run.run_id):
        while True:
            now = await backend.wait(run, HEARTBEAT_SECONDS)
            if now.status not in ACTIVE_STATUSES:
                break
            yield "\n"  # keeps proxies from cutting a long wait; JSON ignores it
        values = await final_values(backend, run)
        await backend.read_to_end(run)
    yield json.dumps(values, ensure_ascii=False)


def result_response(backend: LangGraphRuns, run: RunRecord, *, location: str) -> StreamingResponse:
    """The thread's values at the run's end (`wait`, `join`), `Location` where to ask again."""
    headers = {"Location": location, "Content-Location": run_path(run)}
    return StreamingResponse(_result(backend, run), media_type="application/json", headers=headers)
