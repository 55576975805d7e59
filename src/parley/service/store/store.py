"""`Store`: threads, messages, runs, approvals, feedback and API keys, on SQLAlchemy async.

One class for both databases; each operation is a function of a sync connection, run as one
transaction (writes are group-committed: those queued together share one, see the runners).
SQLite (the embedded default) runs in WAL mode, so readers never wait for the writer; its
reads run whole in the store's own threads (one hop per transaction) and its writes in one
writer thread, so a write never meets SQLite's "database is locked"; one process serves an
SQLite store. PostgreSQL (asyncpg, through SQLAlchemy's greenlet bridge) takes any number of
processes.

A thread is named by its user and its id together: every method on a thread takes both, and
one user's ids say nothing about another's (see `tables`). Every method is one transaction: a
message is stored whole with its thread's new
`updated_at`, a run's end with its status and usage, so a process killed at any point leaves
the store consistent (a run left `running` by a dead process is marked `interrupted` by the
next run on its thread, `interrupt_stale_runs`). A run takes two at least: `open_run` (its
thread claimed, its record and its question) and `end_run` (its last message, its status and
usage); each message between them is one more.

The statements a run executes are built once (`_Run`), with bound parameters: building
SQLAlchemy's statement objects, and their cache keys, cost more than SQLite executing them.
On PostgreSQL, where each statement is a round trip and a transaction two more, a run's
writes are single statements (data-modifying WITHs), sent with no transaction around them
when they run alone (`Store.transact(..., single=True)`): a new thread with its run and
question is one (on a thread that exists it writes nothing, and `open_run`'s transaction
follows), a run's end with its answer is one; reads run in autocommit.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Protocol, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Executable,
    Integer,
    String,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    case,
    delete,
    event,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Row, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.dml import Insert

from parley.agents.approval import PendingApproval
from parley.errors import ConflictError, NotFoundError
from parley.messages import Msg
from parley.service.runs_protocol import EventRows
from parley.service.store.prepared import Counted, execute, executemany
from parley.service.store.runners import GreenletRunner, runner_for, sqlite_pragmas
from parley.service.store.tables import (
    api_keys,
    approvals,
    feedback,
    messages,
    run_events,
    runs,
    threads,
    utcnow,
)

__all__ = [
    "ApiKeyRecord",
    "LockCarrier",
    "OpenedRun",
    "RunJob",
    "RunRecord",
    "Store",
    "ThreadRecord",
    "hash_key",
]

STALE_RUN_ERROR = "the process serving this run ended before the run did"
"""The error of a run found `running` with no process left to finish it."""
T = TypeVar("T")

PG_CONNECT_TIMEOUT = 5.0
"""Seconds to open a PostgreSQL connection before giving up (the database is unreachable)."""
PG_STATEMENT_TIMEOUT = 10.0
"""Seconds a statement may wait for PostgreSQL's answer (client side): a network that drops
packets without a word (a black hole) fails the request, a 503, instead of hanging it. The
store's statements take milliseconds; migrations run without it."""
PG_TIMEOUTS = {"timeout": PG_CONNECT_TIMEOUT, "command_timeout": PG_STATEMENT_TIMEOUT}
"""asyncpg's connect arguments that bound the connect and every statement."""
_PG_POOL_SIZE = 10  # a store transaction takes a millisecond or two: ten serve many runs
_MIGRATIONS = "parley.service.store:migrations"
_TITLE_LENGTH = 80
_KEY_PREFIX = "pk_"
# Any 64-bit number works: it names the migration lock among PostgreSQL's advisory locks.
_MIGRATION_LOCK = 0x7061726C6579  # "parley"


@dataclass(frozen=True)
class ThreadRecord:
    """A thread's row: who owns it, which agent it talks to, its title and times."""

    thread_id: str
    user_id: str
    agent: str
    title: str
    created_at: datetime
    updated_at: datetime
    status: str = "idle"


@dataclass(frozen=True)
class RunRecord:
    """A run's row: where it ran, how it ended, what it used."""

    run_id: str
    thread_id: str
    user_id: str
    agent: str
    model: str
    status: str
    error: str | None
    usage: dict[str, Any] | None
    cancel_requested: bool
    started_at: datetime
    ended_at: datetime | None
    queued_at: datetime | None = None
    input: dict[str, Any] | None = None
    """The stored `RunInput` (JSON); None for a run recorded before runs were jobs."""
    kwargs: dict[str, Any] | None = None
    multitask_strategy: str = "reject"
    cancel_action: str | None = None
    worker_id: str | None = None
    lease_until: datetime | None = None
    attempt: int = 0


@dataclass(frozen=True)
class RunJob:
    """A run recorded as a job its worker holds from the start (`Store.open_run`)."""

    worker_id: str
    lease_seconds: float
    input: dict[str, Any]
    """The run's `RunInput`, as JSON (a takeover starts from it)."""
    multitask_strategy: str = "reject"
    kwargs: dict[str, Any] | None = None
    """The caller's options stored with the run (LangGraph's run options, say)."""

    def values(self, now: datetime) -> dict[str, Any]:
        """The record's job parameters, by the names `_Run.record` binds."""
        return {
            "_input": self.input,
            "_kwargs": self.kwargs,
            "_strategy": self.multitask_strategy,
            "_worker": self.worker_id,
            "_lease": now + timedelta(seconds=self.lease_seconds),
            "_attempt": 1,
        }


@dataclass(frozen=True)
class OpenedRun:
    """What `Store.open_run` found and stored: the thread's messages before the run's own."""

    history: list[Msg]
    """The thread's messages (the seed, when it was stored), oldest first."""
    added: list[Msg]
    """The messages stored with the run's record (its question), after `history`."""


class LockCarrier(Protocol):
    """The connection that holds a thread's lock (PostgreSQL), lent for the run's statements.

    A run's opening can take its thread's lock and its end give it back in the statement
    itself, one round trip for both, when that connection is free: the statement has a
    `_lock` (opening) or `_unlock` (end) parameter that is NULL when sent any other way.
    Each method answers the statement's count if it was sent so, or None: then the caller
    sends it as usual (`take_with` has taken the lock meanwhile; after `give_back_with` the
    lock is given back when the lease is released).
    """

    async def take_with(self, statement: Executable, values: Mapping[str, Any]) -> int | None:
        """Take the thread's lock, with `statement` if its connection is free (see the class).

        Raises:
            ConflictError: The thread stayed busy for the lease's timeout.
        """
        ...

    async def give_back_with(self, statement: Executable, values: Mapping[str, Any]) -> int | None:
        """Give the thread's lock back with `statement`, if its connection is free."""
        ...


