"""`StoreEventLog`: every run's events in the store (`run_events`), followed from anywhere.

The worker running a run appends its events through a writer (`StoreEventLog.writer`):
`put` numbers an event at once (1, 2, 3... on from what the log holds, so a takeover goes
on) and queues it; `flush_interval` after the first event queued (a timer), one flush task
at a time writes everything queued in ONE transaction, then wakes the run's readers. What
comes meanwhile, or while a transaction is in flight, goes in the same or the next one
(group commit). On PostgreSQL that transaction is ONE statement, the rows as arrays and the
doorbell beside them, sent with no BEGIN or COMMIT around it when it runs alone: one round
trip a flush. The run's end takes what is still queued, its `RunEnded` among it, into its
own transaction (`_Writer.end_with`): a run shorter than the interval writes no batch.

Readers (`follow`) read only stored events, from the store, in pages after their last id:
replay and live are the same query, so the hand-over between them can neither repeat nor
skip an event, and a reader far behind holds one page, never a buffer of the whole run.
They sleep between pages until woken:

- in this process, by the writer after each commit (asyncio events);
- from other processes, on PostgreSQL, by a doorbell: the flush's statement sends
  `NOTIFY parley_events, '<run_id>:<seq>'` (delivered at commit, once per flush; never the
  event itself, a payload must stay under 8000 bytes), which a dedicated asyncpg connection
  LISTENs for while a reader here follows a run (and `listen_linger` after the last one left):
  a replica nobody follows a run on is not woken for every other replica's flush. A reader's
  first look waits for the LISTEN, so no NOTIFY after that look is missed. NOTIFY keeps
  nothing for a listener that was away, so when that connection comes back (or LISTENs
  again) every reader re-reads the store from its last id; while it is down, readers poll
  (`poll_interval`).

SQLite serves one process, so there the in-process wake is all there is. Readers also look
again every `recheck_interval` when nothing woke them, which ends the stream of a run that
ended with no `RunEnded` in its log (its process died) and bounds the lag of a lost doorbell.

`sweep` drops the logs of runs ended over the retention ago and marks them
`events_expired` (their readers get 410); `StoreEventLog.open` starts a task that sweeps
periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Executable,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from parley.agents.events import AgentEvent, AgentEventAdapter, RunEnded
from parley.errors import NotFoundError
from parley.service.runs_protocol import (
    ACTIVE_STATUSES,
    EventLog,
    EventRows,
    EventsExpiredError,
    EventWriter,
    UnknownEventIdError,
    stop_if_cancelled,
)
from parley.service.store import Store
from parley.service.store.prepared import Counted, execute, executemany
from parley.service.store.store import PG_CONNECT_TIMEOUT, RUN_HELD, insert_events
from parley.service.store.tables import run_events, runs, utcnow

__all__ = ["CHANNEL", "LISTENER_NAME", "StoreEventLog"]

CHANNEL = "parley_events"
"""The PostgreSQL channel the writers NOTIFY and the readers LISTEN on."""
LISTENER_NAME = "parley-events"
"""The `application_name` of each replica's listening connection."""

log = logging.getLogger("parley.service.events")
T = TypeVar("T")

_PAGE = 256  # events a reader takes from the store per query
_LISTEN_RETRY = 1.0  # seconds between attempts to bring the doorbell back
_LISTEN_CHECK = 10.0  # seconds between pings of a quiet doorbell connection
_PING_TIMEOUT = 5.0
_LISTEN_LINGER = 30.0  # seconds the doorbell LISTENs on after its last reader left
# A run's status may be stored a moment before its last events (a worker that ends its run
# before its writer's last flush): a reader that finds the run ended and nothing more goes on
# looking until it ended this long ago.
_END_GRACE = 2.0


