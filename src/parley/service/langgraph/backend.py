"""Where LangGraph's routes get runs from: the store, so any replica serves any run.

A run is parley's run (a job row in the store, run by whichever worker holds it); the
LangGraph options it was made with (`kwargs`, `metadata`, `multitask_strategy`,
`on_completion`, `stream_resumable`...) are stored in its record's `kwargs` when it is made.
Get, list and join read the record; streams follow the run's event log
(`ServiceState.events`, numbered 1, 2, 3... by its worker), from any replica; the thread as
the run started (what its `values` frames grow from) is read from the store too
(`initial_messages`). Nothing about a run is kept in this process but the task that deletes
a stateless run's thread at its end (`on_completion: delete`, once its stream or wait there
has read it), on the replica that made it.

Retention is the event log's: a run's events are kept `event_retention` seconds after its
end, whether it was made `stream_resumable` or not; after that a replay is 410.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from parley.agents.events import AgentEvent
from parley.errors import NotFoundError
from parley.messages import Msg
from parley.service.registry import AgentEntry
from parley.service.runs_protocol import CancelAction, EventLog, MultitaskStrategy, RunInput
from parley.service.state import ServiceState
from parley.service.store import RunRecord
from parley.service.store.tables import utcnow

__all__ = [
    "ASSISTANT_NAMESPACE",
    "STATELESS_GRACE",
    "LangGraphRuns",
    "assistant_id",
    "lg_status",
    "options_of",
]

log = logging.getLogger("parley.service")

ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""The namespace of assistant ids (LangGraph's: a graph's assistant has the same id here)."""
_LIST_MAX = 1000
"""At most this many of a thread's runs are looked through to filter a list by status."""
STATELESS_GRACE = 30.0
"""How long (seconds, at most) a stateless run's thread outlives its end while its stream or
wait on the replica that made it still reads it; then it is deleted (`on_completion`)."""
_JOIN_WAIT = 24 * 3600.0
"""How long the task of `on_completion: delete` waits for its run's end (seconds)."""

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


def options_of(record: RunRecord) -> dict[str, Any]:
    """The LangGraph options a run was made with (empty for a run made elsewhere)."""
    return dict(record.kwargs or {})


