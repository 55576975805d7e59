"""Runs on threads: queued as jobs, claimed under the thread's lock, driven in their own task.

A run is not the request that started it. `RunManager.start` takes the thread's lock (waiting
up to `busy_timeout`, then 409), loads the thread, and starts the agent in a task of its own,
whose events reach the request through a queue. So a client that goes away does not cancel
the run's clean-up half-way: the request only asks the run to stop (`cancel()`), and the run
stops its model stream or tools, keeps the partial answer (marked interrupted), records how it
ended, and only then lets the next run on the thread in.

The run's messages go to the store as the agent completes them (`ThreadMemory`): its question
in the transaction that records the run, its answer in the one that records its end, and
each message between them in one of its own. So when the run's end is told (an `/invoke`
answered, a stream's last frame), its question, answer, record and usage are stored; if
that last transaction fails, the run is told as failed.

A run's events wait for their reader in a queue of their own. When the reader is a client's
stream (`RunHandle.limit_reader`), the queue is bounded by `buffer_bytes` (about: text and
audio by their size, and half a kilobyte an event): a reader that falls that far behind (a
client that does not read its stream) is let go: the queue is emptied, the reader gets
`ReaderDropped`, and later events are thrown away, while the run goes on to its end and is
stored as any other. A reader that leaves of its own accord (a client gone) cancels the run
instead. A reader in this process (`/invoke` waiting for the answer) takes every event as it
comes, unbounded.

`POST /runs/{id}/cancel` reaches a run in this process at once, and one in another process
through the store: every process polls the cancel flags of its own runs. A run whose
process was killed is marked `interrupted` by the cancel itself (nobody holds its thread's
lock), or else by the next run on its thread, or it is taken over.

Every run is a job (`store.queue`): a `reject` run (the toolkit's default) is recorded
already claimed by this process once it has the thread's lock; any other run is queued
`pending` and claimed by a worker when its thread is free: this process at once when it can
(`submit`), else whichever worker polls first (`RunWorker`), here or in another replica. A
request here that waits for a queued run holds a handle reserved for this process. The
worker renews its leases (`renew`); a run whose lease lapsed is taken over by another
worker and continued from its stored thread; every end is fenced to the worker and attempt
that hold the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from functools import partial
from typing import Any

from parley.agents import Agent, AgentRun, Memory, Middleware
from parley.agents.approval import unanswered_calls
from parley.agents.events import (
    AgentEvent,
    ApprovalRequested,
    AudioDelta,
    MessageCompleted,
    RunEnded,
    RunError,
    RunStarted,
    RunStatus,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
)
from parley.errors import ConfigurationError, ConflictError, NotFoundError, UserError
from parley.messages import Msg
from parley.service.auth import check_tools_reachable
from parley.service.runs_protocol import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    CancelAction,
    EventLog,
    EventRows,
    EventWriter,
    MultitaskStrategy,
    RunInput,
)
from parley.service.store import RunRecord, Store, ThreadLocks
from parley.service.store.locks import Lease
from parley.service.store.queue import Candidate, RunQueue, new_run_id
from parley.service.store.runners import DATABASE_DOWN, is_database_down
from parley.service.store.store import LockCarrier, OpenedRun, RunJob

__all__ = [
    "DEFAULT_BUFFER_BYTES",
    "AgentResolver",
    "ReaderDropped",
    "RunHandle",
    "RunManager",
    "ThreadMemory",
]

log = logging.getLogger("parley.service")

CANCEL_POLL_SECONDS = 0.5
"""How often a process checks the store for cancel requests of its runs (made elsewhere)."""
JOIN_POLL_SECONDS = 0.2
"""How often a join reads a run that runs in another process."""
"""How often a process checks the store for cancel requests of its runs (made elsewhere)."""
_SHUTDOWN_GRACE = 5.0
DEFAULT_BUFFER_BYTES = 4 * 1024 * 1024
"""How far (about, in bytes) a run's events may run ahead of their reader by default."""
_EVENT_WEIGHT = 512
"""What a queued event counts for beyond its text or audio: its object, its other fields
(a small `TextDelta` takes about 550 bytes in all)."""


