"""How the store's operations reach the database: a runner per database.

Each store operation is a function of a sync connection, run as one transaction. SQLite's
(`ThreadRunner`) runs reads in a small pool of the store's own threads and writes on ONE
writer connection, inline when the writer is idle and else queued to its thread (group
commit); PostgreSQL's (`GreenletRunner`) runs them on asyncpg through SQLAlchemy's greenlet
bridge, group-committing writes in a few batches at once. `runner_for` picks one.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sqlalchemy_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from parley._sqlite import use_wal
from parley.service.store.prepared import Counted

__all__ = [
    "DATABASE_DOWN",
    "GreenletRunner",
    "Runner",
    "ThreadRunner",
    "Write",
    "is_database_down",
    "runner_for",
    "set_outcomes",
    "sqlite_pragmas",
]

T = TypeVar("T")

_SQLITE_THREADS = 4  # reads run beside the one writer; more threads only contend for the GIL

DATABASE_DOWN: tuple[type[Exception], ...] = (
    OSError,  # the driver's connection errors, and TimeoutError (a statement timed out)
    sqlalchemy_exc.DBAPIError,  # some of them: see `is_database_down`
    sqlalchemy_exc.TimeoutError,  # the pool ran out of connections
)
"""What the store raises when the database cannot be reached (`is_database_down` says when)."""
# SQLSTATE classes of a server that cannot serve now: 08 (connection exception), 57P
# (operator intervention: shutting down, crashed, starting up).
_DOWN_STATES = ("08", "57P")


def is_database_down(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached now (it may work in a moment).

    Connection errors, timeouts, a pool out of connections, a connection the database
    dropped, and a server shutting down or starting up (asyncpg's `CannotConnectNowError`
    comes wrapped in SQLAlchemy's generic `DBAPIError`); not a constraint or SQL error.
    """
    down = sqlalchemy_exc.OperationalError | sqlalchemy_exc.InterfaceError
    if isinstance(exc, OSError | sqlalchemy_exc.TimeoutError | down):
        return True
    if not isinstance(exc, sqlalchemy_exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
    return isinstance(state, str) and state.startswith(_DOWN_STATES)


class Runner(ABC):
    """Runs a store operation, written as a function of a sync connection, as one transaction."""

    @abstractmethod
    async def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` on a connection (reads only; nothing is committed)."""

    @abstractmethod
    async def write(
        self, work: Callable[[Connection], T], *, single: bool = False, brief: bool = False
    ) -> T:
        """Run `work` in a transaction, committed when it returns.

        `single`: `work` sends one statement, atomic by itself; where a transaction costs
        round trips of its own (PostgreSQL), run alone it needs none. `brief`: `work` is a
        few statements on a few rows (a run's opening, its end, a batch of its events) and
        never waits on anything but the database; where writes run in a thread (SQLite), it
        may run in the caller's instead, when the writer is idle.
        """

    @abstractmethod
    async def close(self) -> None:
        """Close the runner's connections."""

    async def migrate(self, work: Callable[[Connection], None]) -> None:
        """Run the migrations `work` applies, as one transaction."""
        await self.write(work)


class GreenletRunner(Runner):
    """PostgreSQL: the work runs on an asyncpg connection through SQLAlchemy's greenlet bridge.

    Writes are group-committed too: they queue, and up to `_PG_WRITERS` tasks each take what
    is queued and run it as one transaction on a pooled connection. A quiet store runs each
    write at once, alone; a busy one spends a BEGIN, a COMMIT and a pool checkout (three
    round trips' worth of the driver's work) on a batch instead of on every write. As on
    SQLite (`ThreadRunner`), a caller hears of its write only after its commit, and a work
    that fails (a constraint, a statement over its timeout) fails alone: its caller gets the
    error, and the rest of its batch runs again without it (`_sort_failure`). A lost
    connection fails the batch at once (alone, each would wait out the same outage). A caller
    that stops waiting does not take its write back: it may share a batch, which goes on.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        # The same pool, its connections in autocommit while checked out: no BEGIN, no
        # COMMIT or ROLLBACK (asyncpg's isolation switch is client-side, no round trip).
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._writes: deque[Write] = deque()
        self._writers: set[asyncio.Task[None]] = set()

    async def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` on a pooled connection in autocommit."""
        # In autocommit: a read commits nothing, and under READ COMMITTED (PostgreSQL's
        # default, the store's) each statement sees the database as of its own start in a
        # transaction too; the BEGIN and the ROLLBACK were two round trips for nothing.
        async with self._autocommit.connect() as conn:
            return await conn.run_sync(work)

    async def write(
        self, work: Callable[[Connection], T], *, single: bool = False, brief: bool = False
    ) -> T:
        """Queue `work` for the next batch (see the class); its result after the commit."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._writes.append(Write(work, future, loop, alone=False, single=single))
        if len(self._writers) < _PG_WRITERS:
            self._writers.add(asyncio.create_task(self._write_queued(), name="parley-db-writer"))
        # Shielded: a caller that stops waiting does not cut a batch it shares with others.
        return await asyncio.shield(future)

    async def _write_queued(self) -> None:
        try:
            while self._writes:
                size = min(_WRITE_BATCH, len(self._writes))
                batch = [self._writes.popleft() for _ in range(size)]
                try:
                    await self._write_batch(batch)
                except BaseException as exc:  # cancelled (the store closes): nobody left hanging
                    set_outcomes([(item, None, exc) for item in batch])
                    raise
        finally:
            # In the very step that found the queue empty: a write queued after it starts a
            # writer of its own (a done-callback would leave the set full one turn longer, and
            # a write queued in that turn would wait for a writer that never comes).
            self._writers.discard(asyncio.current_task())

    async def _write_batch(self, batch: list[Write]) -> None:
        pending, alone, timeouts = batch, list[Write](), 0
        if len(batch) == 1 and batch[0].single:
            # One statement is a transaction of its own: sent alone, no BEGIN and no COMMIT.
            pending, alone = [], batch
        while pending:
            progress = _Progress()
            try:
                async with self._engine.begin() as conn:
                    await conn.run_sync(progress.run, pending)
            except Exception as exc:
                # A statement timed out (asyncpg's `command_timeout`): that work's own error,
                # unless another times out too, when the server is more likely gone.
                timeouts += isinstance(exc, TimeoutError)
                lost = is_database_down(exc) and not isinstance(exc, TimeoutError)
                settled, pending, unknown = _sort_failure(
                    pending, progress, exc, down=lost or timeouts > 1
                )
                set_outcomes(settled)
                alone += unknown
            else:
                set_outcomes(progress.outcomes(pending))
                pending = []
        for item in alone:
            try:
                result = await self._write_alone(item)
            except Exception as exc:
                set_outcomes([(item, None, exc)])
            else:
                set_outcomes([(item, result, None)])

    async def _write_alone(self, item: Write) -> Any:
        if item.single:  # one statement is a transaction of its own: three round trips one
            async with self._autocommit.connect() as conn:
                if isinstance(item.work, Counted):  # straight on asyncpg: no greenlet
                    return await item.work.direct(conn)
                return await conn.run_sync(item.work)
        async with self._engine.begin() as conn:
            return await conn.run_sync(item.work)

    async def close(self) -> None:
        """Let the queued writes finish (the store disposes of the engine after)."""
        while self._writers:
            await asyncio.gather(*self._writers, return_exceptions=True)


_PG_WRITERS = 4
"""Batches of writes in flight at once on PostgreSQL (each on one pooled connection)."""


class ThreadRunner(Runner):
    """SQLite: the work runs whole in a thread, on the standard library's driver.

    One hop to a thread and back per transaction: an async driver (aiosqlite) hops for every
    cursor call, several per statement, which cost more than the statements themselves. The
    threads are the store's own, so tools running in the event loop's default pool never hold
    the store up.

    Writes go to ONE writer thread, through a queue (group commit). It takes everything queued
    and runs it as one transaction, committed once, then settles the callers' futures with one
    wake-up of their loop: under many clients a commit, and each hop between the loop and the
    thread, serve a batch of runs instead of one. SQLite has one writer anyway; before this,
    writers took turns on a lock from several threads, and with the event loop busy each turn
    waited for the GIL and for the thread to be scheduled, one run after another. A caller's
    future is settled only after the commit of its work (its durability is unchanged). When a
    work in a batch raises, the batch is rolled back, its caller gets the error, and the others
    run again as one batch without it (`_sort_failure`): one caller's error is that caller's
    only. A work must therefore be safe to run again, as a function of the connection it is
    given (every store operation is), and an expected refusal (no such run, a busy thread) is
    a work's result, raised by its caller after the write, so that it costs no batch a rerun.
    Reads run in a pool beside the writer (WAL: they never wait for it).

    A brief write (a run's opening, its end, a batch of its events: `Runner.write`) that
    finds the writer idle (nothing queued, no batch under way) runs inline instead, on the
    writer's connection, in the caller's thread: a quiet service's write then costs no hop
    to the writer thread and back (two thread wake-ups, about a tenth of a request's CPU
    here). Its commit cannot stall the event loop: the writer's connection never
    checkpoints the WAL at a commit (`wal_autocheckpoint=0`); and it never waits for another
    process's write lock (busy timeout 0 for the inline try): it goes to the queue instead,
    where the wait is the thread's.

    The WAL is copied into the database every `_CHECKPOINT_EVERY` commits by a thread and a
    connection of its own (`_Checkpointer`), beside the writer: no write waits for it.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pool = ThreadPoolExecutor(max_workers=_SQLITE_THREADS, thread_name_prefix="parley-db")
        self._writes: queue.SimpleQueue[Write | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_started = threading.Lock()
        self._conn: Connection | None = None  # the writer's own (its thread's, or inline)
        # Held by whoever writes on `_conn`: the writer thread for a batch, or an inline write.
        self._writing = threading.Lock()
        self._commits = 0  # since the last checkpoint of the WAL was asked for
        self._checkpointer = _Checkpointer(engine, self._writing)
        self._waits = True  # whether `_conn` waits for another process's write lock

    async def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one of the store's reader threads."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._read, work)

    async def write(
        self, work: Callable[[Connection], T], *, single: bool = False, brief: bool = False
    ) -> T:
        """Queue `work` to the writer thread; a `brief` one runs inline if the writer is idle."""
        # `single` changes nothing here: SQLite's transactions cost no round trips.
        if brief:
            done, result = self._write_inline(work)
            if done:
                return cast(T, result)
        queued: T = await self._submit(work, alone=False)
        return queued

    def _write_inline(self, work: Callable[[Connection], T]) -> tuple[bool, T | None]:
        """Run `work` here, now, if nothing else writes: (whether it ran, its result).

        It did not run when a write is queued or under way (it would pass them, or wait, as
        it would for the end of a checkpoint: `_Checkpointer`), or when another process
        holds the database's write lock (SQLITE_BUSY: rolled back, to be queued).
        Its own error is raised, as the writer thread would hand it over.
        """
        if self._checkpointer.waiting or not self._writes.empty():
            return False, None
        if not self._writing.acquire(blocking=False):
            return False, None
        try:
            conn = self._connection(waits=False)
            try:
                with conn.begin():
                    result = work(conn)
            except sqlalchemy_exc.OperationalError as exc:
                if _is_busy(exc):
                    return False, None
                raise
            self._committed()
            return True, result
        finally:
            self._writing.release()

    def _read(self, work: Callable[[Connection], T]) -> T:
        with self._engine.connect() as conn:
            return work(conn)

    async def _submit(self, work: Callable[[Connection], Any], *, alone: bool) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._start_writer()
        self._writes.put(Write(work, future, loop, alone))
        return await future

    def _start_writer(self) -> None:
        if self._writer is not None:
            return
        with self._writer_started:
            if self._writer is None:
                thread = threading.Thread(
                    target=self._write_forever, name="parley-db-writer", daemon=True
                )
                thread.start()
                self._writer = thread

    def _write_forever(self) -> None:
        """The writer thread: batches of queued writes, one transaction each, until `None`."""
        try:
            self._write_batches()
        finally:
            with self._writing:
                self._close_connection()

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self, *, waits: bool = True) -> Connection:
        """The writer's own connection (made again if it was lost).

        Only it writes, so its page cache stays valid from one write to the next; a pooled
        one, used by a reader meanwhile, would read again the pages the writer changed.
        `waits`: whether it waits for another process's write lock (the writer thread's
        does; an inline write's does not). Switched only when it changes: a pragma each
        time would be two statements more a write.
        """
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            conn = self._engine.connect()
            raw = conn.connection.driver_connection
            assert raw is not None  # just connected
            # Checkpoints are `_Checkpointer`'s, beside it, never a commit's (nor an inline one's).
            raw.execute("PRAGMA wal_autocheckpoint=0")
            self._conn, self._waits = conn, True  # `sqlite_pragmas` set its busy timeout
        if waits != self._waits:
            raw = self._conn.connection.driver_connection
            assert raw is not None  # checked above
            raw.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS if waits else 0}")
            self._waits = waits
        return self._conn

    def _committed(self) -> None:
        """Count a commit on the writer's connection (held); ask for a checkpoint when due."""
        self._commits += 1
        if self._commits >= _CHECKPOINT_EVERY:
            self._commits = 0
            self._checkpointer.ask()

    def _write_batches(self) -> None:
        while True:
            first = self._writes.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _WRITE_BATCH and not batch[-1].alone:
                try:
                    item = self._writes.get_nowait()
                except queue.Empty:
                    break
                if item is None:  # closing: finish this batch first
                    self._writes.put(None)
                    break
                if item.alone:  # runs on its own, after this batch
                    self._run_locked(batch)
                    batch = [item]
                    break
                batch.append(item)
            self._run_locked(batch)

    def _run_locked(self, batch: list[Write]) -> None:
        """Run a batch, holding the writer's connection (an inline write waits its turn)."""
        self._checkpointer.let_pass()
        with self._writing:
            outcomes = self._run_batch(batch)
            self._committed()
        # Settled with the connection free: a caller's next write may run inline.
        _settle(outcomes)

    def _run_batch(self, batch: list[Write]) -> list[_Outcome]:
        if len(batch) == 1 and batch[0].alone:
            return [(batch[0], *self._run_alone(batch[0]))]
        outcomes: list[_Outcome] = []
        pending, alone = batch, list[Write]()
        while pending:
            progress = _Progress()
            try:
                conn = self._connection()
                with conn.begin():
                    progress.run(conn, pending)
            except BaseException as exc:  # even SystemExit: the writer thread must live on
                settled, pending, unknown = _sort_failure(pending, progress, exc, down=False)
                outcomes += settled
                alone += unknown
            else:
                outcomes += progress.outcomes(pending)
                pending = []
        outcomes += [(item, *self._run_alone(item)) for item in alone]
        return outcomes

    def _run_alone(self, item: Write) -> tuple[Any, BaseException | None]:
        conn: Connection | None = None
        try:
            conn = self._connection()
            if item.alone:  # the work manages its transactions itself (migrations)
                return item.work(conn), None
            with conn.begin():
                return item.work(conn), None
        except BaseException as exc:  # its caller hears of it; the writer thread lives on
            return None, exc
        finally:
            if conn is not None and conn.in_transaction():  # left open by a failed work
                self._roll_back(conn)

    def _roll_back(self, conn: Connection) -> None:
        try:
            conn.rollback()
        except Exception:  # a connection that cannot roll back is not written on again
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()

    async def migrate(self, work: Callable[[Connection], None]) -> None:
        """Run the migrations with foreign keys off, then check every key still holds.

        SQLite alters a table by copying it and dropping the old one; with foreign keys on,
        dropping `threads` would delete every message, run and approval (ON DELETE CASCADE).
        The pragma is a no-op inside a transaction, so it is set before one begins. It runs
        on the writer thread, alone: no other write meets it.
        """

        def migrate(conn: Connection) -> None:
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
            try:
                with conn.begin():
                    work(conn)
                    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise RuntimeError(f"the migration broke foreign keys: {broken[:5]}")
            finally:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()

        await self._submit(migrate, alone=True)

    async def close(self) -> None:
        """Let the queued writes finish; close the writer's connection (then the pool's)."""
        loop = asyncio.get_running_loop()
        writer = self._writer
        if writer is not None:  # the writes queued before the close are done first
            self._writes.put(None)
            await loop.run_in_executor(self._pool, writer.join)
            self._writer = None
        with self._writing:  # the writer's connection, made inline if its thread never ran
            self._close_connection()
        await loop.run_in_executor(self._pool, self._checkpointer.close)
        await loop.run_in_executor(self._pool, self._engine.dispose)
        self._pool.shutdown(wait=False)


class _Checkpointer:
    """Copies the WAL into the database on a thread and a connection of its own, when asked.

    A PASSIVE checkpoint takes no write lock: in WAL mode it runs while the writer commits.
    Run on the writer's connection, it held that connection for its whole copy (about 3.5 ms
    for 128 commits here), and the writes that came meanwhile (a run's opening, its end)
    waited for it: the tail of a quiet service's latency. Here the copy runs beside them
    (sqlite3 lets the GIL go while SQLite works, so the event loop runs on too).

    SQLite starts the WAL again from its beginning only at a write that finds all of it
    copied, and a copy copies what was there when it began: under a steady load the writes
    made meanwhile would be left behind every time, and the WAL would grow without end. So
    a second pass copies them with this process's writes held (`writing`, the writer's
    lock): the few frames of a copy's milliseconds, about a tenth of the first pass's time.
    The writers let it pass (`waiting`, `let_pass`): a lock is not fair, and a loop of
    inline writes, taking it again at once, would keep it waiting for dozens of writes.
    Asks that come while one runs make one more (an event, set once).
    """

    def __init__(self, engine: Engine, writing: threading.Lock) -> None:
        self._engine = engine
        self._writing = writing
        self._due = threading.Event()
        self._clear = threading.Event()  # unset while a last pass waits for `writing` or holds it
        self._clear.set()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()

    def ask(self) -> None:
        """Ask for a checkpoint, made soon in the checkpointer's thread (started at the first)."""
        if self._thread is None:
            with self._started:
                if self._thread is None and not self._closing:
                    thread = threading.Thread(
                        target=self._run, name="parley-db-checkpoint", daemon=True
                    )
                    thread.start()
                    self._thread = thread
        self._due.set()

    @property
    def waiting(self) -> bool:
        """Whether a last pass waits for the writer's lock, or holds it (writes let it pass)."""
        return not self._clear.is_set()

    def let_pass(self) -> None:
        """Wait, if a last pass waits for the writer's lock, until it is done."""
        if not self._clear.is_set():  # a set event's wait still takes its lock: every batch
            self._clear.wait()

    def close(self) -> None:
        """Stop the thread (a checkpoint under way ends first); later asks are ignored."""
        with self._started:
            self._closing = True
            thread = self._thread
        self._due.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            if self._closing:
                return
            self.checkpoint()
            self._clear.clear()
            try:
                with self._writing:  # what the writes made meanwhile: the WAL is then all copied
                    self.checkpoint()
            finally:
                self._clear.set()

    def checkpoint(self) -> None:
        """One PASSIVE checkpoint, on a pooled connection (what it fails to copy, the next does)."""
        failed = (sqlite3.Error, sqlalchemy_exc.DBAPIError)
        with contextlib.suppress(*failed), self._engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None  # just checked out
            raw.execute("PRAGMA wal_checkpoint(PASSIVE)").close()


_BUSY_TIMEOUT_MS = 10_000
"""How long a write waits for another process's write lock (not an inline one: it queues)."""
_CHECKPOINT_EVERY = 128
"""Commits on the writer's connection between two checkpoints of the WAL (at a few pages a
commit, about SQLite's own automatic checkpoint's 1,000 pages; `_Checkpointer` makes them)."""

_WRITE_BATCH = 256
"""The most writes one transaction of `ThreadRunner`'s writer takes (bounds its latency)."""


@dataclass(frozen=True)
class Write:
    """A write queued for `ThreadRunner`'s writer: its work and where its outcome goes."""

    work: Callable[[Connection], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    alone: bool
    """Run on its own connection, outside any batch (it commits itself)."""
    single: bool = False
    """It sends one statement: run alone, it needs no transaction (`Runner.write`)."""


_Outcome = tuple[Write, Any, BaseException | None]
"""A write, and its result or its error."""


class _Progress:
    """How far a batch's works got in its transaction (they run in order)."""

    def __init__(self) -> None:
        self.started = 0
        self.results: list[Any] = []

    def run(self, conn: Connection, batch: list[Write]) -> None:
        for item in batch:
            self.started += 1
            self.results.append(item.work(conn))

    def outcomes(self, batch: list[Write]) -> list[_Outcome]:
        return [(item, r, None) for item, r in zip(batch, self.results, strict=True)]


def _sort_failure(
    pending: list[Write], progress: _Progress, exc: BaseException, *, down: bool
) -> tuple[list[_Outcome], list[Write], list[Write]]:
    """After a batch's transaction failed: what is settled, what runs again together, alone.

    The works run in order and none catches a database error, so the work that raised met its
    own error, the one it would meet run alone after those before it: its caller gets it, and
    the others run again as one batch, without it. A failing request thus costs one more
    transaction, not one for every write it shared a batch with (a cheap bad request would
    otherwise make a busy service commit each write apart). A database that cannot be reached
    fails them all. An error outside every work (at the commit) names none of them: each runs
    again alone.
    """
    if down:
        return [(item, None, exc) for item in pending], [], []
    culprit = len(progress.results)
    if progress.started > culprit:
        rest = pending[:culprit] + pending[culprit + 1 :]
        return [(pending[culprit], None, exc)], rest, []
    return [], [], pending


def _settle(outcomes: list[_Outcome]) -> None:
    """Hand each write's result or error to its future, one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].loop, []).append(outcome)
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits any more
            loop.call_soon_threadsafe(set_outcomes, settled)


def set_outcomes(outcomes: list[_Outcome]) -> None:
    """Hand each write's result or error to its future (on its loop's thread)."""
    for item, result, error in outcomes:
        if item.future.done():  # its caller was cancelled; the work was done all the same
            continue
        if error is not None:
            item.future.set_exception(error)
        else:
            item.future.set_result(result)


def runner_for(engine: AsyncEngine) -> Runner:
    """The runner for `engine`'s database (SQLite's on a sync engine of its own)."""
    if engine.dialect.name != "sqlite":
        return GreenletRunner(engine)
    sync_engine = create_engine(engine.url.set(drivername="sqlite+pysqlite"))
    event.listen(sync_engine, "connect", sqlite_pragmas)
    return ThreadRunner(sync_engine)


def sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """Set SQLite's connection up: busy timeout, synchronous NORMAL, foreign keys, WAL."""
    cursor = dbapi_connection.cursor()
    # WAL: readers never wait for the writer. NORMAL sync is durable across process crashes
    # in WAL mode (only a power loss may drop the last commits).
    for pragma in (
        f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}",
        "PRAGMA synchronous=NORMAL",
        "PRAGMA foreign_keys=ON",
    ):
        cursor.execute(pragma)
    cursor.close()
    use_wal(dbapi_connection, 10.0)


def _is_busy(exc: sqlalchemy_exc.OperationalError) -> bool:
    """Whether SQLite answered SQLITE_BUSY: another connection holds the write lock."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_BUSY
