"""Runs on threads: started under the thread's lock, driven in their own task, cancellable.

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
lock), or else by the next run on its thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from parley.agents import Agent, AgentRun, Memory, Middleware
from parley.agents.approval import unanswered_calls
from parley.agents.events import (
    AgentEvent,
    ApprovalRequested,
    AudioDelta,
    MessageCompleted,
    RunEnded,
    RunError,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
)
from parley.errors import ConflictError, NotFoundError
from parley.messages import Msg
from parley.service.auth import check_tools_reachable
from parley.service.store import RunRecord, Store, ThreadLocks
from parley.service.store.locks import Lease

__all__ = ["DEFAULT_BUFFER_BYTES", "ReaderDropped", "RunHandle", "RunManager", "ThreadMemory"]

log = logging.getLogger("parley.service")

CANCEL_POLL_SECONDS = 0.5
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
        self._buffer_bytes = buffer_bytes
        self._limited = False
        self._on_drop: Callable[[], None] | None = None
        self._queue: deque[tuple[AgentEvent | None, int]] = deque()
        self._queued = 0
        self._ready = asyncio.Event()

    def cancel(self) -> None:
        """Ask the run to stop; it ends `interrupted`, keeping its partial answer."""
        if not self.done.is_set():
            self.run.cancel()

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


class RunManager:
    """Starts, tracks and cancels the runs of this process."""

    def __init__(
        self,
        store: Store,
        locks: ThreadLocks,
        *,
        busy_timeout: float,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    ) -> None:
        self.store = store
        self.locks = locks
        self.busy_timeout = busy_timeout
        self.buffer_bytes = buffer_bytes
        self.active: dict[str, RunHandle] = {}
        self._poller: asyncio.Task[None] | None = None

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
    ) -> RunHandle:
        """Start a run of `agent` on the thread: a new `message`, or an approval's answer.

        `history` is the conversation before `message`, for a client that sends all of it
        (OpenAI's API): stored first when the thread holds no messages yet, ignored when it
        does (the stored thread is the truth). Checked under the thread's lock, so two
        requests seeding one new thread store it once. `middleware` is this run's own (a
        voice speaking its answer), after the agent's. With `snapshot`, the thread's messages
        are read as the run ends, before its lock is released (`RunHandle.snapshot`): no other
        run's message can be in them.

        A thread is `user_id`'s own: another user's thread of the same id is another thread.

        Raises:
            NotFoundError: The interrupt is another user's or unknown (to resume).
            ConflictError: The thread stayed busy for `busy_timeout`, or the interrupt was
                answered already.
            AuthenticationError: The request came from another machine and the agent has a
                tool that serves this machine only (403).
            UserError: A verdict names a call that does not wait.
        """
        check_tools_reachable(agent)
        lease = await self.locks.acquire(thread_id, user_id, self.busy_timeout)
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
        self.active[handle.run_id] = handle
        handle.task = asyncio.create_task(self._drive(handle, lease), name=handle.run_id)
        self._ensure_poller()
        return handle

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

    async def _drive(self, handle: RunHandle, lease: Lease) -> None:
        ended: RunEnded | None = None
        # A run's error reaches its reader after the run's end is recorded, as its end does:
        # a client that stops at the error and reads the run at once must see it ended.
        failure: RunError | None = None
        try:
            async with contextlib.aclosing(handle.run) as run:
                async for event in run:
                    if isinstance(event, RunEnded):
                        ended = event
                        break
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
                    handle.put(event)
        except Exception as exc:  # a usage mistake found as the run began (resume checks)
            log.warning("run %s failed to start: %s", handle.run_id, exc)
            failure = RunError(message=str(exc), kind=type(exc).__name__)
        finally:
            ended = ended or RunEnded(status=handle.run.status or "error")
            await self._finish(handle, lease, ended, failure)

    async def _finish(
        self, handle: RunHandle, lease: Lease, ended: RunEnded, failure: RunError | None
    ) -> None:
        # Recorded and unlocked before the reader hears of the end (or of the error before
        # it): a client that reads the run or continues the thread right after sees it ended.
        held = handle.memory.take_held() if handle.memory is not None else []
        error = failure.message if failure is not None else None
        try:
            usage = ended.usage.model_dump(mode="json")
            last = (handle.thread_id, handle.user_id, held) if held else None
            await self.store.end_run(handle.run_id, ended.status, usage, error, last=last)
            await self._snapshot(handle)
        except Exception as exc:
            log.exception("could not record the end of run %s", handle.run_id)
            if held:  # its answer is not stored: the run failed
                ended = await self._failed_to_store(handle, ended, exc)
        finally:
            await lease.release()
            self.active.pop(handle.run_id, None)
            handle.done.set()
            if failure is not None:
                handle.put(failure)
            handle.put(ended)
            handle.put(None)

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
    ) -> RunEnded:
        """Tell the reader the run failed (its answer was not stored); record that if possible."""
        error = f"could not store the run's answer: {exc}"
        with contextlib.suppress(Exception):
            usage = ended.usage.model_dump(mode="json")
            await self.store.end_run(handle.run_id, "error", usage, error)
        handle.put(RunError(message=error, kind=type(exc).__name__))
        return RunEnded(status="error", final=ended.final, usage=ended.usage)

    async def cancel(self, run_id: str, user_id: str, *, wait: float = 2.0) -> RunRecord:
        """Stop a run of `user_id`'s (here or in another process); its record after.

        Raises:
            NotFoundError: No such run of theirs.
        """
        record = await self.store.get_run(run_id, user_id)
        if record is None:
            raise NotFoundError(f"run {run_id!r} not found", status_code=404)
        if record.status != "running":
            return record
        handle = self.active.get(run_id)
        if handle is None:
            await self.store.request_cancel(run_id)
            await self._interrupt_if_dead(record.thread_id, user_id)
        else:
            handle.cancel()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await handle.done.wait()
        again = await self.store.get_run(run_id, user_id)
        return again or record

    async def _interrupt_if_dead(self, thread_id: str, user_id: str) -> None:
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
            await self.store.interrupt_stale_runs(thread_id, user_id)
        finally:
            await lease.release()

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_cancels(), name="parley-cancel-poll")

    async def _poll_cancels(self) -> None:
        while self.active:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            try:
                asked = await self.store.cancel_requested(list(self.active))
            except Exception:  # the database blinked: try again next round
                log.warning("could not poll cancel requests", exc_info=True)
                continue
            for run_id in asked:
                handle = self.active.get(run_id)
                if handle is not None:
                    handle.cancel()

    async def close(self) -> None:
        """Stop every run of this process and wait (a little) for them to record their end."""
        handles = list(self.active.values())
        for handle in handles:
            handle.cancel()
        tasks = [h.task for h in handles if h.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE)
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
