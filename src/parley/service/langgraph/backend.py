"""Where LangGraph's routes get runs from: the one place that knows how runs are driven.

Runs start on the service's `RunManager` (the thread's lock, the store, approvals) and go on
when their client leaves (LangGraph's `on_disconnect` default, `continue`): a task of this
module reads each run's events to its end and keeps them, numbered 1, 2, 3..., for every
reader of the run (its stream, a `join_stream` later with `Last-Event-ID`, a `join`). A run
this process did not start (another replica's, or from before a restart) is read from the
store: its record and its thread, not its events.

The events of a finished run are kept `event_retention` seconds when it was created
`stream_resumable` (`UNRESUMABLE_GRACE` else), then dropped (a replay asks for them: 410); its
summary (status, options) stays, for the last `_KEPT_RUNS` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from parley.agents.events import AgentEvent, RunEnded, RunError
from parley.messages import Msg
from parley.service.registry import AgentEntry
from parley.service.runs import RunHandle
from parley.service.runs_protocol import (
    CancelAction,
    EventsExpiredError,
    MultitaskStrategy,
    UnknownEventIdError,
)
from parley.service.state import ServiceState
from parley.service.store import RunRecord
from parley.service.store.tables import utcnow

__all__ = [
    "ASSISTANT_NAMESPACE",
    "UNRESUMABLE_GRACE",
    "LangGraphRuns",
    "LgRun",
    "assistant_id",
    "lg_status",
]

log = logging.getLogger("parley.service")

ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""The namespace of assistant ids (LangGraph's: a graph's assistant has the same id here)."""
_KEPT_RUNS = 1000
UNRESUMABLE_GRACE = 30.0
"""Seconds a run not created `stream_resumable` keeps its events after its end: enough for a
client cut off near the end to reconnect (the SDKs try five times within about 25 s)."""

_STATUS = {
    "completed": "success",
    "max_iters": "success",
    "awaiting_approval": "success",  # LangGraph: the run succeeded, its thread is interrupted
    "success": "success",
    "interrupted": "interrupted",
    "error": "error",
    "timeout": "timeout",
    "running": "running",
    "pending": "pending",
}


def assistant_id(agent_key: str) -> str:
    """The assistant id of a served agent (its graph id is its key)."""
    return str(uuid.uuid5(ASSISTANT_NAMESPACE, agent_key))


def lg_status(status: str) -> str:
    """A parley run status as LangGraph's (`pending`, `running`, `success`, ...)."""
    return _STATUS.get(status, "error")


@dataclass
class LgRun:
    """A run as LangGraph's routes know it: parley's run and the options it was made with."""

    run_id: str
    thread_id: str
    user_id: str
    agent: str
    created_at: datetime
    kwargs: dict[str, Any]
    metadata: dict[str, Any]
    multitask_strategy: str
    initial: list[Msg] = field(default_factory=list)
    """The thread as the run started (its question in it)."""
    events: list[AgentEvent] | None = field(default_factory=list)
    """Its events so far (event N is `events[N-1]`); None once dropped after retention."""
    status: str = "running"
    updated_at: datetime = field(default_factory=utcnow)
    error: RunError | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    on_completion: str = "keep"
    _grew: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: AgentEvent) -> None:
        """Keep the run's next event and wake its readers."""
        if self.events is not None:
            self.events.append(event)
        self._grew.set()
        self._grew = asyncio.Event()

    async def follow(self, after: int | None) -> AsyncIterator[tuple[int, AgentEvent]]:
        """Its events with their numbers, those after `after` (None: from now), to the end.

        Raises:
            EventsExpiredError: Its events were dropped (retention).
            UnknownEventIdError: `after` is beyond its last event, and it ended.
        """
        if self.events is None:
            raise EventsExpiredError(self.run_id)
        start = len(self.events) if after is None else after
        if after is not None and after > len(self.events) and self.done.is_set():
            raise UnknownEventIdError(self.run_id, str(after))
        seq = start
        while True:
            events = self.events
            if events is None:
                raise EventsExpiredError(self.run_id)
            while seq < len(events):
                seq += 1
                yield seq, events[seq - 1]
            if self.done.is_set():
                return
            await self._grew.wait()