class LangGraphRuns:
    """LangGraph's runs, read from the store; starting them on the service's `RunManager`."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.started = utcnow()
        """When this process began serving LangGraph's API (its assistants' times)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._readers: dict[str, int] = {}
        self._unread: dict[str, asyncio.Event] = {}
        self._reserved: set[str] = set()

    @property
    def events(self) -> EventLog:
        """The service's event log (every run's events, from any replica)."""
        if self.state.events is None:  # the app always opens one; a bare state may not
            raise RuntimeError("the service has no event log: LangGraph's streams need one")
        return self.state.events

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
        read_here: bool = False,
    ) -> RunRecord:
        """Start a run of the agent on the caller's thread; it goes on without its client.

        `options` (the run's LangGraph options) are stored with it. Returns its record.
        `read_here`: the request streams or waits for it (a stateless run's thread stays
        until it has, even when the run ends before its response starts).

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
            kwargs=options,
        )
        record = await self.state.store.get_run(handle.run_id, user_id)
        if record is None:  # ended and rolled back already (a newer run's rollback)
            raise NotFoundError(f"run {handle.run_id!r} was removed as it started", status_code=404)
        if options.get("on_completion") == "delete":
            if read_here:
                self._reserved.add(record.run_id)
                self._enter(record.run_id)
            self._spawn(self._delete_thread_after(record))
        return record

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete_thread_after(self, record: RunRecord) -> None:
        """A stateless run's thread goes when the run ends (LangGraph's `on_completion`)."""
        try:
            await self.state.runs.join(record.run_id, record.user_id, _JOIN_WAIT)
            # Its stream or wait here reads the thread to its end first (bounded).
            unread = self._unread.get(record.run_id)
            if unread is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STATELESS_GRACE):  # wait_for may eat a cancel
                        await unread.wait()
            if record.run_id in self._reserved:  # its response never began reading it
                self._reserved.discard(record.run_id)
                self._leave(record.run_id)
            await self.state.store.delete_thread(record.thread_id, record.user_id)
        except Exception:  # its thread stays: only a leftover, the run is told as it ended
            log.exception("langgraph: could not delete the thread of run %s", record.run_id)

    @contextlib.asynccontextmanager
    async def reading(self, run_id: str) -> AsyncIterator[None]:
        """While a stream or a wait here reads the run (a stateless run's thread stays)."""
        if run_id in self._reserved:  # counted as its run started
            self._reserved.discard(run_id)
        else:
            self._enter(run_id)
        try:
            yield
        finally:
            self._leave(run_id)

    def _enter(self, run_id: str) -> None:
        self._readers[run_id] = self._readers.get(run_id, 0) + 1
        self._unread.setdefault(run_id, asyncio.Event()).clear()

    def _leave(self, run_id: str) -> None:
        left = self._readers.pop(run_id, 1) - 1
        if left > 0:
            self._readers[run_id] = left
            return
        unread = self._unread.pop(run_id, None)
        if unread is not None:
            unread.set()

    async def read_to_end(self, record: RunRecord) -> None:
        """A reader here read the ended run to its end; the last one ends a stateless run.

        Its thread is deleted now (`on_completion: delete`), before its client hears the end.
        """
        if options_of(record).get("on_completion") != "delete":
            return
        if self._readers.get(record.run_id, 0) > 1:
            return  # the last reader does it
        await self.state.store.delete_thread(record.thread_id, record.user_id)

    async def get(self, run_id: str, user_id: str) -> RunRecord | None:
        """The store's record of a run of `user_id`'s (None: unknown or deleted)."""
        return await self.state.store.get_run(run_id, user_id)

    async def of_thread(
        self, thread_id: str, user_id: str, *, limit: int, offset: int, status: str | None
    ) -> list[RunRecord]:
        """The thread's runs, newest first (`status`: LangGraph's, only those)."""
        if status is None:
            return await self.state.store.list_runs(user_id, thread_id, limit=limit, offset=offset)
        found = await self.state.store.list_runs(user_id, thread_id, limit=_LIST_MAX)
        kept = [r for r in found if lg_status(r.status) == status]
        return kept[offset : offset + limit]

    async def active_on(self, thread_id: str, user_id: str) -> list[RunRecord]:
        """The runs going or waiting on the thread, wherever they run."""
        return await self.state.store.active_runs(thread_id, user_id)

    async def wait(self, record: RunRecord, timeout: float) -> RunRecord:
        """The run's record at its end, or after `timeout` seconds as it is then."""
        return await self.state.runs.join(record.run_id, record.user_id, timeout)

    async def cancel(self, run_id: str, user_id: str, action: CancelAction = "interrupt") -> None:
        """Stop a run of `user_id`'s: `interrupted`, keeping its partial answer (`rollback`: gone).

        Raises:
            NotFoundError: No such run of theirs (404).
        """
        await self.state.runs.cancel(run_id, user_id, action=action, wait=0)

    async def delete(self, run_id: str, user_id: str) -> None:
        """Delete a run (a live one is stopped first; 404 after)."""
        await self.state.runs.delete(run_id, user_id)

    def follow(self, record: RunRecord, after: int) -> AsyncIterator[tuple[int, AgentEvent]]:
        """The run's stored events after `after`, then its live ones, to its end."""
        return self.events.follow(record.run_id, after)

    async def initial_messages(self, record: RunRecord) -> list[Msg]:
        """The thread as the run started, its question in it (read from the store).

        The thread's messages before the run's first stored one, then its question (from its
        stored input) when the thread does not hold it yet. (A run that stored nothing yet
        takes the whole thread: its question is stored as it opens the thread.)
        """
        rows = await self.state.store.get_messages(record.thread_id, record.user_id)
        first = next((i for i, (_, run) in enumerate(rows) if run == record.run_id), len(rows))
        before = [m for m, _ in rows[:first]]
        question = _question(record)
        if question is not None and all(m.id != question.id for m in before):
            before.append(question)
        return before

    async def close(self) -> None:
        """Stop the tasks waiting to delete stateless runs' threads."""
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _question(record: RunRecord) -> Msg | None:
    if not record.input:
        return None
    try:
        return RunInput.model_validate(record.input).message
    except ValueError:  # a record of an older shape: no question to add
        return None