@dataclass(frozen=True)
class _Page:
    """One read of a run's log: its state, and up to `_PAGE` events after a given id."""

    found: bool
    ended: bool
    expired: bool
    events: list[tuple[int, str]]
    ended_at: datetime | None = None

    def settled(self) -> bool:
        """Whether the run ended long enough ago that no event of it can be on its way."""
        if self.ended_at is None:
            return True
        ended_at = self.ended_at if self.ended_at.tzinfo else self.ended_at.replace(tzinfo=UTC)
        return utcnow() - ended_at > timedelta(seconds=_END_GRACE)


def _pg_store_events(*, notify: bool, fenced: bool) -> Executable:
    """PostgreSQL: a batch of one run's events, and its doorbell, in ONE statement.

    The rows come as arrays (`unnest`), so a batch of any size is one execution, not one per
    row; the NOTIFY rides in the same statement, so with no transaction around it the batch
    is one round trip. Its one row counts the events stored. `fenced`: only while the
    writer's worker holds the run (`RUN_HELD`), the run's row share-locked until the
    statement ends, so a takeover's claim (an UPDATE of that row) waits for a batch in
    flight, and a batch after it finds the run held by another and stores nothing.
    """
    rows = (
        func.unnest(bindparam("seqs", type_=ARRAY(Integer)), bindparam("datas", type_=ARRAY(Text)))
        .table_valued("seq", "data")
        .render_derived(name="added_rows")
    )
    chosen = select(
        bindparam("run_id", type_=String),
        rows.c.seq,
        rows.c.data,
        bindparam("now", type_=run_events.c.created_at.type),
    ).select_from(rows)
    if fenced:
        chosen = chosen.where(RUN_HELD.with_for_update(read=True).exists())
    added = (
        insert(run_events)
        .from_select(["run_id", "seq", "data", "created_at"], chosen)
        .returning(run_events.c.seq)
        .cte("added")
    )
    counted = select(func.count()).select_from(added)
    if notify:
        # Evaluated once, on the count's row: a CASE runs its THEN only when it holds.
        bell = func.pg_notify(bindparam("channel", type_=Text), bindparam("payload", type_=Text))
        counted = counted.add_columns(case((func.count() > 0, bell)))
    return counted


def _read_page(conn: Connection, run_id: str, after: int) -> _Page:
    # The run's state first, then its events: an event stored before the run's end is seen
    # by the same read that sees the end, so "ended and nothing more" is never premature.
    row = conn.execute(
        select(runs.c.status, runs.c.events_expired, runs.c.ended_at).where(runs.c.id == run_id)
    ).one_or_none()
    if row is None:
        return _Page(found=False, ended=True, expired=False, events=[])
    rows = conn.execute(
        select(run_events.c.seq, run_events.c.data)
        .where(run_events.c.run_id == run_id, run_events.c.seq > after)
        .order_by(run_events.c.seq)
        .limit(_PAGE)
    ).all()
    return _Page(
        found=True,
        ended=row.status not in ACTIVE_STATUSES,  # today's names and LangGraph's
        expired=bool(row.events_expired),
        events=[(seq, data) for seq, data in rows],
        ended_at=row.ended_at,
    )


_last_seq_query = select(func.coalesce(func.max(run_events.c.seq), 0)).where(
    run_events.c.run_id == bindparam("run_id")
)


def _last_seq(conn: Connection, run_id: str) -> int:
    return int(conn.execute(_last_seq_query, {"run_id": run_id}).scalar_one())