class ThreadMemory(Memory):
    """An agent's memory backed by a thread in the store (read once, appended as it goes).

    The run holds the thread's lock, so the copy read at the start stays the thread's truth.
    Messages stored before the run began (`load`'s `stored_ahead`: its question, with its
    record) are not stored again. An answer (an assistant message calling no tool: the run
    ends after it, bar a structured answer's extra turn) is held back for the run's last
    transaction (`take_held`), and written first by any later `add`.
    """

    def __init__(
        self, store: Store, thread_id: str, user_id: str, msgs: Sequence[Msg] = ()
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.user_id = user_id
        self.run_id: str | None = None
        self._msgs = list(msgs)
        self._ahead: set[str] = set()
        self._held: list[Msg] = []

    def load(self, msgs: Sequence[Msg], *, stored_ahead: Sequence[Msg] = ()) -> None:
        """Start from `msgs` (the thread read as the run opened) and what it stored ahead."""
        self._msgs = list(msgs)
        self._ahead = {m.id for m in stored_ahead}

    async def add(self, msgs: Msg | Sequence[Msg]) -> None:
        """Store messages in the thread (one transaction), then remember them."""
        batch = [msgs] if isinstance(msgs, Msg) else list(msgs)
        fresh = [m for m in batch if m.id not in self._ahead]
        self._ahead.difference_update(m.id for m in batch)
        unwritten = [*self._held, *fresh]
        if fresh and _is_answer(fresh[-1]):
            self._held = unwritten
        else:
            await self.store.add_messages(self.thread_id, self.user_id, unwritten, self.run_id)
            self._held = []
        self._msgs.extend(batch)

    def take_held(self) -> list[Msg]:
        """The messages held back for the run's last transaction (none are held after)."""
        held, self._held = self._held, []
        return held

    async def get(self) -> list[Msg]:
        """The thread's messages, oldest first."""
        return list(self._msgs)

    async def clear(self) -> None:
        """Forget the thread's messages, in the store too."""
        await self.store.clear_messages(self.thread_id, self.user_id)
        self._msgs.clear()
        self._held.clear()


def _is_answer(msg: Msg) -> bool:
    return msg.role == "assistant" and not msg.tool_calls


class ReaderDropped(Exception):  # noqa: N818 - what happened, not a failure of the run
    """The run's reader fell too far behind and was let go; the run goes on without it."""


def _weight(event: AgentEvent | None) -> int:
    """About how many bytes an event holds while it waits: its text or audio, and a bit."""
    if isinstance(event, AudioDelta):
        return _EVENT_WEIGHT + len(event.data)
    if isinstance(event, TextDelta | ThinkingDelta):
        return _EVENT_WEIGHT + len(event.text)
    if isinstance(event, ToolCallArgumentsDelta):
        return _EVENT_WEIGHT + len(event.delta)
    if isinstance(event, MessageCompleted):
        return _EVENT_WEIGHT + len(event.msg.text)
    return _EVENT_WEIGHT


class RunHandle:
    """A started run: its ids, its events (for one reader), and a way to stop it.

    Args:
        buffer_bytes: How far (about, in bytes) the run's events may get ahead of a client's
            stream before it is dropped (`limit_reader`; see the module's docstring).
    """

    def __init__(
        self,
        run: AgentRun,
        thread_id: str,
        agent: str,
        memory: ThreadMemory | None = None,
        *,
        user_id: str,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        wants_snapshot: bool = False,
    ) -> None:
        self.run = run
        self.run_id = run.run_id
        self.memory = memory
        self.thread_id = thread_id
        self.user_id = user_id
        self.agent = agent
        self.done = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.wants_snapshot = wants_snapshot
        self.snapshot: list[Msg] | None = None
        """With `wants_snapshot`, the thread's messages as stored when the run ended, read
        before its lock was released; None until then, or when they could not be read."""
        self.dropped = False
        """Whether the reader was let go (it fell behind); the run goes on without it."""
        self.attempt = 1
        """Which start of the run this copy is (a takeover's is 2 or more)."""
        self.background = False
        """Whether a worker took it from the queue (it counts against `run_concurrency`)."""
        self.lost = False
        """Whether this worker lost the run (its lease lapsed, another may hold it): this
        copy stops and writes nothing more about it."""
        self.cancel_action: CancelAction = "interrupt"
        self.submits_seen = 0
        """The manager's count of queued runs when this one started (`_wake_for`)."""
        self.on_early_cancel: Callable[[], None] | None = None
        """Called by `cancel()` while the run waits its turn (not started yet)."""
        self._buffer_bytes = buffer_bytes
        self._limited = False
        self._end_only = False
        self._on_drop: Callable[[], None] | None = None
        self._queue: deque[tuple[AgentEvent | None, int]] = deque()
        self._queued = 0
        self._ready = asyncio.Event()

    def cancel(self, action: CancelAction = "interrupt") -> None:
        """Ask the run to stop; it ends `interrupted`, keeping its partial answer.

        With `rollback`, the run and its messages are deleted as it stops instead. A run
        still waiting its turn ends without starting.
        """
        if self.done.is_set():
            return
        if action == "rollback":
            self.cancel_action = action
        if self.task is None:
            if self.on_early_cancel is not None:
                self.on_early_cancel()
            return
        self.run.cancel()

    def end_unstarted(self, status: RunStatus, error: str | None = None) -> None:
        """End a run that never started (cancelled or ended while waiting its turn)."""
        if self.done.is_set():
            return
        self.done.set()
        if error is not None:
            self.put(RunError(message=error, kind="RunNotStarted"))
        self.put(RunEnded(status=status))
        self.put(None)

    async def events(self) -> AsyncIterator[AgentEvent]:
        """The run's events as they happen, ending with `RunEnded`.

        Raises:
            ReaderDropped: The reader fell too far behind and was let go.
        """
        while (event := await self.next_event()) is not None:
            yield event

    async def next_event(self) -> AgentEvent | None:
        """The run's next event; None after `RunEnded`.

        For a reader that stops at `RunEnded`: an `events()` generator left there unfinished
        is closed by the garbage collector, through a wake-up of the event loop.

        Raises:
            ReaderDropped: The reader fell too far behind and was let go.
        """
        while not self._queue:
            if self.dropped:
                raise ReaderDropped(f"the reader of run {self.run_id} fell behind")
            self._ready.clear()
            await self._ready.wait()
        event, weight = self._queue.popleft()
        self._queued -= weight
        return event

    def put(self, event: AgentEvent | None) -> None:
        """Hand an event (None: the end) to the reader; drop the reader if it is too far behind."""
        if self.dropped:
            return
        if self._end_only and event is not None and not isinstance(event, RunEnded | RunError):
            return
        weight = _weight(event)
        if self._limited and self._queued + weight > self._buffer_bytes:
            log.warning(
                "run %s: its reader is %d bytes behind; dropped (the run goes on)",
                self.run_id,
                self._queued,
            )
            self.drop()
            return
        self._queue.append((event, weight))
        self._queued += weight
        self._ready.set()

    def end_only(self) -> None:
        """The reader wants only how the run ended: its `RunError` if any, its `RunEnded`.

        Its other events are let go as they come, and the reader is not woken for them: a
        request that waits for the answer (`/invoke`) would otherwise wake for every token.
        """
        self._end_only = True
        kept = [
            item
            for item in self._queue
            if item[0] is None or isinstance(item[0], RunEnded | RunError)
        ]
        self._queue = deque(kept)
        self._queued = sum(weight for _, weight in kept)

    def limit_reader(self) -> None:
        """Bound the queue by `buffer_bytes`: the reader is a client's stream, which may stall.

        Called as the stream is made, before the run's first event (the run's task has not
        run yet: starting it awaits nothing after making it).
        """
        self._limited = True

    def on_drop(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` when the reader is let go (to close its client's connection)."""
        self._on_drop = callback

    def drop(self) -> None:
        """Let the reader go: what waits for it is freed, and later events are thrown away.

        The run is not stopped: it goes on to its end, and is stored as any other.
        """
        if self.dropped:
            return
        self.dropped = True
        self._queue.clear()
        self._queued = 0
        self._ready.set()
        if self._on_drop is not None:
            self._on_drop()


AgentResolver = Callable[[str, RunInput], tuple[Agent, list[Middleware]]]
"""Builds a queued run's agent: from its agent's key and its input (model alias, speech),
the agent and the run's own middleware."""


class RunManager:
    """Starts, queues, claims, tracks and cancels the runs of this process (its worker).

    Args:
        store: The store the runs are kept in.
        locks: The threads' locks (one run per thread, across processes on PostgreSQL).
        busy_timeout: How long a `reject` run waits for a busy thread before a 409.
        buffer_bytes: How far a run's events may get ahead of a client's stream.
        lease_seconds: How long a claim on a run lasts unless renewed.
        max_attempts: Starts a run gets before it ends `error`.
        run_concurrency: Runs this process takes from the queue at once (0: none; runs a
            request here waits for are taken whatever the count).
        events: Where every event of every run is appended (`EventLog`), when set.
        resolve: Builds a queued run's agent (needed to run runs made elsewhere).
    """

    def __init__(
        self,
        store: Store,
        locks: ThreadLocks,
        *,
        busy_timeout: float,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        lease_seconds: float = 30.0,
        max_attempts: int = 3,
        run_concurrency: int = 16,
        events: EventLog | None = None,
        resolve: AgentResolver | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.store = store
        self.locks = locks
        self.busy_timeout = busy_timeout
        self.buffer_bytes = buffer_bytes
        self.run_concurrency = run_concurrency
        self.events = events
        self.resolve = resolve
        self.worker_id = (
            worker_id or f"{socket.gethostname()[:24]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        )
        self.queue = RunQueue(
            store,
            worker_id=self.worker_id,
            lease_seconds=lease_seconds,
            max_attempts=max_attempts,
        )
        self.active: dict[str, RunHandle] = {}
        """The runs this process runs now."""
        self.waiting: dict[str, RunHandle] = {}
        """Runs a request here waits for, still waiting their turn (reserved for this worker)."""
        self.wake = asyncio.Event()
        """Set when a thread may have a run ready (one ended): the worker polls at once."""
        self._poller: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._renewed_at = time.monotonic()
        self._claiming: set[str] = set()
        self._submits = 0
        """Runs queued here so far (`submit`): see `_wake_for`."""

    # -- starting runs ---------------------------------------------------------------------

    async def start(
        self,
        agent: Agent,
        *,
        agent_key: str,
        user_id: str,
        thread_id: str,
        message: Msg | None = None,
        resume: tuple[str, bool | Mapping[str, bool]] | None = None,
        history: Sequence[Msg] = (),
        middleware: Sequence[Middleware] = (),
        snapshot: bool = False,
        multitask_strategy: MultitaskStrategy = "reject",
        model: str | None = None,
        speak: bool = False,
        kwargs: dict[str, Any] | None = None,
    ) -> RunHandle:
        """Start a run of `agent` on the thread: a new `message`, or an approval's answer.

        `history` is the conversation before `message`, for a client that sends all of it
        (OpenAI's API): stored first when the thread holds no messages yet, ignored when it
        does (the stored thread is the truth). Checked under the thread's lock, so two
        requests seeding one new thread store it once. `middleware` is this run's own (a
        voice speaking its answer), after the agent's. With `snapshot`, the thread's messages
        are read as the run ends, before its lock is released (`RunHandle.snapshot`): no other
        run's message can be in them.

        `multitask_strategy` says what happens on a busy thread: `reject` waits up to
        `busy_timeout` for it, then 409; `enqueue` waits its turn after the thread's runs;
        `interrupt` stops them (keeping their partial answers) and `rollback` stops and
        deletes them, then it runs. `model` and `speak` are stored with the run (what a
        worker taking it over needs), and so are `kwargs` (the caller's options, read back
        in `RunRecord.kwargs`).

        A thread is `user_id`'s own: another user's thread of the same id is another thread.

        Raises:
            NotFoundError: The interrupt is another user's or unknown (to resume).
            ConflictError: The thread stayed busy for `busy_timeout`, or the interrupt was
                answered already.
            AuthenticationError: The request came from another machine and the agent has a
                tool that serves this machine only (403).
            UserError: A verdict names a call that does not wait, or a strategy other than
                `reject` was given with an approval's answer.
        """
        check_tools_reachable(agent)
        run_input = RunInput(
            message=message,
            resume=_stored_verdict(resume),
            history=list(history),
            model=model,
            speak=speak,
        )
        if multitask_strategy != "reject":
            if resume is not None:
                raise UserError("an approval's answer runs at once: send multitask_strategy reject")
            _, handle = await self.submit(
                agent_key=agent_key,
                user_id=user_id,
                thread_id=thread_id,
                run_input=run_input,
                multitask_strategy=multitask_strategy,
                kwargs=kwargs,
                waiting=(agent, list(middleware), snapshot),
            )
            assert handle is not None  # a run a request waits for has a handle
            return handle
        # A new message: the database's lock is taken with the run's opening (one round trip
        # for both, `open_run(lock=...)`); an approval's answer reads the thread first.
        deferred = resume is None
        lease = await self.locks.acquire(thread_id, user_id, self.busy_timeout, deferred=deferred)
        try:
            memory = ThreadMemory(self.store, thread_id, user_id)
            run = await self._prepare(agent, user_id, thread_id, memory, message, resume)
            run.use(*middleware)
            # In one transaction: the thread claimed (made when new), the run recorded, and
            # its question stored unless a call left open must be answered first (the run
            # stores that answer, then the question).
            question = [message] if message is not None else []
            opened = await self.store.open_run(
                run.run_id,
                thread_id,
                user_id,
                agent_key,
                str(agent.model.model),
                expire_approvals=resume is None,  # a new message goes past them
                seed=history,
                then=lambda found: [] if unanswered_calls(found) else question,
                job=RunJob(
                    self.worker_id,
                    self.queue.lease_seconds,
                    run_input.model_dump(mode="json"),
                    kwargs=kwargs,
                ),
                lock=lease.carrier,
            )
            memory.load(opened.history, stored_ahead=opened.added)
        except BaseException:
            await lease.release()
            raise
        handle = RunHandle(
            run,
            thread_id,
            agent_key,
            memory,
            user_id=user_id,
            buffer_bytes=self.buffer_bytes,
            wants_snapshot=snapshot,
        )
        self._launch(handle, lease)
        return handle

    async def submit(
        self,
        *,
        agent_key: str,
        user_id: str,
        thread_id: str,
        run_input: RunInput,
        multitask_strategy: MultitaskStrategy = "enqueue",
        kwargs: dict[str, Any] | None = None,
        model_name: str = "",
        waiting: tuple[Agent, list[Middleware], bool] | None = None,
    ) -> tuple[RunRecord, RunHandle | None]:
        """Queue a run (`pending`) on the thread, after making room as the strategy says.

        A worker takes it when its thread is free (this process at once, if it can). With
        `waiting` (the agent, the run's middleware, whether to snapshot), a request here
        waits for the run: it is reserved for this process, and its handle is returned.

        Raises:
            ConflictError: The thread is busy and the strategy is `reject` (409).
        """
        await self._make_room(thread_id, user_id, multitask_strategy)
        self._submits += 1  # a run ending meanwhile wakes the worker for it
        run_id = new_run_id()
        handle: RunHandle | None = None
        model = model_name
        if waiting is not None:
            agent, middleware, snapshot = waiting
            model = str(agent.model.model)
            memory = ThreadMemory(self.store, thread_id, user_id)
            run = _agent_run(agent, run_input, memory, user_id, run_id, attempt=1)
            run.use(*middleware)
            handle = RunHandle(
                run,
                thread_id,
                agent_key,
                memory,
                user_id=user_id,
                buffer_bytes=self.buffer_bytes,
                wants_snapshot=snapshot,
            )
            handle.on_early_cancel = lambda: self._spawn(self._cancel_waiting(run_id))
            self.waiting[run_id] = handle
        try:
            record = await self.queue.create(
                run_id,
                thread_id,
                user_id,
                agent_key,
                model,
                run_input,
                kwargs=kwargs,
                multitask_strategy=multitask_strategy,
                reserve=handle is not None,
            )
        except BaseException:
            self.waiting.pop(run_id, None)
            raise
        # The fast path: this process takes the run now when it can (no poll's delay).
        await self.try_claim(Candidate(run_id, thread_id, user_id))
        return record, handle

    async def _make_room(self, thread_id: str, user_id: str, strategy: MultitaskStrategy) -> None:
        """Apply the multitask strategy to the thread's running and waiting runs."""
        if strategy == "enqueue":
            return
        active = await self.store.active_runs(thread_id, user_id)
        if not active:
            return
        if strategy == "reject":
            raise ConflictError(
                f"thread {thread_id!r} is busy with another run; send multitask_strategy "
                "'enqueue' to run after it, or cancel it with POST /runs/{run_id}/cancel",
                status_code=409,
            )
        pending = [r.run_id for r in active if r.status == "pending"]
        reason = f"interrupted by a newer run on its thread (multitask_strategy {strategy})"
        for run_id in await self.store.end_pending(pending, "interrupted", reason):
            self._end_waiting(run_id, "interrupted")
        for record in active:
            if record.status == "running":
                await self._stop(record, strategy)

    # -- claiming runs from the queue ------------------------------------------------------

    def has_room(self) -> bool:
        """Whether this process takes one more run from the queue (`run_concurrency`)."""
        running = sum(1 for h in self.active.values() if h.background)
        return running < self.run_concurrency

    async def poll_once(self) -> int:
        """Take the runs this worker can from the queue now; how many it took."""
        await self.queue.give_up()
        room = self.run_concurrency - sum(1 for h in self.active.values() if h.background)
        found = await self.queue.candidates(max(room, 0) + len(self.waiting) + 4)
        taken = 0
        for candidate in found:
            if candidate.run_id not in self.waiting and not self.has_room():
                continue
            if await self.try_claim(candidate):
                taken += 1
        return taken

    async def try_claim(self, candidate: Candidate) -> bool:
        """Claim the run and start it here, if it is free to take now; whether it was."""
        if candidate.run_id not in self.waiting and not self.has_room():
            return False
        try:
            lease = await self.locks.acquire(candidate.thread_id, candidate.user_id, 0)
        except ConflictError:  # a run holds the thread: the run waits for it to end
            if not candidate.takeover:
                return False
            # The lock's holder stopped renewing the run's lease but its lock connection
            # lives on (a network that drops packets without a word keeps it open on the
            # server's side): the lease decides. Its every write is fenced, so it cannot
            # end or alter the run it lost.
            log.warning(
                "run %s: its worker's lease lapsed while it holds the thread's lock; "
                "taking it over",
                candidate.run_id,
            )
            lease = _NO_LOCK
        self._claiming.add(candidate.run_id)  # a renewal meanwhile must not end it
        try:
            claimed = await self.queue.claim(candidate.run_id, then=_question)
        except BaseException:
            await lease.release()
            raise
        finally:
            self._claiming.discard(candidate.run_id)
        if claimed is None:
            await lease.release()
            return False
        record, opened = claimed
        await self._start_claimed(record, opened, lease)
        return True

    async def _start_claimed(self, record: RunRecord, opened: OpenedRun, lease: Lease) -> None:
        handle = self.waiting.pop(record.run_id, None)
        try:
            if record.cancel_requested:  # cancelled while its last worker was gone
                raise _CancelledBeforeStart(record.cancel_action or "interrupt")
            if handle is None:
                handle = self._handle_for(record)
                handle.background = True
        except Exception as exc:
            await self._end_unstarted(record, handle, lease, exc)
            return
        handle.attempt = record.attempt
        assert handle.memory is not None  # every queued run's memory is its thread
        handle.memory.load(opened.history, stored_ahead=opened.added)
        self._launch(handle, lease)

    async def _end_unstarted(
        self, record: RunRecord, handle: RunHandle | None, lease: Lease, exc: Exception
    ) -> None:
        """End a claimed run that cannot start: cancelled meanwhile, or its agent unknown."""
        try:
            if isinstance(exc, _CancelledBeforeStart):
                rollback = exc.action == "rollback"
                status: RunStatus
                await self.queue.finish(
                    record.run_id, record.attempt, "interrupted", None, None, rollback=rollback
                )
                status, error = "interrupted", None
            else:
                log.warning("run %s cannot start: %s", record.run_id, exc)
                error = f"the run could not start: {exc}"
                await self.queue.finish(record.run_id, record.attempt, "error", None, error)
                status = "error"
        finally:
            await lease.release()
            self.wake.set()
        if handle is not None:
            handle.end_unstarted(status, error)

    def _handle_for(self, record: RunRecord) -> RunHandle:
        """A handle for a run taken from the queue, its agent built from its stored input."""
        if self.resolve is None:
            raise ConfigurationError("this run manager cannot build agents for queued runs")
        run_input = RunInput.model_validate(record.input or {})
        if run_input.resume is not None:
            raise UserError("an approval's answer cannot be run from the queue")
        agent, middleware = self.resolve(record.agent, run_input)
        check_tools_reachable(agent)
        memory = ThreadMemory(self.store, record.thread_id, record.user_id)
        run = _agent_run(
            agent, run_input, memory, record.user_id, record.run_id, attempt=record.attempt
        )
        run.use(*middleware)
        return RunHandle(
            run,
            record.thread_id,
            record.agent,
            memory,
            user_id=record.user_id,
            buffer_bytes=self.buffer_bytes,
        )

    def _launch(self, handle: RunHandle, lease: Lease) -> None:
        self.active[handle.run_id] = handle
        handle.submits_seen = self._submits
        handle.task = asyncio.create_task(self._drive(handle, lease), name=handle.run_id)
        self._ensure_poller()

    async def _prepare(
        self,
        agent: Agent,
        user_id: str,
        thread_id: str,
        memory: ThreadMemory,
        message: Msg | None,
        resume: tuple[str, bool | Mapping[str, bool]] | None,
    ) -> AgentRun:
        if resume is None:
            run = agent.stream(message, memory=memory, user_id=user_id)
        else:
            interrupt_id, approved = resume
            found = await self.store.get_approval(interrupt_id, user_id)
            if found is None or found[1] != thread_id:
                raise NotFoundError(f"interrupt {interrupt_id!r} not found", status_code=404)
            pending, _, _ = found
            # Checks the verdicts.
            run = agent.resume_stream(pending, approved, memory=memory, user_id=user_id)
            await self.store.answer_approval(interrupt_id)
        memory.run_id = run.run_id
        return run

    # -- running ---------------------------------------------------------------------------

    async def _drive(self, handle: RunHandle, lease: Lease) -> None:
        ended: RunEnded | None = None
        # A run's error reaches its reader after the run's end is recorded, as its end does:
        # a client that stops at the error and reads the run at once must see it ended.
        failure: RunError | None = None
        writer = await self._writer(handle)
        try:
            async with contextlib.aclosing(handle.run) as run:
                async for event in run:
                    # After the end the loop runs on to the events' own end (the run's
                    # clean-up, here and now), and nothing more counts. Leaving it with
                    # `break` left the generator to be closed in a task of its own: a third
                    # more of the agent loop's CPU.
                    if ended is not None:
                        continue
                    if isinstance(event, RunEnded):
                        ended = event
                        continue
                    if isinstance(event, RunError):
                        failure = event
                        continue
                    if isinstance(event, ApprovalRequested) and run.pending is not None:
                        await self.store.add_approval(
                            run.pending, handle.thread_id, handle.user_id, handle.run_id
                        )
                        # The store holds it now; the shared agent keeping every parked run
                        # of every thread in memory would grow without end.
                        run.agent.forget_pending(run.pending.message_id)
                    told = _with_attempt(event, handle.attempt)
                    if writer is not None and not handle.lost:
                        writer.put(told)
                    handle.put(told)
        except Exception as exc:  # a usage mistake found as the run began (resume checks)
            log.warning("run %s failed to start: %s", handle.run_id, exc)
            failure = RunError(message=str(exc), kind=type(exc).__name__)
        finally:
            ended = ended or RunEnded(status=handle.run.status or "error")
            await self._finish(handle, lease, ended, failure, writer)

    async def _writer(self, handle: RunHandle) -> EventWriter | None:
        if self.events is None:
            return None
        try:
            # A first start's log is empty (only the run's worker writes it): nothing to read.
            return await self.events.writer(
                handle.run_id, new=handle.attempt == 1, fence=(self.worker_id, handle.attempt)
            )
        except Exception:  # the run goes on; only its re-attachable stream is lost
            log.exception("could not open the event log of run %s", handle.run_id)
            return None

    async def _finish(
        self,
        handle: RunHandle,
        lease: Lease,
        ended: RunEnded,
        failure: RunError | None,
        writer: EventWriter | None,
    ) -> None:
        # Recorded and unlocked before the reader hears of the end (or of the error before
        # it): a client that reads the run or continues the thread right after sees it ended.
        held = handle.memory.take_held() if handle.memory is not None else []
        logged = False  # whether its last events are in its log (with its end)
        try:
            if handle.lost:
                raise _LostRun(handle.run_id)
            # The end gives the lock back in its own statement, unless the thread is read after.
            lock = None if handle.wants_snapshot else lease.carrier
            logged = await self._record_end(handle, ended, failure, held, writer, lock)
            await self._snapshot(handle)
        except _LostRun:
            log.warning(
                "run %s: this worker lost it (another took it over); stopped", handle.run_id
            )
            failure = RunError(
                message="the run was taken over by another worker (this one lost its lease)",
                kind="LeaseLost",
            )
            ended = RunEnded(status="interrupted", final=ended.final, usage=ended.usage)
            writer = None  # the run's log is the new holder's now
        except Exception as exc:
            log.exception("could not record the end of run %s", handle.run_id)
            recorded = False
            if held:  # its answer is not stored: the run failed
                ended, failure, recorded = await self._failed_to_store(handle, ended, exc)
            if not recorded:
                # Still `running` in the store: its lease lapses and another worker ends it
                # from what is stored, in its log too (this end is not the run's).
                writer = None
        finally:
            try:
                await lease.release()
            except Exception:  # its connection is gone, and the lock with it
                log.warning("run %s: could not release its thread's lock", handle.run_id)
            self.active.pop(handle.run_id, None)
            handle.done.set()
            self._wake_for(handle)  # the thread is free: a run waiting for it may start
            self._tell_end(handle, [failure, ended], None if logged else writer)
            if writer is not None:
                await self._close_writer(handle.run_id, writer)

    @staticmethod
    def _tell_end(
        handle: RunHandle, events: list[RunError | RunEnded | None], writer: EventWriter | None
    ) -> None:
        """Tell the run's reader (and its log, with `writer`) its last events, then the end."""
        for event in events:
            if event is not None:
                handle.put(event)
                if writer is not None:
                    writer.put(event)
        handle.put(None)

    async def _record_end(
        self,
        handle: RunHandle,
        ended: RunEnded,
        failure: RunError | None,
        held: list[Msg],
        writer: EventWriter | None,
        lock: LockCarrier | None,
    ) -> bool:
        """Store the run's end, its answer (`held`) and, with `writer`, its last events.

        In one transaction (with `lock`, the thread's lock given back in it when it can).
        Whether its last events (`failure`, `ended`) were stored.

        Raises:
            _LostRun: Fenced out: another worker holds the run now (nothing was stored).
        """
        usage = ended.usage.model_dump(mode="json")
        error = failure.message if failure is not None else None
        last = (handle.thread_id, handle.user_id, held) if held else None
        rollback = handle.cancel_action == "rollback" and ended.status == "interrupted"
        end = partial(
            self._end_run,
            handle,
            ended.status,
            usage,
            error,
            last=last,
            rollback=rollback,
            lock=lock,
        )
        # A rolled-back run's end goes alone (its run and log are deleted).
        logged = writer is not None and not rollback
        if writer is not None and logged:
            tail = [event for event in (failure, ended) if event is not None]
            held_still = await writer.end_with(tail, lambda rows: end(events=rows))
        else:
            held_still = await end()
        if held_still is False:  # `is False`: fenced out (another worker holds the run now)
            raise _LostRun(handle.run_id)
        return logged

    def _wake_for(self, handle: RunHandle) -> None:
        """Wake the worker if a queued run may start now that `handle`'s ended.

        A background run's end frees room; a run queued here since `handle` began may wait
        for its thread (runs queued by other processes are their workers' to poll for). Not
        waking the worker after every run's end spares a busy service a poll of the queue a
        run (a write and a read).
        """
        if handle.background or self.waiting or self._submits != handle.submits_seen:
            self.wake.set()

    async def _end_run(
        self,
        handle: RunHandle,
        status: str,
        usage: dict[str, Any] | None,
        error: str | None,
        *,
        last: tuple[str, str, Sequence[Msg]] | None,
        rollback: bool,
        events: EventRows | None = None,
        lock: LockCarrier | None = None,
    ) -> bool | None:
        """Record the run's end (fenced); tried again while the database is briefly down.

        A restart of the database takes seconds: the run's answer is kept in memory and its
        end stored when the database is back, within two thirds of a lease (its lease is
        renewed meanwhile). Past that the error goes up: the run is let go, and its lease
        lapses, so another worker takes it over and ends it from what is stored.
        """
        deadline = time.monotonic() + self.queue.lease_seconds * 2 / 3
        pause = 0.25
        while True:
            try:
                return await self.store.end_run(
                    handle.run_id,
                    status,
                    usage,
                    error,
                    last=last,
                    fence=(self.worker_id, handle.attempt),
                    rollback=rollback,
                    events=events,
                    lock=lock,
                )
            except DATABASE_DOWN as exc:
                if not is_database_down(exc) or time.monotonic() + pause > deadline:
                    raise
                log.warning("run %s: the database is down; storing its end again", handle.run_id)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    @staticmethod
    async def _close_writer(run_id: str, writer: EventWriter) -> None:
        try:
            await writer.close()
        except Exception:
            log.exception("could not store the last events of run %s", run_id)

    async def _snapshot(self, handle: RunHandle) -> None:
        """Read the thread for the handle's snapshot, if asked: the lock is still held."""
        if not handle.wants_snapshot:
            return
        try:
            rows = await self.store.get_messages(handle.thread_id, handle.user_id)
        except Exception:  # the run is recorded: only the snapshot is lost
            log.warning("could not read the thread of run %s", handle.run_id, exc_info=True)
            return
        handle.snapshot = [msg for msg, _ in rows]

    async def _failed_to_store(
        self, handle: RunHandle, ended: RunEnded, exc: Exception
    ) -> tuple[RunEnded, RunError, bool]:
        """Tell the reader the run failed (its answer was not stored); record that if possible.

        The third value: whether that end was recorded.
        """
        error = f"could not store the run's answer: {exc}"
        recorded = False
        with contextlib.suppress(Exception):
            usage = ended.usage.model_dump(mode="json")
            fence = (self.worker_id, handle.attempt)
            kept = await self.store.end_run(handle.run_id, "error", usage, error, fence=fence)
            recorded = kept is not False
        failure = RunError(message=error, kind=type(exc).__name__)
        ended = RunEnded(status="error", final=ended.final, usage=ended.usage)
        return ended, failure, recorded

    # -- leases ----------------------------------------------------------------------------

    async def renew(self) -> None:
        """Renew the leases of this process's runs; stop the copies of those it lost.

        A run missing from the store's answer was taken over, deleted or ended elsewhere.
        When the store cannot be reached for a whole lease, every run is lost: another
        worker may hold them by now.
        """
        running = dict(self.active)
        waiting = set(self.waiting)
        held = {run_id: h.attempt for run_id, h in running.items()}
        held.update(dict.fromkeys(waiting, 0))
        try:
            kept = await self.queue.heartbeat(held)
        except Exception:
            log.warning("could not renew the leases of this worker's runs", exc_info=True)
            if time.monotonic() - self._renewed_at < self.queue.lease_seconds:
                return
            kept = set()
        else:
            self._renewed_at = time.monotonic()
        # Only runs still as they were when asked: one claimed here meanwhile (its attempt
        # moved on) is held, not lost.
        for run_id in set(held) - kept:
            handle = running.get(run_id)
            if handle is not None and self.active.get(run_id) is handle:
                handle.lost = True
                handle.cancel()
            elif run_id in waiting and run_id in self.waiting and run_id not in self._claiming:
                self._end_waiting(run_id, "interrupted")

    # -- cancelling, deleting, joining -----------------------------------------------------

    async def cancel(
        self, run_id: str, user_id: str, *, action: CancelAction = "interrupt", wait: float = 2.0
    ) -> RunRecord:
        """Stop a run of `user_id`'s (here or in another process); its record after.

        A run waiting its turn ends without starting. With `rollback` the run and its
        messages are deleted as it stops (the record returned is its last, `interrupted`).

        Raises:
            NotFoundError: No such run of theirs.
        """
        record = await self.store.get_run(run_id, user_id)
        if record is None:
            raise NotFoundError(f"run {run_id!r} not found", status_code=404)
        if record.status == "pending":
            if await self.store.end_pending([run_id], "interrupted", "cancelled"):
                self._end_waiting(run_id, "interrupted")
                if action == "rollback":
                    await self.store.delete_run(run_id, user_id, with_messages=True)
        elif record.status == "running":
            await self._stop(record, action, wait=wait)
        else:
            return record
        again = await self.store.get_run(run_id, user_id)
        return again or dataclasses.replace(record, status="interrupted")

    async def _stop(self, record: RunRecord, action: CancelAction, *, wait: float = 2.0) -> None:
        """Stop a running run: here at once, elsewhere through the store's cancel flag."""
        handle = self.active.get(record.run_id)
        if handle is None:
            await self.store.request_cancel(record.run_id, action)
            await self._interrupt_if_dead(record.thread_id, record.user_id, action)
            return
        handle.cancel(action)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await handle.done.wait()

    async def delete(self, run_id: str, user_id: str) -> None:
        """Delete a run of `user_id`'s (its messages stay); a live one is cancelled first.

        Raises:
            NotFoundError: No such run of theirs.
        """
        record = await self.cancel(run_id, user_id, wait=self.queue.lease_seconds)
        if record.status == "running":  # still ending elsewhere: it is deleted anyway
            log.info("run %s is deleted while its worker stops it", run_id)
        if not await self.store.delete_run(run_id, user_id):
            raise NotFoundError(f"run {run_id!r} not found", status_code=404)

    async def join(self, run_id: str, user_id: str, timeout: float) -> RunRecord:
        """Wait (up to `timeout` seconds) for a run to end, wherever it runs; its record.

        Raises:
            NotFoundError: No such run of theirs (or it was deleted meanwhile).
        """
        deadline = time.monotonic() + timeout
        while True:
            record = await self.store.get_run(run_id, user_id)
            if record is None:
                raise NotFoundError(f"run {run_id!r} not found", status_code=404)
            left = deadline - time.monotonic()
            if record.status in FINAL_STATUSES or record.status not in ACTIVE_STATUSES:
                return record
            if left <= 0:
                return record
            handle = self.active.get(run_id) or self.waiting.get(run_id)
            pause = min(JOIN_POLL_SECONDS, left)
            if handle is None:
                await asyncio.sleep(pause)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await handle.done.wait()

    async def _interrupt_if_dead(
        self, thread_id: str, user_id: str, action: CancelAction = "interrupt"
    ) -> None:
        """Mark the thread's runs interrupted if no process runs them (theirs was killed).

        A live run holds its thread's lock, here or in another process (PostgreSQL's lock is
        released when a killed process's connection ends): a lock free at once means the run
        marked `running` has nobody to stop it, or to record its end.
        """
        try:
            lease = await self.locks.acquire(thread_id, user_id, 0)
        except ConflictError:  # a process runs it: that process polls the cancel flag
            return
        try:
            stale = await self.store.active_runs(thread_id, user_id)
            await self.store.interrupt_stale_runs(thread_id, user_id)
            if action == "rollback":
                for record in stale:
                    if record.status == "running":
                        await self.store.delete_run(record.run_id, user_id, with_messages=True)
        finally:
            await lease.release()
            self.wake.set()

    async def _cancel_waiting(self, run_id: str) -> None:
        """A request here stopped waiting for its run (its client left): end the run."""
        try:
            await self.store.end_pending([run_id], "interrupted", "cancelled before it started")
        finally:
            self._end_waiting(run_id, "interrupted")

    def _end_waiting(self, run_id: str, status: RunStatus) -> None:
        handle = self.waiting.pop(run_id, None)
        if handle is not None:
            handle.end_unstarted(status)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_cancels(), name="parley-cancel-poll")

    async def _poll_cancels(self) -> None:
        while self.active:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            try:
                asked = await self.store.cancel_actions(list(self.active))
            except Exception:  # the database blinked: try again next round
                log.warning("could not poll cancel requests", exc_info=True)
                continue
            for run_id, action in asked.items():
                handle = self.active.get(run_id)
                if handle is not None:
                    handle.cancel("rollback" if action == "rollback" else "interrupt")

    async def close(self) -> None:
        """Stop every run of this process and wait (a little) for them to record their end.

        Runs a request here waited for and that never started are left `pending`: their
        reservation lapses, and another worker runs them.
        """
        handles = list(self.active.values())
        for handle in handles:
            handle.cancel()
        for handle in list(self.waiting.values()):
            handle.end_unstarted("interrupted", "the service is shutting down")
        self.waiting.clear()
        tasks = [h.task for h in handles if h.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE)
        for task in [self._poller, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class _CancelledBeforeStart(Exception):  # noqa: N818 - what happened
    def __init__(self, action: str) -> None:
        super().__init__(f"cancelled ({action}) before it started")
        self.action = action


class _LostRun(Exception):  # noqa: N818 - what happened
    """This worker no longer holds the run (its lease lapsed and another took it)."""


def _with_attempt(event: AgentEvent, attempt: int) -> AgentEvent:
    """A takeover's `RunStarted` says which start it is (readers drop the dead one's part)."""
    if isinstance(event, RunStarted) and attempt > 1:
        return event.model_copy(update={"attempt": attempt})
    return event


def _stored_verdict(
    resume: tuple[str, bool | Mapping[str, bool]] | None,
) -> tuple[str, bool | dict[str, bool]] | None:
    if resume is None:
        return None
    interrupt_id, approved = resume
    return interrupt_id, approved if isinstance(approved, bool) else dict(approved)


def _question(history: list[Msg], record: RunRecord) -> list[Msg]:
    """What a claimed run stores as it starts: its question, unless a call waits first."""
    run_input = RunInput.model_validate(record.input or {})
    if run_input.message is None or unanswered_calls(history):
        return []
    return [run_input.message]


class _NoLock(Lease):
    """The thread lock of a run taken over from a worker that still holds it: nothing."""

    async def release(self) -> None:
        """Nothing to give back."""


_NO_LOCK = _NoLock()


def _agent_run(
    agent: Agent,
    run_input: RunInput,
    memory: ThreadMemory,
    user_id: str,
    run_id: str,
    *,
    attempt: int,
) -> AgentRun:
    """The agent's run for a queued run, under the run's own id.

    A first start asks the question. A takeover (`attempt` > 1) continues the thread as
    stored (`Agent.continue_stream`): stored answers and tool results are not repeated, an
    interrupted tool call is re-run only if its tool is idempotent, and an approval's answer
    the run was carrying out is applied again.
    """
    memory.run_id = run_id
    if attempt > 1:
        return agent.continue_stream(
            memory=memory, user_id=user_id, run_id=run_id, resume=run_input.resume
        )
    return agent.stream(run_input.message, memory=memory, user_id=user_id, run_id=run_id)