@dataclass(frozen=True)
class ApiKeyRecord:
    """An API key as listed (the key itself is never stored)."""

    key_id: str
    user_id: str
    name: str
    created_at: datetime
    revoked_at: datetime | None


def hash_key(key: str) -> str:
    """The stored form of an API key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode()).hexdigest()


def _utc(value: datetime) -> datetime:
    # SQLite gives back naive datetimes; everything the store writes is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _title(msgs: Iterable[Msg]) -> str:
    for msg in msgs:
        if msg.role == "user" and msg.text.strip():
            words = " ".join(msg.text.split())
            if len(words) <= _TITLE_LENGTH:
                return words
            return words[: _TITLE_LENGTH - 1].rstrip() + "…"
    return ""


class Store:
    """The service's persistent state. Open with `await Store.open(url)`; close when done.

    `engine` is the async engine of `url`, for callers' own queries; the store's operations run
    through the runner the database wants (see `ThreadRunner`, `GreenletRunner`).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"
        self._runner = runner_for(engine)

    async def transact(
        self, work: Callable[[Connection], T], *, single: bool = False, brief: bool = False
    ) -> T:
        """Run `work` (a function of a sync connection) as one committed transaction.

        It may share that transaction with other writes queued meanwhile (group commit), and
        when one of them fails it runs again alone: `work` must do nothing but its
        statements (or be safe to do twice). `single`: `work` sends ONE statement; run
        alone on PostgreSQL it goes without BEGIN and COMMIT (two round trips fewer).
        `brief`: `work` is a few statements on a few rows and waits on nothing else; on
        SQLite it then runs in the caller's thread when the writer is idle (no hop to the
        writer thread; see `parley.service.store.runners.ThreadRunner`).
        """
        return await self._runner.write(work, single=single, brief=brief)

    async def query(self, work: Callable[[Connection], T]) -> T:
        """Run `work` (reads only) on a connection."""
        return await self._runner.read(work)

    @classmethod
    async def open(cls, url: str, *, migrate: bool = True, **engine_options: Any) -> Store:
        """Connect to `url` and bring its schema up to date (alembic migrations).

        On PostgreSQL the engine keeps `_PG_POOL_SIZE` connections and opens no more (unless
        `engine_options` say otherwise): past the pool's size SQLAlchemy would open a
        connection for one transaction and close it after (a TLS attempt, an authentication
        and a server process each time, which cost more than the transaction); a transaction
        waits for a free connection instead.
        """
        if make_url(url).get_backend_name() == "postgresql":
            engine_options = {
                "pool_size": _PG_POOL_SIZE,
                "max_overflow": 0,
                "connect_args": PG_TIMEOUTS,
                **engine_options,
            }
        engine = create_async_engine(url, **engine_options)
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", sqlite_pragmas)
        store = cls(engine)
        if migrate:
            await store.migrate()
        return store

    async def close(self) -> None:
        """Close every pooled connection."""
        await self._runner.close()
        await self.engine.dispose()

    async def migrate(self) -> None:
        """Apply the migrations not yet applied (one process at a time on PostgreSQL).

        On SQLite with foreign keys off (see `ThreadRunner.migrate`), checked after.
        """

        def work(conn: Connection) -> None:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            _upgrade(conn)

        if self.engine.dialect.name != "postgresql":
            await self._runner.migrate(work)
            return
        # On a connection of its own with no statement timeout: a migration of a large table
        # (or waiting for another process's migration lock) takes as long as it takes.
        engine = create_async_engine(
            self.engine.url, poolclass=NullPool, connect_args={"timeout": PG_CONNECT_TIMEOUT}
        )
        try:
            await GreenletRunner(engine).migrate(work)
        finally:
            await engine.dispose()

    # -- API keys --------------------------------------------------------------------------------

    async def create_api_key(self, user_id: str, name: str = "") -> tuple[str, ApiKeyRecord]:
        """Make a key for `user_id`: the key (shown once, never stored) and its record."""
        key_id = secrets.token_hex(8)
        key = f"{_KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = utcnow()
        statement = insert(api_keys).values(
            id=key_id, user_id=user_id, name=name, key_hash=hash_key(key), created_at=now
        )
        await self._runner.write(lambda conn: conn.execute(statement))
        return key, ApiKeyRecord(key_id, user_id, name, now, None)

    async def user_for_key(self, key: str) -> str | None:
        """The user a live key belongs to, or None."""
        query = select(api_keys.c.user_id).where(
            api_keys.c.key_hash == hash_key(key), api_keys.c.revoked_at.is_(None)
        )
        user: str | None = await self._runner.read(
            lambda conn: conn.execute(query).scalar_one_or_none()
        )
        return user

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKeyRecord]:
        """Every key's record (of one user when given), oldest first."""
        query = select(api_keys).order_by(api_keys.c.created_at)
        if user_id is not None:
            query = query.where(api_keys.c.user_id == user_id)
        rows = await self._runner.read(lambda conn: conn.execute(query).all())
        return [
            ApiKeyRecord(
                r.id,
                r.user_id,
                r.name,
                _utc(r.created_at),
                _utc(r.revoked_at) if r.revoked_at else None,
            )
            for r in rows
        ]

    async def revoke_api_key(self, key_id: str) -> bool:
        """Revoke a key by id; False when no live key has that id."""
        statement = (
            update(api_keys)
            .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return await self._runner.write(lambda conn: conn.execute(statement).rowcount > 0)

    # -- threads ---------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str, user_id: str) -> ThreadRecord | None:
        """`user_id`'s thread `thread_id`, or None (another user's thread of that id is theirs)."""

        def work(conn: Connection) -> ThreadRecord | None:
            row = conn.execute(
                select(threads).where(threads.c.id == thread_id, threads.c.user_id == user_id)
            ).one_or_none()
            if row is None:
                return None
            statuses = _thread_statuses(conn, user_id, [thread_id])
            return _thread(row, statuses.get(thread_id, "idle"))

        return await self._runner.read(work)

    async def ensure_thread(self, thread_id: str, user_id: str, agent: str) -> ThreadRecord:
        """`user_id`'s thread `thread_id`, made now if they have none of that id."""
        found = await self.get_thread(thread_id, user_id)
        if found is not None:
            return found
        now = utcnow()
        values = {"_thread": thread_id, "_user": user_id, "_agent": agent, "_now": now}

        def make(conn: Connection) -> bool:
            if _exists(conn, thread_id, user_id):
                return False
            conn.execute(_Run.make_thread, {**values, "_title": ""})
            return True

        try:
            if await self._runner.write(make):
                return ThreadRecord(thread_id, user_id, agent, "", now, now)
        except IntegrityError:
            # PostgreSQL: another request of theirs made it after our read (SQLite's writes
            # take turns, so there the read sees it).
            pass
        again = await self.get_thread(thread_id, user_id)
        assert again is not None  # the row exists now
        return again

    async def list_threads(
        self, user_id: str, *, limit: int = 20, before: tuple[datetime, str] | None = None
    ) -> list[ThreadRecord]:
        """`user_id`'s threads, most recently updated first, after the cursor `before`."""
        query = select(threads).where(threads.c.user_id == user_id)
        if before is not None:
            at, thread_id = before
            query = query.where(
                or_(
                    threads.c.updated_at < at,
                    and_(threads.c.updated_at == at, threads.c.id < thread_id),
                )
            )
        query = query.order_by(threads.c.updated_at.desc(), threads.c.id.desc()).limit(limit)

        def work(conn: Connection) -> list[ThreadRecord]:
            rows = conn.execute(query).all()
            statuses = _thread_statuses(conn, user_id, [r.id for r in rows])
            return [_thread(r, statuses.get(r.id, "idle")) for r in rows]

        return await self._runner.read(work)

    async def delete_thread(self, thread_id: str, user_id: str) -> bool:
        """Delete the thread and all it holds; False when the caller has no such thread."""

        def work(conn: Connection) -> bool:
            if not _exists(conn, thread_id, user_id):
                return False
            # Children first: the cascade is the database's, but being explicit keeps an
            # SQLite file opened without foreign keys consistent too.
            run_ids = select(runs.c.id).where(_of_thread(runs, thread_id, user_id))
            conn.execute(delete(feedback).where(feedback.c.run_id.in_(run_ids)))
            for table in (messages, approvals, runs):
                conn.execute(delete(table).where(_of_thread(table, thread_id, user_id)))
            conn.execute(delete(threads).where(_is_thread(thread_id, user_id)))
            return True

        return await self._runner.write(work)

    # -- messages --------------------------------------------------------------------------------

    async def add_messages(
        self, thread_id: str, user_id: str, msgs: Sequence[Msg], run_id: str | None
    ) -> None:
        """Append messages to a thread (one transaction), naming it after its first question."""
        if not msgs:
            return
        now = utcnow()
        thread = (thread_id, user_id)
        await self._runner.write(lambda conn: _append(conn, thread, msgs, run_id, now))

    async def get_messages(self, thread_id: str, user_id: str) -> list[tuple[Msg, str | None]]:
        """A thread's messages, oldest first, each with the run that added it."""
        query = (
            select(messages.c.data, messages.c.run_id)
            .where(_of_thread(messages, thread_id, user_id))
            .order_by(messages.c.seq)
        )
        rows = await self._runner.read(lambda conn: conn.execute(query).all())
        return [(Msg.model_validate_json(r.data), r.run_id) for r in rows]

    async def clear_messages(self, thread_id: str, user_id: str) -> None:
        """Forget a thread's messages (its runs and feedback stay)."""
        statement = delete(messages).where(_of_thread(messages, thread_id, user_id))
        await self._runner.write(lambda conn: conn.execute(statement))

    # -- runs ------------------------------------------------------------------------------------

    async def open_run(
        self,
        run_id: str,
        thread_id: str,
        user_id: str,
        agent: str,
        model: str,
        *,
        expire_approvals: bool,
        seed: Sequence[Msg] = (),
        then: Callable[[list[Msg]], Sequence[Msg]] | None = None,
        job: RunJob | None = None,
        lock: LockCarrier | None = None,
    ) -> OpenedRun:
        """Start a run on the caller's thread, in one transaction; the thread's messages.

        Call it holding the thread's lock. The thread is made when it does not exist (for
        `agent`). Runs still `running` on it belong to a process that died (whoever holds the
        lock is the thread's only runner): they are marked `interrupted`. With
        `expire_approvals` (a new message, not an approval's answer), its pending approvals
        expire: the conversation goes past them. The run is recorded `running`. `seed` is
        stored (as no run's) when the thread holds no messages yet. Then `then(history)`
        names the messages to store with the run now (its question), after the history.

        With `job`, the run is recorded as a job its worker holds (claimed at once: see
        `parley.service.store.queue`), and a thread with runs waiting in its queue is busy
        (`ConflictError`): a run that waits for nothing must not pass them.

        On PostgreSQL a new thread is made, with the run and its messages, in ONE statement
        sent first (no transaction around it: one round trip); only on a thread that exists
        does the transaction below run. `then` may so be called twice (it must be a function
        of the history alone). With `lock` (a lease whose database lock is not taken yet),
        that statement takes it (`LockCarrier.take_with`); the thread's lock is held after.
        """
        now = utcnow()
        values = _run_values(run_id, thread_id, user_id, agent, model, now)
        if job is not None:
            values.update(job.values(now))
        if not self.is_sqlite:
            made = await self._open_new_thread(values, seed, then, lock)
            if made is not None:
                return made

        thread = (thread_id, user_id)

        def work(conn: Connection) -> OpenedRun | None:
            found = execute(conn, _Run.claim, values).fetchone()  # (running, pending, queued)
            if found is not None and found[2] and job is not None:
                return None  # refused by its result (nothing written): see add_feedback
            if found is None:  # a new thread: no run, approval or message to settle or read
                history = list(seed)
                added = list(then(history)) if then is not None else []
                execute(conn, _Run.make_thread, {**values, "_title": _title([*history, *added])})
                execute(conn, _Run.record, values)
                _insert(conn, thread, history, None, now)
                _insert(conn, thread, added, run_id, now)
                return OpenedRun(history, added)
            if found[0]:  # runs still running: their process died
                execute(conn, _Run.interrupt_running, values)
            if expire_approvals and found[1]:  # pending approvals
                execute(conn, _Run.expire_pending, values)
            execute(conn, _Run.record, values)
            history = _history(conn, values)
            if seed and not history:
                _append(conn, thread, seed, None, now)
                history = list(seed)
            added = list(then(history)) if then is not None else []
            _append(conn, thread, added, run_id, now)
            return OpenedRun(history, added)

        opened = await self._runner.write(work, brief=True)
        if opened is None:
            raise ConflictError(
                f"thread {thread_id!r} has runs waiting their turn; send "
                "multitask_strategy 'enqueue' to wait after them",
                status_code=409,
            )
        return opened

    async def _open_new_thread(
        self,
        values: dict[str, Any],
        seed: Sequence[Msg],
        then: Callable[[list[Msg]], Sequence[Msg]] | None,
        lock: LockCarrier | None,
    ) -> OpenedRun | None:
        """PostgreSQL: the thread `values` names, made with its run and first messages.

        In ONE statement, if it does not exist; what was stored, or None (it exists: nothing
        was done). With `lock`, the statement takes the thread's lock too, if it can.
        """
        history = list(seed)
        added = list(then(history)) if then is not None else []
        msgs = [*history, *added]
        made_values = {
            **values,
            "_title": _title(msgs),
            "_ids": [m.id for m in msgs],
            "_roles": [m.role for m in msgs],
            "_datas": [m.model_dump_json() for m in msgs],
            "_runs": [None] * len(history) + [values["_run"]] * len(added),
        }
        made = None if lock is None else await lock.take_with(_PG_OPEN_NEW, made_values)
        if made is None:  # not sent with the lock (taken since): sent on its own
            made = await self._runner.write(Counted(_PG_OPEN_NEW, made_values), single=True)
        return OpenedRun(history, added) if made else None

    async def start_run(
        self, run_id: str, thread_id: str, user_id: str, agent: str, model: str
    ) -> None:
        """Record a run as `running`."""
        values = _run_values(run_id, thread_id, user_id, agent, model, utcnow())
        await self._runner.write(lambda conn: execute(conn, _Run.record, values), brief=True)

    async def end_run(
        self,
        run_id: str,
        status: str,
        usage: dict[str, Any] | None,
        error: str | None,
        *,
        last: tuple[str, str, Sequence[Msg]] | None = None,
        fence: tuple[str, int] | None = None,
        rollback: bool = False,
        events: EventRows | None = None,
        lock: LockCarrier | None = None,
    ) -> bool:
        """Record how a run ended; with `last`, (its thread, its user, messages), those too.

        One transaction: a run's last message (its answer), its last `events` (its log's
        `RunEnded` among them) and its end are stored together. With `fence` (a worker's id
        and its attempt), only if that worker still holds the run (it is `running`, that
        worker's, that attempt): False, and nothing written, if not. With `rollback`, the run
        and the messages it added are deleted instead (`events` must then be None).
        """
        now = utcnow()
        values: dict[str, Any] = {
            "_run": run_id,
            "_status": status,
            "_usage": usage,
            "_error": error,
            "_now": now,
        }
        if fence is not None:
            values.update(_worker=fence[0], _attempt=fence[1])
        if rollback:
            if events is not None:
                raise ValueError("a rolled-back run's end stores no events")
            return await self._runner.write(
                partial(_roll_back, values=values, fenced=fence is not None)
            )
        msgs = list(last[2]) if last is not None else []
        if msgs and not self.is_sqlite:  # one statement: the end, its answer, events, touch
            assert last is not None
            values.update(_end_values(last[0], last[1], msgs))
            statement = _PG_END[fence is not None, _pg_events(values, events)]
            ended = None if lock is None else await lock.give_back_with(statement, values)
            if ended is None:  # not sent with the lock's release: on its own
                ended = await self._runner.write(Counted(statement, values), single=True)
            return bool(ended) or fence is None
        end = _Run.end_fenced if fence is not None else _Run.end

        def end_work(conn: Connection) -> bool:
            # Fenced: the run's row is updated only if that worker still holds it, and its
            # answer stored only then (the update's row lock holds it until the commit).
            if execute(conn, end, values).rowcount == 0 and fence is not None:
                return False
            if last is not None:
                _append(conn, (last[0], last[1]), msgs, run_id, now)
            if events is not None:
                store_events(conn, events)
            return True

        return await self._runner.write(end_work, single=not msgs and events is None, brief=True)

    async def get_run(self, run_id: str, user_id: str) -> RunRecord | None:
        """The run if `user_id` started it."""
        query = select(runs).where(runs.c.id == run_id, runs.c.user_id == user_id)
        row = await self._runner.read(lambda conn: conn.execute(query).one_or_none())
        return None if row is None else _run(row)

    async def request_cancel(self, run_id: str, action: str = "interrupt") -> None:
        """Flag a running run to stop (the process running it polls for the flag).

        `action`: how it ends, `interrupt` (kept, partial answer and all) or `rollback`
        (deleted with its messages).
        """
        statement = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == "running")
            .values(cancel_requested=True, cancel_action=action)
        )
        await self._runner.write(lambda conn: conn.execute(statement))

    async def cancel_actions(self, run_ids: Iterable[str]) -> dict[str, str]:
        """Which of these runs were asked to stop, each with how (`interrupt`, `rollback`)."""
        ids = list(run_ids)
        if not ids:
            return {}
        query = _Run.cancel_asked[self.is_sqlite]
        rows = await self._runner.read(lambda conn: conn.execute(query, {"_ids": ids}).all())
        return {r.id: r.cancel_action or "interrupt" for r in rows}

    async def list_runs(
        self, user_id: str, thread_id: str, *, limit: int = 20, offset: int = 0
    ) -> list[RunRecord]:
        """`user_id`'s runs on a thread, most recently queued first."""
        query = (
            select(runs)
            .where(_of_thread(runs, thread_id, user_id))
            .order_by(runs.c.queued_at.desc(), runs.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        rows = await self._runner.read(lambda conn: conn.execute(query).all())
        return [_run(r) for r in rows]

    async def active_runs(self, thread_id: str, user_id: str) -> list[RunRecord]:
        """A thread's runs that are running or waiting their turn, in queue order."""
        query = (
            select(runs)
            .where(_of_thread(runs, thread_id, user_id), runs.c.status.in_(("running", "pending")))
            .order_by(runs.c.queued_at, runs.c.id)
        )
        rows = await self._runner.read(lambda conn: conn.execute(query).all())
        return [_run(r) for r in rows]

    async def end_pending(
        self, run_ids: Sequence[str], status: str = "interrupted", error: str | None = None
    ) -> list[str]:
        """End runs still waiting their turn (never started); the ids it ended."""
        if not run_ids:
            return []

        def work(conn: Connection) -> list[str]:
            ended = []
            for run_id in run_ids:
                done = conn.execute(
                    update(runs)
                    .where(runs.c.id == run_id, runs.c.status == "pending")
                    .values(status=status, error=error, ended_at=utcnow(), lease_until=None)
                ).rowcount
                if done:
                    ended.append(run_id)
            return ended

        return await self._runner.write(work)

    async def delete_run(self, run_id: str, user_id: str, *, with_messages: bool = False) -> bool:
        """Delete one of `user_id`'s runs; False when they have no such run.

        Its feedback and events go with it, and its messages when asked.
        """

        def work(conn: Connection) -> bool:
            owned = select(runs.c.id).where(runs.c.id == run_id, runs.c.user_id == user_id)
            if conn.execute(owned).first() is None:
                return False
            if with_messages:
                conn.execute(delete(messages).where(messages.c.run_id == run_id))
            conn.execute(delete(feedback).where(feedback.c.run_id == run_id))
            conn.execute(delete(runs).where(runs.c.id == run_id))
            return True

        return await self._runner.write(work)

    async def cancel_requested(self, run_ids: Iterable[str]) -> set[str]:
        """Which of these runs were asked to stop."""
        ids = list(run_ids)
        if not ids:
            return set()
        query = _Run.cancel_asked[self.is_sqlite]
        return await self._runner.read(
            lambda conn: set(conn.execute(query, {"_ids": ids}).scalars())
        )

    async def interrupt_stale_runs(self, thread_id: str, user_id: str) -> int:
        """Mark runs still `running` on a thread as `interrupted`; call holding its lock.

        Whoever holds a thread's lock is its only runner, so such runs belong to a process
        that died mid-run.
        """
        values = {"_thread": thread_id, "_user": user_id, "_now": utcnow()}
        count: int = await self._runner.write(
            lambda conn: conn.execute(_Run.interrupt_running, values).rowcount
        )
        return count

    # -- approvals -------------------------------------------------------------------------------

    async def add_approval(
        self, pending: PendingApproval, thread_id: str, user_id: str, run_id: str
    ) -> None:
        """Keep a parked run's state until someone answers it.

        A run taken over after it parked parks again under the same interrupt: kept once.
        """
        statement = insert(approvals).values(
            id=pending.interrupt_id,
            user_id=user_id,
            thread_id=thread_id,
            run_id=run_id,
            data=pending.model_dump_json(),
            status="pending",
            created_at=utcnow(),
        )
        kept = select(approvals.c.id).where(approvals.c.id == pending.interrupt_id)

        def work(conn: Connection) -> None:
            if conn.execute(kept).first() is None:
                conn.execute(statement)

        await self._runner.write(work)

    async def get_approval(
        self, interrupt_id: str, user_id: str
    ) -> tuple[PendingApproval, str, str] | None:
        """A pending approval of `user_id`'s: the state, its thread id and its status."""
        query = select(approvals.c.data, approvals.c.thread_id, approvals.c.status).where(
            approvals.c.id == interrupt_id, approvals.c.user_id == user_id
        )
        row = await self._runner.read(lambda conn: conn.execute(query).one_or_none())
        if row is None:
            return None
        return PendingApproval.model_validate_json(row.data), row.thread_id, row.status

    async def answer_approval(self, interrupt_id: str) -> None:
        """Mark an approval answered, once.

        Raises:
            ConflictError: It was answered already (or expired).
        """
        statement = (
            update(approvals)
            .where(approvals.c.id == interrupt_id, approvals.c.status == "pending")
            .values(status="answered", answered_at=utcnow())
        )
        answered = await self._runner.write(lambda conn: conn.execute(statement).rowcount)
        if answered == 0:
            raise ConflictError(
                f"interrupt {interrupt_id!r} was answered already, or the conversation went on",
                status_code=409,
            )

    async def expire_approvals(self, thread_id: str, user_id: str) -> None:
        """Drop a thread's pending approvals: a new message goes past them."""
        values = {"_thread": thread_id, "_user": user_id, "_now": utcnow()}
        await self._runner.write(lambda conn: conn.execute(_Run.expire_pending, values))

    async def pending_approvals(self, thread_id: str, user_id: str) -> list[PendingApproval]:
        """A thread's unanswered approvals, oldest first."""
        query = (
            select(approvals.c.data)
            .where(_of_thread(approvals, thread_id, user_id), approvals.c.status == "pending")
            .order_by(approvals.c.created_at)
        )
        rows = await self._runner.read(lambda conn: conn.execute(query).scalars().all())
        return [PendingApproval.model_validate_json(data) for data in rows]

    # -- feedback --------------------------------------------------------------------------------

    async def add_feedback(
        self, run_id: str, user_id: str, key: str, score: float, kwargs: dict[str, Any]
    ) -> None:
        """Record feedback on one of `user_id`'s runs.

        Raises:
            NotFoundError: No such run of theirs.
        """
        owned = select(runs.c.id).where(runs.c.id == run_id, runs.c.user_id == user_id)
        statement = insert(feedback).values(
            run_id=run_id, user_id=user_id, key=key, score=score, kwargs=kwargs, created_at=utcnow()
        )

        def work(conn: Connection) -> bool:
            # Refused by its result, not by raising: a raise would fail the batch it shares.
            if conn.execute(owned).scalar_one_or_none() is None:
                return False
            conn.execute(statement)
            return True

        if not await self._runner.write(work):
            raise NotFoundError(f"run {run_id!r} not found", status_code=404)

    async def get_feedback(self, run_id: str) -> list[dict[str, Any]]:
        """The feedback recorded on a run, oldest first."""
        query = (
            select(feedback.c.key, feedback.c.score, feedback.c.kwargs, feedback.c.user_id)
            .where(feedback.c.run_id == run_id)
            .order_by(feedback.c.id)
        )
        rows = await self._runner.read(lambda conn: conn.execute(query).all())
        return [dict(r._mapping) for r in rows]

    async def ping(self) -> None:
        """Check the database answers."""
        await self._runner.read(lambda conn: conn.execute(text("SELECT 1")))


def _upgrade(connection: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", _MIGRATIONS)
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


# A thread's id and user: values, or the bound parameters of statements built once.
_Name = str | ColumnElement[str]


def _is_thread(thread_id: _Name, user_id: _Name) -> ColumnElement[bool]:
    """The condition naming the thread in `threads`."""
    return and_(threads.c.id == thread_id, threads.c.user_id == user_id)


def _of_thread(table: Table, thread_id: _Name, user_id: _Name) -> ColumnElement[bool]:
    """The condition naming the rows of a child table (messages, runs...) of one thread."""
    return and_(table.c.thread_id == thread_id, table.c.user_id == user_id)


def _exists(conn: Connection, thread_id: str, user_id: str) -> bool:
    found = conn.execute(select(threads.c.id).where(_is_thread(thread_id, user_id)))
    return found.first() is not None


# The statements below name their thread by these two parameters.
_THREAD: ColumnElement[str] = bindparam("_thread")
_USER: ColumnElement[str] = bindparam("_user")


class _Run:
    """The statements of a run's path, built once: parameters by name (`_thread`, ...)."""

    # Whether the thread exists (a row), and whether a run opening on it has anything to
    # settle: one query.
    claim = select(
        exists()
        .where(_of_thread(runs, _THREAD, _USER), runs.c.status == "running")
        .label("running"),
        exists()
        .where(_of_thread(approvals, _THREAD, _USER), approvals.c.status == "pending")
        .label("pending"),
        exists()
        .where(_of_thread(runs, _THREAD, _USER), runs.c.status == "pending")
        .label("queued"),
    ).where(_is_thread(_THREAD, _USER))
    add_messages = insert(messages)
    history = (
        select(messages.c.data).where(_of_thread(messages, _THREAD, _USER)).order_by(messages.c.seq)
    )
    make_thread = insert(threads).values(
        id=_THREAD,
        user_id=_USER,
        agent=bindparam("_agent"),
        title=bindparam("_title"),
        created_at=bindparam("_now", type_=threads.c.created_at.type),
        updated_at=bindparam("_now", type_=threads.c.updated_at.type),
    )
    touch = (
        update(threads)
        .where(_is_thread(_THREAD, _USER))
        .values(updated_at=bindparam("_now", type_=threads.c.updated_at.type))
    )
    # The first question names the thread; later ones leave the name alone.
    touch_titled = touch.values(
        title=case((threads.c.title == "", bindparam("_title")), else_=threads.c.title)
    )
    interrupt_running = (
        update(runs)
        .where(_of_thread(runs, _THREAD, _USER), runs.c.status == "running")
        .values(
            status="interrupted",
            error=STALE_RUN_ERROR,
            ended_at=bindparam("_now", type_=runs.c.ended_at.type),
        )
    )
    expire_pending = (
        update(approvals)
        .where(_of_thread(approvals, _THREAD, _USER), approvals.c.status == "pending")
        .values(status="expired", answered_at=bindparam("_now", type_=approvals.c.answered_at.type))
    )
    record = insert(runs).values(
        id=bindparam("_run"),
        thread_id=_THREAD,
        user_id=_USER,
        agent=bindparam("_agent"),
        model=bindparam("_model"),
        status="running",
        cancel_requested=False,
        started_at=bindparam("_now", type_=runs.c.started_at.type),
        queued_at=bindparam("_now", type_=runs.c.queued_at.type),
        input=bindparam("_input", type_=runs.c.input.type),
        kwargs=bindparam("_kwargs", type_=runs.c.kwargs.type),
        multitask_strategy=bindparam("_strategy"),
        worker_id=bindparam("_worker"),
        lease_until=bindparam("_lease", type_=runs.c.lease_until.type),
        attempt=bindparam("_attempt"),
    )
    # Whether a worker still holds the run (`end_run`'s fence).
    holds = and_(
        runs.c.id == bindparam("_run"),
        runs.c.status == "running",
        runs.c.worker_id == bindparam("_worker"),
        runs.c.attempt == bindparam("_attempt"),
    )
    # The same, the row locked until commit.
    held = select(runs.c.id).where(holds).with_for_update()
    end = (
        update(runs)
        .where(runs.c.id == bindparam("_run"))
        .values(
            status=bindparam("_status"),
            usage=bindparam("_usage", type_=runs.c.usage.type),
            error=bindparam("_error"),
            ended_at=bindparam("_now", type_=runs.c.ended_at.type),
            lease_until=None,
        )
    )
    # The end, only if that worker still holds the run (no row updated: it does not).
    end_fenced = end.where(holds)
    # Which of the runs `_ids` were asked to stop (the cancel poll, every half second), by
    # `is_sqlite` (PostgreSQL's, SQLite's). On PostgreSQL `= ANY(array)`: ONE statement
    # whatever the number of runs (an IN list is new SQL at each length: a PREPARE each
    # time, and hot statements pushed out of asyncpg's statement cache).
    cancel_asked = (
        select(runs.c.id, runs.c.cancel_action).where(
            runs.c.id == any_(bindparam("_ids", type_=ARRAY(String))),
            runs.c.cancel_requested.is_(True),
        ),
        select(runs.c.id, runs.c.cancel_action).where(
            runs.c.id.in_(bindparam("_ids", expanding=True)), runs.c.cancel_requested.is_(True)
        ),
    )


def _roll_back(conn: Connection, *, values: dict[str, Any], fenced: bool) -> bool:
    """`end_run` with `rollback`: the run and what it added deleted (if still held, fenced)."""
    run_id = values["_run"]
    if fenced and conn.execute(_Run.held, values).first() is None:
        return False
    conn.execute(delete(messages).where(messages.c.run_id == run_id))
    conn.execute(delete(feedback).where(feedback.c.run_id == run_id))
    conn.execute(delete(runs).where(runs.c.id == run_id))
    return True


def _end_values(thread_id: str, user_id: str, msgs: Sequence[Msg]) -> dict[str, Any]:
    """The parameters `_pg_end_with_messages` binds beside the end's own."""
    return {
        "_thread": thread_id,
        "_user": user_id,
        "_title": _title(msgs),
        "_ids": [m.id for m in msgs],
        "_roles": [m.role for m in msgs],
        "_datas": [m.model_dump_json() for m in msgs],
    }


def _pg_end_with_messages(end: Any, *, events: str = "none") -> Executable:
    """`end` (an UPDATE of the run) with the run's last messages and its thread's touch.

    Data-modifying WITHs: PostgreSQL runs each once, whether the query reads it or not. The
    messages and the touch happen only if the run was updated (its fence held); the rows
    keep their order (`WITH ORDINALITY`), so their `seq` follows it. `events`: "rows" adds
    the run's last events (`_ev_seqs`, `_ev_datas`), "notify" those and their doorbell
    (`_channel`, `_payload`), sent only if the run was updated.
    """
    ended = end.returning(runs.c.id).cte("ended")
    did_end = select(ended.c.id).exists()
    rows = (
        func.unnest(
            bindparam("_ids", type_=ARRAY(String)),
            bindparam("_roles", type_=ARRAY(String)),
            bindparam("_datas", type_=ARRAY(Text)),
        )
        .table_valued("id", "role", "data", with_ordinality="n")
        .render_derived(name="last_rows")
    )
    now = bindparam("_now", type_=messages.c.created_at.type)
    added = insert(messages).from_select(
        ["user_id", "thread_id", "id", "run_id", "role", "data", "created_at"],
        select(_USER, _THREAD, rows.c.id, bindparam("_run"), rows.c.role, rows.c.data, now)
        .select_from(rows)
        .where(did_end)
        .order_by(rows.c.n),
    )
    touched = (
        update(threads)
        .where(_is_thread(_THREAD, _USER), did_end)
        .values(
            updated_at=bindparam("_now", type_=threads.c.updated_at.type),
            title=case((threads.c.title == "", bindparam("_title")), else_=threads.c.title),
        )
    )
    counted = select(func.count()).select_from(ended)
    ctes = [added.cte("added"), touched.cte("touched")]
    if events != "none":
        ctes.append(_pg_end_events(bindparam("_run"), now, did_end).cte("events_added"))
    if events == "notify":
        # Evaluated once, on the count's row: a CASE runs its THEN only when it holds.
        bell = func.pg_notify(bindparam("_channel", type_=Text), bindparam("_payload", type_=Text))
        counted = counted.add_columns(case((func.count() > 0, bell)))
    return counted.add_columns(_pg_unlock_at_commit().label("lock")).add_cte(*ctes)


def _pg_unlock_at_commit() -> Any:
    """The thread's lock given back at the statement's commit, when `_unlock` is given.

    A session-level advisory lock given back mid-statement is free at once, before the
    statement's writes can be seen: another replica could take the thread and read it
    without them. So the statement first holds the same key for its own transaction (a
    session holding a lock is granted it again at once), then gives the session's lock back:
    the key stays held until the commit. `pg_try_advisory_xact_lock`, not the waiting kind:
    if this session lost the lock (its connection was made again) the statement never waits
    for whoever holds it now. NULL (nothing done) without `_unlock`; else whether the session
    held the lock.
    """
    key = bindparam("_unlock", None, type_=BigInteger)
    held = select(func.pg_try_advisory_xact_lock(key).label("held")).cte("held")
    given = select(func.pg_advisory_unlock(key)).select_from(held)  # after `held`: reads it
    return given.scalar_subquery()


def _pg_end_events(run_id: Any, now: Any, did_end: Any) -> Insert:
    """The run's last events (`_ev_seqs`, `_ev_datas` arrays), inserted if it ended.

    An id already in the log is skipped (see `store_events`): the end is stored whatever.
    """
    rows = (
        func.unnest(
            bindparam("_ev_seqs", type_=ARRAY(Integer)),
            bindparam("_ev_datas", type_=ARRAY(Text)),
        )
        .table_valued("seq", "data")
        .render_derived(name="event_rows")
    )
    return (
        pg_insert(run_events)
        .from_select(
            ["run_id", "seq", "data", "created_at"],
            select(run_id, rows.c.seq, rows.c.data, now).select_from(rows).where(did_end),
        )
        .on_conflict_do_nothing()
    )


def _pg_open_new_thread() -> Executable:
    """A new thread, its run recorded (as `_Run.record`) and its first messages: ONE statement.

    Nothing is written when the thread exists (its INSERT does nothing, and the others run
    only after it made the thread); its one row counts the threads made (0 or 1), then says
    whether the thread's lock was taken (`_lock`, see `LockCarrier`; true without one). The
    run's and messages' foreign keys are checked at the statement's end, the thread in place.
    """
    # The thread's lock, taken here when `_lock` is given (`LockCarrier`): nothing is made
    # unless it was. A volatile function's WITH is run once.
    lock_key = bindparam("_lock", None, type_=BigInteger)
    taken = case((lock_key.is_(None), true()), else_=func.pg_try_advisory_lock(lock_key))
    locked = select(taken.label("ok")).cte("locked")
    thread_row = {
        "id": _THREAD,
        "user_id": _USER,
        "agent": bindparam("_agent", type_=String),
        "title": bindparam("_title", type_=String),
        "created_at": bindparam("_now", type_=threads.c.created_at.type),
        "updated_at": bindparam("_now", type_=threads.c.updated_at.type),
    }
    made = (
        pg_insert(threads)
        .from_select(
            list(thread_row), select(*thread_row.values()).where(locked.select().scalar_subquery())
        )
        .on_conflict_do_nothing()
        .returning(threads.c.id)
        .cte("made")
    )
    did_make = select(made.c.id).exists()
    record: dict[str, ColumnElement[Any]] = {
        "id": bindparam("_run", type_=String),
        "thread_id": _THREAD,
        "user_id": _USER,
        "agent": bindparam("_agent", type_=String),
        "model": bindparam("_model", type_=String),
        "status": literal("running", String),
        "cancel_requested": literal(False),
        "started_at": bindparam("_now", type_=runs.c.started_at.type),
        "queued_at": bindparam("_now", type_=runs.c.queued_at.type),
        "input": bindparam("_input", type_=runs.c.input.type),
        "kwargs": bindparam("_kwargs", type_=runs.c.kwargs.type),
        "multitask_strategy": bindparam("_strategy", type_=String),
        "worker_id": bindparam("_worker", type_=String),
        "lease_until": bindparam("_lease", type_=runs.c.lease_until.type),
        "attempt": bindparam("_attempt", type_=Integer),
        # Defaults are the statement's own to give: a WITH's INSERT gets none of the table's.
        "events_expired": literal(False),
    }
    recorded = insert(runs).from_select(list(record), select(*record.values()).where(did_make))
    rows = (
        func.unnest(
            bindparam("_ids", type_=ARRAY(String)),
            bindparam("_roles", type_=ARRAY(String)),
            bindparam("_datas", type_=ARRAY(Text)),
            bindparam("_runs", type_=ARRAY(String)),
        )
        .table_valued("id", "role", "data", "run_id", with_ordinality="n")
        .render_derived(name="first_rows")
    )
    now = bindparam("_now", type_=messages.c.created_at.type)
    added = insert(messages).from_select(
        ["user_id", "thread_id", "id", "run_id", "role", "data", "created_at"],
        select(_USER, _THREAD, rows.c.id, rows.c.run_id, rows.c.role, rows.c.data, now)
        .select_from(rows)
        .where(did_make)
        .order_by(rows.c.n),
    )
    counted = select(func.count(), locked.select().scalar_subquery().label("lock"))
    return counted.select_from(made).add_cte(recorded.cte("recorded"), added.cte("added"))


_PG_OPEN_NEW = _pg_open_new_thread()
"""PostgreSQL: a new thread with its run and first messages (`Store.open_run`)."""

_PG_END = {
    (fenced, events): _pg_end_with_messages(_Run.end_fenced if fenced else _Run.end, events=events)
    for fenced in (False, True)
    for events in ("none", "rows", "notify")
}
"""PostgreSQL: a run's end with its last messages (and its thread touched), ONE statement,
unfenced and fenced, with no events, events, or events and their doorbell (by `(fenced,
events)`); its one row's first column counts the runs ended (0: fenced out)."""

insert_events = insert(run_events)
"""A batch of `run_events` rows (`run_id`, `seq`, `data`, `created_at`)."""

RUN_HELD = select(runs.c.id).where(_Run.holds)
"""The run `_run` (a row) if worker `_worker` holds it, at attempt `_attempt` (the fence of
its event batches: a worker that lost the run stores none)."""


_INSERT_NEW_EVENTS = {
    "sqlite": sqlite_insert(run_events).on_conflict_do_nothing(),
    "postgresql": pg_insert(run_events).on_conflict_do_nothing(),
}
"""`insert_events` that skips a row whose id the log holds already, by dialect."""


def store_events(conn: Connection, events: EventRows) -> None:
    """Store a run's last events with its end (in its transaction), their doorbell if any.

    An id the log holds already is skipped: a worker that lost the run may have stored a
    late batch under ids its new worker numbered on from, and the run's end must not fail
    for a line of its log (before this, its end went alone and such a batch failed apart).
    """
    if events.rows:
        executemany(conn, _INSERT_NEW_EVENTS[conn.dialect.name], events.rows)
    if events.notify is not None:
        conn.execute(select(func.pg_notify(*events.notify)))


def _pg_events(values: dict[str, Any], events: EventRows | None) -> str:
    """Bind `events` for `_PG_END`'s statement; which of its kinds that is."""
    if events is None:
        return "none"
    values["_ev_seqs"] = [row["seq"] for row in events.rows]
    values["_ev_datas"] = [row["data"] for row in events.rows]
    if events.notify is None:
        return "rows"
    values["_channel"], values["_payload"] = events.notify
    return "notify"


def _history(conn: Connection, values: dict[str, Any]) -> list[Msg]:
    """The messages of the thread `values` names (`_thread`, `_user`), oldest first."""
    rows = execute(conn, _Run.history, values).fetchall()
    return [Msg.model_validate_json(data) for (data,) in rows]


def _run_values(
    run_id: str, thread_id: str, user_id: str, agent: str, model: str, now: datetime
) -> dict[str, Any]:
    """A new run's parameters, by the names `_Run`'s statements bind."""
    return {
        "_run": run_id,
        "_thread": thread_id,
        "_user": user_id,
        "_agent": agent,
        "_model": model,
        "_now": now,
        "_input": None,
        "_kwargs": None,
        "_strategy": "reject",
        "_worker": None,
        "_lease": None,
        "_attempt": 0,
    }


def _insert(
    conn: Connection,
    thread: tuple[str, str],
    msgs: Sequence[Msg],
    run_id: str | None,
    now: datetime,
) -> None:
    """Store messages at the end of a thread, named (thread id, user id)."""
    thread_id, user_id = thread
    rows = [
        {
            "user_id": user_id,
            "thread_id": thread_id,
            "id": m.id,
            "run_id": run_id,
            "role": m.role,
            "data": m.model_dump_json(),
            "created_at": now,
        }
        for m in msgs
    ]
    if len(rows) > 1:
        executemany(conn, _Run.add_messages, rows)
    elif rows:  # one row: a plain execute, not the executemany machinery
        execute(conn, _Run.add_messages, rows[0])


def _append(
    conn: Connection,
    thread: tuple[str, str],
    msgs: Sequence[Msg],
    run_id: str | None,
    now: datetime,
) -> None:
    """Store messages at the end of a thread and touch it (named after its first question)."""
    if not msgs:
        return
    _insert(conn, thread, msgs, run_id, now)
    title = _title(msgs)
    touch = {"_thread": thread[0], "_user": thread[1], "_now": now}
    if title:
        execute(conn, _Run.touch_titled, {**touch, "_title": title})
    else:
        execute(conn, _Run.touch, touch)


def _thread_statuses(conn: Connection, user_id: str, ids: list[str]) -> dict[str, str]:
    """The status of each of `user_id`'s threads `ids` that is not idle."""
    if not ids:
        return {}
    statuses: dict[str, str] = {}
    waiting = conn.execute(
        select(approvals.c.thread_id).where(
            approvals.c.user_id == user_id,
            approvals.c.thread_id.in_(ids),
            approvals.c.status == "pending",
        )
    )
    statuses.update(dict.fromkeys(waiting.scalars(), "awaiting_approval"))
    running = conn.execute(
        select(runs.c.thread_id).where(
            runs.c.user_id == user_id, runs.c.thread_id.in_(ids), runs.c.status == "running"
        )
    )
    statuses.update(dict.fromkeys(running.scalars(), "running"))
    return statuses


def _thread(row: Row[Any], status: str) -> ThreadRecord:
    return ThreadRecord(
        row.id,
        row.user_id,
        row.agent,
        row.title,
        _utc(row.created_at),
        _utc(row.updated_at),
        status,
    )


def _run(row: Row[Any]) -> RunRecord:
    return RunRecord(
        row.id,
        row.thread_id,
        row.user_id,
        row.agent,
        row.model,
        row.status,
        row.error,
        row.usage,
        bool(row.cancel_requested),
        _utc(row.started_at),
        _utc(row.ended_at) if row.ended_at else None,
        _utc(row.queued_at) if row.queued_at else None,
        row.input,
        row.kwargs,
        row.multitask_strategy,
        row.cancel_action,
        row.worker_id,
        _utc(row.lease_until) if row.lease_until else None,
        int(row.attempt or 0),
    )