class _Writer(EventWriter):
    """One run's writer: numbers events at once, stores them in batches, in order.

    A batch is stored `flush_interval` seconds after its first event, with whatever came
    meanwhile; the run's end takes what is still queued into its own transaction
    (`end_with`), so a run shorter than that costs its log no transaction of its own.

    With a `fence` (the worker's id and its attempt at the run) a batch is stored only while
    that worker holds the run: one that lost it (its lease ran out and another worker took
    the run on, numbering on from the log) stores nothing under ids that are the new
    worker's now, and from then on drops what it is given (`lost`).
    """

    def __init__(
        self, owner: StoreEventLog, run_id: str, last: int, fence: tuple[str, int] | None
    ) -> None:
        self._owner = owner
        self._run_id = run_id
        self._fence = fence
        self.lost = False
        self._next = last
        self._stored = last
        self._queue: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None  # storing a batch
        self._error: BaseException | None = None
        # The queue's store, due `flush_interval` after its first event: a timer, not a task
        # that sleeps, so a run that ends first costs its log no task and no wake-up.
        self._timer: asyncio.TimerHandle | None = None
        self._hurry = 0  # flushes waiting: while any does, store at once
        self._ending = False  # the run's end takes the queue: store nothing more

    def put(self, event: AgentEvent) -> int:
        """Queue `event`; its id. It is stored with whatever else is queued (`_kick`)."""
        self._number(event)
        if self.lost:  # the run is another worker's: its log too
            self._queue.clear()
        self._kick()
        return self._next

    def _number(self, event: AgentEvent) -> None:
        self._next += 1
        self._queue.append(
            {"run_id": self._run_id, "seq": self._next, "data": event.model_dump_json()}
        )

    async def flush(self) -> int:
        """Wait until every queued event is stored and its readers woken; the last id."""
        self._hurry += 1
        try:
            while True:
                self._hasten()
                task = self._task
                if task is not None and not task.done():
                    await asyncio.shield(task)
                    continue
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                if not self._queue:
                    return self._stored
                self._kick()
        finally:
            self._hurry -= 1

    async def close(self) -> None:
        """Flush; the run's readers end after its `RunEnded`."""
        await self.flush()

    async def end_with(
        self, tail: Sequence[AgentEvent], end: Callable[[EventRows | None], Awaitable[T]]
    ) -> T:
        """Store `tail` and the queued events with the run's end (`EventWriter.end_with`)."""
        self._ending = True
        if self._timer is not None:  # the end takes the queue
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None and not task.done():
            # A batch in flight commits first: ids reach the log in order (a reader that
            # saw a later id would never read an earlier one).
            await asyncio.shield(task)
        self._error = None  # a failed batch is queued again: it goes with the end
        for event in tail:
            self._number(event)
        rows, self._queue = self._queue, []
        now = utcnow()
        for row in rows:
            row["created_at"] = now
        notify = None
        if self._owner.notifies and rows:
            notify = (CHANNEL, f"{self._run_id}:{rows[-1]['seq']}")
        try:
            result = await end(EventRows(rows, notify))
        except BaseException:
            self._rewind(rows, len(tail))
            raise
        if result is False:  # fenced out: nothing was stored
            self._rewind(rows, len(tail))
            return result
        self._ending = False
        if rows:
            self._stored = rows[-1]["seq"]
            self._owner.stored(self._run_id, self._stored)
        return result

    def _rewind(self, rows: list[dict[str, Any]], tail: int) -> None:
        """`end_with` stored nothing: queue its rows again, without the tail's."""
        kept = rows[: len(rows) - tail]
        for row in kept:
            row.pop("created_at", None)
        self._queue = kept + self._queue
        self._next -= tail
        self._ending = False
        if self._queue:
            self._kick()

    def _kick(self) -> None:
        """Have the queue stored: now when a flush waits, else `flush_interval` from now."""
        if self._ending or self._timer is not None:
            return
        if self._task is not None and not self._task.done():
            return  # the task goes on to what is queued after its batch
        interval = self._owner.flush_interval
        if self._hurry or interval <= 0:
            self._start()
        else:
            self._timer = asyncio.get_running_loop().call_later(interval, self._start)

    def _start(self) -> None:
        """Start storing the queue (the timer's end, or a flush's hurry)."""
        self._timer = None
        if not self._ending and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._drain(), name=f"events:{self._run_id}")

    def _hasten(self) -> None:
        """Store now what waits for its flush interval."""
        if self._timer is not None:
            self._timer.cancel()
            self._start()

    async def _drain(self) -> None:
        """Store the queue batch by batch, until it is empty or the run's end takes it."""
        while self._queue and not self._ending:
            batch, self._queue = self._queue, []
            try:
                held = await self._owner.store_batch(self._run_id, batch, fence=self._fence)
            except Exception as exc:  # kept for flush(); the events stay queued
                self._queue = batch + self._queue
                self._error = exc
                log.warning("run %s: could not store %d events: %s", self._run_id, len(batch), exc)
                return
            self._error = None
            if not held:
                self._lose(len(batch))
                return
            self._stored = batch[-1]["seq"]
            interval = self._owner.flush_interval
            if self._queue and not self._hurry and not self._ending and interval > 0:
                # What came meanwhile waits its interval too, as the first batch did.
                self._timer = asyncio.get_running_loop().call_later(interval, self._start)
                return

    def _lose(self, dropped: int) -> None:
        """The run is no longer this writer's worker's: drop its events from now on."""
        dropped += len(self._queue)
        self._queue.clear()
        self.lost = True
        log.warning(
            "run %s: its worker lost it (another holds it now); %d events not stored",
            self._run_id,
            dropped,
        )