class LangGraphRuns:
    """The runs LangGraph's routes started in this process, by id."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.started = utcnow()
        """When this process began serving LangGraph's API (its assistants' times)."""
        self.runs: OrderedDict[str, LgRun] = OrderedDict()
        self.deleted: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(
        self,
        entry: AgentEntry,
        *,
        user_id: str,
        thread_id: str,
        message: Msg | None,
        resume: tuple[str, bool | Mapping[str, bool]] | None,
        history: Sequence[Msg],
        options: dict[str, Any],
        multitask_strategy: MultitaskStrategy = "enqueue",
    ) -> LgRun:
        """Start a run of the agent on the caller's thread; it goes on without its client.

        Raises:
            ConflictError: The thread stayed busy for `busy_timeout` (409).
            NotFoundError: The interrupt to resume is unknown (404).
        """
        agent = self.state.agent_for(entry, None)
        # An approval's answer runs at once (the queue takes none); the routes refuse a busy
        # thread for `reject` themselves, at once.
        handle = await self.state.runs.start(
            agent,
            agent_key=entry.key,
            user_id=user_id,
            thread_id=thread_id,
            message=message,
            resume=resume,
            history=history,
            multitask_strategy="reject" if resume is not None else multitask_strategy,
        )
        run = LgRun(
            run_id=handle.run_id,
            thread_id=thread_id,
            user_id=user_id,
            agent=entry.key,
            created_at=utcnow(),
            kwargs=options,
            metadata=dict(options.get("metadata") or {}),
            multitask_strategy=str(options.get("multitask_strategy") or "enqueue"),
            on_completion=str(options.get("on_completion") or "keep"),
        )
        self._keep(run)
        task = asyncio.create_task(self._read(run, handle, message), name=f"langgraph-{run.run_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    def _keep(self, run: LgRun) -> None:
        self.runs[run.run_id] = run
        while len(self.runs) > _KEPT_RUNS:
            self.runs.popitem(last=False)

    async def _read(self, run: LgRun, handle: RunHandle, message: Msg | None) -> None:
        try:
            async for event in handle.events():
                if not run.events:  # its first: the run has opened its thread (a queued
                    # run only when a worker took it)
                    run.initial = await _initial(handle, message)
                if isinstance(event, RunError):
                    run.error = event
                if isinstance(event, RunEnded):
                    run.status = lg_status(event.status)
                run.add(event)
        except Exception:  # the run is stored; only its readers here lose the rest
            log.exception("langgraph: lost the events of run %s", run.run_id)
            run.status = "error"
        finally:
            run.updated_at = utcnow()
            if run.on_completion == "delete":
                with contextlib.suppress(Exception):
                    await self.state.store.delete_thread(run.thread_id, run.user_id)
            run.done.set()
            run._grew.set()
            asyncio.get_running_loop().call_later(self._kept_for(run), _drop_events, run)

    def _kept_for(self, run: LgRun) -> float:
        """How long an ended run keeps its events (seconds).

        `event_retention` when it was created `stream_resumable` (LangGraph keeps only those),
        else `UNRESUMABLE_GRACE`.
        """
        retention = self.state.settings.event_retention
        return (
            retention if run.kwargs.get("stream_resumable") else min(retention, UNRESUMABLE_GRACE)
        )

    def get(self, run_id: str, user_id: str) -> LgRun | None:
        """The run if this process started it for `user_id` (and it was not deleted)."""
        run = self.runs.get(run_id)
        if run is None or run.user_id != user_id or run_id in self.deleted:
            return None
        return run

    async def record(self, run_id: str, user_id: str) -> RunRecord | None:
        """The store's record of a run of `user_id`'s (None: unknown, or deleted here)."""
        if run_id in self.deleted:
            return None
        return await self.state.store.get_run(run_id, user_id)

    def of_thread(self, thread_id: str, user_id: str) -> list[LgRun]:
        """The runs this process started on the thread, newest first."""
        found = [
            r
            for r in self.runs.values()
            if r.thread_id == thread_id and r.user_id == user_id and r.run_id not in self.deleted
        ]
        return found[::-1]

    def active_on(self, thread_id: str, user_id: str) -> list[LgRun]:
        """The runs still going on the thread (started here)."""
        return [r for r in self.of_thread(thread_id, user_id) if not r.done.is_set()]

    async def cancel(self, run_id: str, user_id: str, action: CancelAction = "interrupt") -> None:
        """Stop a run of `user_id`'s: `interrupted`, keeping its partial answer (`rollback`: gone).

        Raises:
            NotFoundError: No such run of theirs (404).
        """
        await self.state.runs.cancel(run_id, user_id, action=action, wait=0)

    def forget(self, run_id: str) -> None:
        """Delete a run as LangGraph's routes see it (404 after)."""
        self.deleted.add(run_id)
        self.runs.pop(run_id, None)

    async def close(self) -> None:
        """Wait (a little) for the readers of runs to end; the runs stop with the service."""
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)


async def _initial(handle: RunHandle, message: Msg | None) -> list[Msg]:
    """The thread as the run opened it; its question is added by the run itself."""
    initial = await handle.memory.get() if handle.memory is not None else []
    if message is not None and all(m.id != message.id for m in initial):
        initial.append(message)
    return initial


def _drop_events(run: LgRun) -> None:
    # Its thread as it started goes too: only its events' readers needed it.
    run.events = None
    run.initial = []
    for key in ("input", "command"):  # its messages: the thread keeps them
        run.kwargs.pop(key, None)