class StoreEventLog(EventLog):
    """The event log on parley's `Store` (see the module's docstring).

    Make it with `await StoreEventLog.open(store, ...)` (starts the doorbell on PostgreSQL
    and the periodic sweep), close it with `close()`.

    Args:
        store: The service's store (its own runner: the events' writes are committed with its own).
        listen: On PostgreSQL, LISTEN for other replicas' events (else readers look again
            every `recheck_interval`: polling).
        notify: On PostgreSQL, NOTIFY other replicas of each flush (`benchmarks/event_log.py`
            turns both off to measure polling).
        poll_interval: Seconds between a reader's looks while the doorbell is down.
        recheck_interval: Seconds a reader waits for a wake-up before it looks anyway.
        listen_linger: Seconds the doorbell goes on LISTENing after the last reader here
            left: readers that come and go in a burst LISTEN once.
        flush_interval: Seconds a run's events wait for more before they are stored (0: at
            once). What a run's end finds queued is stored with its end, in one
            transaction: a shorter run costs its log no write of its own, and a long one a
            write per interval at most, whatever the rate of its tokens. Only readers
            following the run from its log (a client that reattached, another replica)
            see its events up to this much later; the request that started it streams them
            as they come.
    """

    def __init__(
        self,
        store: Store,
        *,
        listen: bool = True,
        notify: bool = True,
        poll_interval: float = 0.25,
        recheck_interval: float = 2.0,
        listen_linger: float = _LISTEN_LINGER,
        flush_interval: float = 0.05,
    ) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self.recheck_interval = recheck_interval
        self.listen_linger = listen_linger
        self.flush_interval = flush_interval
        self._runner = store._runner  # the store's own: events batched with its writes
        self._notify = notify and not store.is_sqlite
        # By whether the batch is fenced.
        self._pg_statements = {
            fenced: _pg_store_events(notify=self._notify, fenced=fenced) for fenced in (False, True)
        }
        self._listen = listen and not store.is_sqlite
        self._waiters: dict[str, set[asyncio.Event]] = {}
        # The last id this process stored of each run it has readers of: its own NOTIFY
        # comes back to it, and those readers were woken already.
        self._woken: dict[str, int] = {}
        self._doorbell_up = not self._listen
        self._listening = asyncio.Event()
        """Set while the doorbell's connection LISTENs."""
        self._poke = asyncio.Event()
        """Wakes the doorbell's task: the readers changed, or its connection was lost."""
        self._last_reader_left = -float("inf")
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(
        cls, store: Store, *, retention: float | None = None, **options: Any
    ) -> StoreEventLog:
        """A log on `store`, listening (PostgreSQL) and sweeping every so often (`retention`).

        Args:
            store: The service's store.
            retention: Seconds a run's events are kept after it ends (None: no sweeping).
            **options: `StoreEventLog`'s own.
        """
        self = cls(store, **options)
        if self._listen:
            self._tasks.append(asyncio.create_task(self._listen_forever(), name="events:listen"))
        if retention is not None:
            self._tasks.append(
                asyncio.create_task(self._sweep_forever(retention), name="events:sweep")
            )
        return self

    @property
    def notifies(self) -> bool:
        """Whether each store of events rings the doorbell (PostgreSQL, `notify`)."""
        return self._notify

    @property
    def doorbell_up(self) -> bool:
        """Whether readers are woken as soon as events are stored (else they poll).

        On PostgreSQL: the doorbell's connection is up (it LISTENs while readers follow).
        """
        return self._doorbell_up

    @property
    def listening(self) -> bool:
        """Whether the doorbell LISTENs now (PostgreSQL: while readers here follow runs)."""
        return self._listening.is_set()

    async def close(self) -> None:
        """Stop listening and sweeping."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # -- writing ----------------------------------------------------------------------------

    async def writer(
        self, run_id: str, *, new: bool = False, fence: tuple[str, int] | None = None
    ) -> EventWriter:
        """A writer for the run, numbering on from its log's last id (0 for a `new` run).

        `fence`: the worker's id and its attempt; its batches are stored only while that
        worker holds the run (see `_Writer`).
        """
        last = 0 if new else await self._runner.read(partial(_last_seq, run_id=run_id))
        return _Writer(self, run_id, last, fence)

    async def store_batch(
        self, run_id: str, rows: list[dict[str, Any]], *, fence: tuple[str, int] | None = None
    ) -> bool:
        """Store a writer's batch in one transaction (with its doorbell), then wake readers.

        False (nothing stored) when `fence` names a worker that no longer holds the run.
        """
        now = utcnow()
        for row in rows:
            row["created_at"] = now
        held: dict[str, Any] = {"_run": run_id}
        if fence is not None:
            held.update(_worker=fence[0], _attempt=fence[1])

        def work(conn: Connection) -> bool:
            # One writer thread: nothing can take the run between the look and the insert.
            if fence is not None and execute(conn, RUN_HELD, held).fetchone() is None:
                return False
            executemany(conn, insert_events, rows)
            return True

        if self.store.is_sqlite:
            stored = bool(await self._runner.write(work, brief=True))
        else:
            # The doorbell is sent at commit, to every listening replica (this one too).
            values = {
                **held,
                "run_id": run_id,
                "seqs": [row["seq"] for row in rows],
                "datas": [row["data"] for row in rows],
                "now": now,
                "channel": CHANNEL,
                "payload": f"{run_id}:{rows[-1]['seq']}",
            }
            statement = self._pg_statements[fence is not None]
            stored = bool(await self._runner.write(Counted(statement, values), single=True))
        if stored:
            self.stored(run_id, rows[-1]["seq"])
        return stored

    def stored(self, run_id: str, seq: int) -> None:
        """The run's events up to `seq` are stored (committed): wake its readers here."""
        if run_id in self._waiters:
            self._woken[run_id] = seq
        self._wake(run_id)

    # -- reading ----------------------------------------------------------------------------

    async def check(self, run_id: str, after: int | None) -> int:
        """Raise now what `follow(run_id, after)` would raise at its start; else where it starts.

        The id it would read on from: `after`, or with None the log's last id now. For a
        route to answer 400 or 410 before it starts streaming.

        Raises:
            NotFoundError: No such run.
            UnknownEventIdError: `after` is beyond the run's last event.
            EventsExpiredError: The run's log was dropped.
        """
        return await self._start(run_id, after)

    async def _start(self, run_id: str, after: int | None) -> int:
        """The id to read on from, for a reader asking for events after `after`."""

        def work(conn: Connection) -> tuple[Any, int]:
            query = select(runs.c.events_expired).where(runs.c.id == run_id)
            return conn.execute(query).one_or_none(), _last_seq(conn, run_id)

        row, last = await self._runner.read(work)
        if row is None:
            raise NotFoundError(f"no run {run_id!r}")
        if row.events_expired:
            raise EventsExpiredError(run_id)
        if after is None:
            return last
        # An id this log gave is stored before any reader sees it: one beyond the last stored
        # was never given, whether the run goes on or not.
        if after > last or after < 0:
            raise UnknownEventIdError(run_id, str(after))
        return after

    async def follow(self, run_id: str, after: int | None) -> AsyncIterator[tuple[int, AgentEvent]]:
        """The run's events after `after` (None: from now), then live ones, until `RunEnded`."""
        waiter = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(waiter)
        try:
            await self._hear_doorbell()
            cursor = await self._start(run_id, after)
            ended_seq = await self._end_seq(run_id)
            while True:
                waiter.clear()
                page = await self._runner.read(partial(_read_page, run_id=run_id, after=cursor))
                for seq, data in page.events:
                    event = AgentEventAdapter.validate_json(data)
                    cursor = seq
                    yield seq, event
                    if isinstance(event, RunEnded):
                        return
                if len(page.events) == _PAGE:
                    continue
                if page.expired:
                    raise EventsExpiredError(run_id)
                # Nothing more: its end was given before, or it ended with no RunEnded (its
                # process died) a while ago, or it is gone.
                if page.ended and not page.events and (cursor == ended_seq or page.settled()):
                    return
                await self._sleep(waiter)
        finally:
            waiting = self._waiters.get(run_id)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiters[run_id]
                    self._woken.pop(run_id, None)
                if not self._waiters:  # the last reader here: the doorbell lingers, then stops
                    self._last_reader_left = time.monotonic()
                    self._poke.set()

    async def _end_seq(self, run_id: str) -> int | None:
        """The id of the run's `RunEnded`, if its log ends with one (nothing comes after it)."""
        query = (
            select(run_events.c.seq, run_events.c.data)
            .where(run_events.c.run_id == run_id)
            .order_by(run_events.c.seq.desc())
            .limit(1)
        )
        row = await self._runner.read(lambda conn: conn.execute(query).one_or_none())
        if row is None or not row.data.startswith('{"type":"run_ended"'):
            return None
        return int(row.seq)

    async def _hear_doorbell(self) -> None:
        """Have the doorbell LISTEN before a reader's first look, if it is up.

        A NOTIFY sent after that look is then heard; one sent before is of events the look
        reads. A doorbell that does not LISTEN in time leaves the reader polling.
        """
        if not self._listen or not self._doorbell_up or self._listening.is_set():
            return
        self._poke.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_PING_TIMEOUT):
                await self._listening.wait()

    async def _sleep(self, waiter: asyncio.Event) -> None:
        heard = not self._listen or self._listening.is_set()
        timeout = self.recheck_interval if heard else self.poll_interval
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that comes as the
        # event is set, and the task would go on (seen: a close that never ended).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await waiter.wait()

    def _wake(self, run_id: str) -> None:
        for waiter in self._waiters.get(run_id, ()):
            waiter.set()

    def _wake_all(self) -> None:
        for waiting in self._waiters.values():
            for waiter in waiting:
                waiter.set()

    # -- retention ----------------------------------------------------------------------------

    async def sweep(self, retention: float) -> int:
        """Drop the logs of runs that ended over `retention` seconds ago; how many runs."""
        cutoff = utcnow() - timedelta(seconds=retention)
        old = and_(
            runs.c.status.not_in(sorted(ACTIVE_STATUSES)),
            runs.c.ended_at < bindparam("cutoff", type_=runs.c.ended_at.type),
            runs.c.events_expired.is_(False),
        )

        def work(conn: Connection) -> int:
            ids = list(conn.execute(select(runs.c.id).where(old), {"cutoff": cutoff}).scalars())
            if not ids:
                return 0
            conn.execute(delete(run_events).where(run_events.c.run_id.in_(ids)))
            conn.execute(update(runs).where(runs.c.id.in_(ids)).values(events_expired=True))
            return len(ids)

        count: int = await self._runner.write(work)
        return count

    async def _sweep_forever(self, retention: float) -> None:
        interval = max(1.0, min(60.0, retention / 2))
        while True:
            await asyncio.sleep(interval)
            try:
                swept = await self.sweep(retention)
            except Exception as exc:  # the store is down: sweep next time
                stop_if_cancelled()
                log.warning("could not drop old run events: %s", exc)
                continue
            if swept:
                log.info("dropped the events of %d runs (PARLEY_EVENT_RETENTION)", swept)

    # -- the doorbell (PostgreSQL) ------------------------------------------------------------

    async def _listen_forever(self) -> None:
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: readers poll, try again
                stop_if_cancelled()
                log.warning("event doorbell down (%s); readers poll until it is back", exc)
            finally:
                self._doorbell_up = False
            await asyncio.sleep(_LISTEN_RETRY)

    async def _listen_once(self) -> None:
        """Listen on a connection of its own until it fails (then return or raise)."""
        import asyncpg  # noqa: PLC0415 - PostgreSQL only

        conn = await asyncpg.connect(**_connect_args(self.store))
        lost = asyncio.Event()

        def on_lost(_conn: object) -> None:
            lost.set()
            self._poke.set()

        conn.add_termination_listener(on_lost)
        try:
            self._doorbell_up = True
            await self._keep_listening(conn, lost)
        finally:
            self._doorbell_up = False
            self._listening.clear()
            conn.terminate()

    async def _keep_listening(self, conn: Any, lost: asyncio.Event) -> None:
        """LISTEN on `conn` while readers need it; return when it is lost or stops answering.

        A cut network says nothing, so a quiet connection is pinged every `_LISTEN_CHECK`.
        """
        while True:
            self._poke.clear()
            # Until what it does is what is wanted: readers may come or go meanwhile.
            while (wanted := self._wants_doorbell()) != self._listening.is_set():
                if wanted:
                    await conn.add_listener(CHANNEL, self._on_notify)
                    self._listening.set()
                    # Nothing sent while it did not LISTEN is kept for it: readers look again.
                    self._wake_all()
                else:
                    await conn.remove_listener(CHANNEL, self._on_notify)
                    self._listening.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._until_check()):
                    await self._poke.wait()
            if lost.is_set() or conn.is_closed():
                return
            if not self._poke.is_set():
                async with asyncio.timeout(_PING_TIMEOUT):
                    await conn.fetchval("SELECT 1")

    def _wants_doorbell(self) -> bool:
        lingering = time.monotonic() - self._last_reader_left < self.listen_linger
        return bool(self._waiters) or lingering

    def _until_check(self) -> float:
        """Seconds to the next ping, or to the end of the linger after the last reader."""
        if self._waiters or not self._listening.is_set():
            return _LISTEN_CHECK
        linger_left = self._last_reader_left + self.listen_linger - time.monotonic()
        return max(0.0, min(_LISTEN_CHECK, linger_left))

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        run_id, _, seq = str(payload).rpartition(":")
        if seq.isdigit() and int(seq) <= self._woken.get(run_id, 0):
            return  # this process's own flush: its readers were woken at once
        self._wake(run_id)


def _connect_args(store: Store) -> dict[str, Any]:
    """The arguments of `asyncpg.connect` for the store's database (its URL's parts)."""
    url = store.engine.url
    args: dict[str, Any] = {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "database": url.database,
        "timeout": PG_CONNECT_TIMEOUT,
        # What an operator (or a test) finds it by in pg_stat_activity.
        "server_settings": {"application_name": LISTENER_NAME},
    }
    ssl = url.query.get("ssl") or url.query.get("sslmode")
    if ssl is not None:
        args["ssl"] = ssl if isinstance(ssl, str) else ssl[0]
    return {key: value for key, value in args.items() if value is not None}
