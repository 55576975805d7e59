"""One run per thread at a time: in this process, and on PostgreSQL across processes.

A thread is named by its id and its user together (each user has thread ids of their own),
so one user's runs never wait for, nor tell anything about, another's. A run holds its
thread's lock from before its first message is stored until its last one is. A second
request on a busy thread waits up to a timeout, then gets `ConflictError` (409).

In one process an `asyncio.Lock` per thread does it. On PostgreSQL the holder also takes a
session-level advisory lock, keyed by a hash of the thread's user and id, on the one
connection the process keeps for its locks: the server releases them when that connection
ends, so a process killed mid-run frees its threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, Boolean, Executable, NullPool, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import PendingRollbackError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from parley.errors import ConflictError
from parley.service.store.prepared import fetch, is_closed
from parley.service.store.runners import is_database_down
from parley.service.store.store import PG_TIMEOUTS, LockCarrier

__all__ = ["Lease", "LocalThreadLocks", "PostgresThreadLocks", "ThreadLocks", "thread_locks"]

log = logging.getLogger("parley.service")

_POLL_START = 0.01
_POLL_MAX = 0.2


class Lease(ABC):
    """A held thread lock; `release()` it exactly once."""

    @abstractmethod
    async def release(self) -> None:
        """Let the next run on the thread go."""

    @property
    def carrier(self) -> LockCarrier | None:
        """The lock's connection for the run's opening and end, if it has one (PostgreSQL)."""
        return None


class ThreadLocks(ABC):
    """Hands out per-thread leases."""

    @abstractmethod
    async def acquire(
        self, thread_id: str, user_id: str, timeout: float, *, deferred: bool = False
    ) -> Lease:
        """Wait up to `timeout` seconds for the lock of `user_id`'s thread `thread_id`.

        `deferred`: the lease's `carrier` takes the database's lock (PostgreSQL) with the
        run's opening statement (`Store.open_run`), and nothing may read or write the
        thread before that; this process's own runs on the thread wait here as ever.

        Raises:
            ConflictError: Another run held it all that time.
        """

    async def close(self) -> None:  # noqa: B027 - most lock kinds hold nothing to close
        """Release what the locks hold (connections)."""


def _busy(thread_id: str, timeout: float) -> ConflictError:
    return ConflictError(
        f"thread {thread_id!r} is busy with another run (waited {timeout:g}s); try again when "
        "it ends, or cancel it with POST /runs/{run_id}/cancel",
        status_code=409,
    )


_Key = tuple[str, str]
"""A thread's lock key: (user id, thread id)."""


class _LocalLease(Lease):
    def __init__(self, locks: LocalThreadLocks, key: _Key, lock: asyncio.Lock) -> None:
        self._locks = locks
        self._key = key
        self._lock = lock

    async def release(self) -> None:
        self._lock.release()
        self._locks.forget(self._key, self._lock)


class LocalThreadLocks(ThreadLocks):
    """Per-thread `asyncio.Lock`s, dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[_Key, asyncio.Lock] = {}
        self._users: dict[_Key, int] = {}

    async def acquire(
        self, thread_id: str, user_id: str, timeout: float, *, deferred: bool = False
    ) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock (see `ThreadLocks`)."""
        key = (user_id, thread_id)
        lock = self._locks.get(key)
        if lock is None:  # nobody holds or waits for it: take it, no timeout to arm
            lock = self._locks[key] = asyncio.Lock()
            self._users[key] = 1
            await lock.acquire()
            return _LocalLease(self, key, lock)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with asyncio.timeout(timeout):
                await lock.acquire()
        except TimeoutError:
            self.forget(key, lock)
            raise _busy(thread_id, timeout) from None
        except BaseException:
            self.forget(key, lock)
            raise
        return _LocalLease(self, key, lock)

    def forget(self, key: _Key, lock: asyncio.Lock) -> None:
        """One user of the lock is done; drop it when it was the last."""
        left = self._users.get(key, 1) - 1
        if left > 0:
            self._users[key] = left
        elif self._locks.get(key) is lock:
            del self._locks[key]
            del self._users[key]

    def __len__(self) -> int:
        return len(self._locks)


def advisory_key(thread_id: str, user_id: str) -> int:
    """The thread's advisory lock key: a signed 64-bit hash of its user and id."""
    # The user's length first: ("ab", "c") and ("a", "bc") are different threads.
    named = f"{len(user_id)}:{user_id}:{thread_id}".encode()
    digest = hashlib.blake2b(named, digest_size=8, person=b"parley-thread").digest()
    return int.from_bytes(digest, "big", signed=True)


class _Answer(NamedTuple):
    """The lock session's answer to one ask."""

    ok: bool
    """The lock was taken (or given back: the session held it)."""
    counted: int | None = None
    """The count of the statement sent with it (`LockCarrier`); None when not sent so."""


@dataclass(slots=True)
class _Ask:
    take: bool
    key: int
    future: asyncio.Future[_Answer]
    statement: Executable | None = None  # to send with it, when the session is free
    values: Mapping[str, Any] | None = None


class _LockSession:
    """The one connection that holds every advisory lock this process takes.

    Session-level advisory locks belong to a connection, and a connection holds any number
    of them, so one connection serves all of a process's runs: the database's connection
    limit is not spent on open streams, and no run waits for a connection to open. Its
    queries take turns, so the locks and unlocks asked for meanwhile go together, as ONE
    query, on the next turn (under many clients a round trip each, one after another, was
    what every run waited for). If the connection dies, the server frees its locks, as when
    the process dies; the next query opens a new one.

    A lock or an unlock may come with a statement (a run's opening or end, `LockCarrier`)
    that takes or gives back the lock itself. When it is the only thing asked at its turn,
    it is sent, a round trip for both; else a lock goes in the batch as any other, and an
    unlock is not done (its caller sends the statement its own way, then unlocks).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._turn = asyncio.Lock()
        self._asked: list[_Ask] = []
        self._drainer: asyncio.Task[None] | None = None

    async def lock(self, key: int) -> bool:
        """Try to take the advisory lock `key` (`pg_try_advisory_lock`); whether it was."""
        return (await self.ask(True, key)).ok

    async def unlock(self, key: int) -> bool:
        """Give back the advisory lock `key` (`pg_advisory_unlock`); whether it was held."""
        return (await self.ask(False, key)).ok

    def unlock_soon(self, key: int) -> asyncio.Future[_Answer]:
        """Queue the unlock of `key` now, in order with what this session was asked before."""
        return self.ask(False, key)

    def ask(
        self,
        take: bool,
        key: int,
        statement: Executable | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> asyncio.Future[_Answer]:
        """Queue a lock (`take`) or an unlock of `key`, with `statement` to send with it."""
        future: asyncio.Future[_Answer] = asyncio.get_running_loop().create_future()
        self._asked.append(_Ask(take, key, future, statement, values))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="parley-thread-locks")
        return future

    async def _drain(self) -> None:
        async with self._turn:
            while self._asked:
                batch, self._asked = self._asked, []
                if len(batch) > 1:  # an unlock's statement is its caller's to send, then
                    batch = _without_unsent_unlocks(batch)
                if not batch:
                    continue
                try:
                    statement = batch[0].statement if len(batch) == 1 else None
                    if statement is not None:
                        answers = [await self._send_with(batch[0], statement)]
                    else:
                        answers = [_Answer(ok) for ok in await self._run(batch)]
                except asyncio.CancelledError:
                    for ask in batch:
                        ask.future.cancel()
                    raise
                except Exception as exc:
                    for ask in batch:
                        if not ask.future.done():
                            ask.future.set_exception(exc)
                    continue
                for ask, answer in zip(batch, answers, strict=True):
                    if not ask.future.done():
                        ask.future.set_result(answer)

    async def _send_with(self, ask: _Ask, statement: Executable) -> _Answer:
        """The ask's statement, which takes or gives back the lock itself (`LockCarrier`).

        Not sent again on a new connection if the connection is lost: it may have run.
        """
        values = {**(ask.values or {}), "_lock" if ask.take else "_unlock": ask.key}
        if self._conn is not None and is_closed(self._conn):  # lost while idle: never sent
            await self._discard()
        if self._conn is None:
            self._conn = await self._engine.connect()
        try:
            rows = await fetch(self._conn, statement, values)
        except Exception as exc:
            if is_database_down(exc) or isinstance(exc, PendingRollbackError):
                log.error("the thread-lock connection was lost; its locks are gone")
                await self._discard()
            raise
        row = rows[0]
        return _Answer(bool(row["lock"]), int(row[0]))

    async def _run(self, batch: list[_Ask]) -> list[bool]:
        """One query for the batch; once more on a new connection if it was lost.

        A connection lost (the database restarted) held no lock a caller still counts on:
        the server freed them all. So the query is tried again on a fresh connection at
        once, and the first request after a restart is not refused for a stale one. The
        order of a batch's rows does not matter: a session's advisory locks are counted, so
        a lock and an unlock of one key (a late grant given back as a new run takes the
        thread) leave it held once in either order, and different keys are independent.
        """
        params = {"locks": [ask.take for ask in batch], "keys": [ask.key for ask in batch]}
        for last_try in (False, True):
            if self._conn is None:
                self._conn = await self._engine.connect()
            try:
                rows = await fetch(self._conn, _LOCK_BATCH, params)
            except Exception as exc:
                # A connection the database dropped (or that SQLAlchemy has marked invalid
                # since) holds no lock any more: a new one is opened.
                if not (is_database_down(exc) or isinstance(exc, PendingRollbackError)):
                    raise
                log.error("the thread-lock connection was lost; its locks are gone")
                await self._discard()
                if last_try:
                    raise
                continue
            answers: dict[int, bool] = {int(i): bool(ok) for i, ok in rows}
            return [answers[i] for i in range(1, len(batch) + 1)]
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()

    async def settle(self) -> None:
        """Wait until what was asked of the session (its unlocks too) has its answer."""
        while self._drainer is not None and not self._drainer.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._drainer)

    async def close(self) -> None:
        """Close the connection (the server frees its locks), after the unlocks queued."""
        await self.settle()
        async with self._turn:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None


def _without_unsent_unlocks(batch: list[_Ask]) -> list[_Ask]:
    """The batch less its unlocks that came with a statement, answered "not sent".

    Such an unlock must wait for its statement (a run's end) to be stored; its caller sends
    the statement its own way and unlocks after, in a later turn.
    """
    kept = []
    for ask in batch:
        if ask.statement is not None and not ask.take:
            ask.future.set_result(_Answer(ok=False))
        else:
            kept.append(ask)
    return kept


# Each row: its place in the batch, and the lock's or unlock's answer.
_LOCK_BATCH = text(
    "SELECT t.i, CASE WHEN t.take THEN pg_try_advisory_lock(t.k) "
    "ELSE pg_advisory_unlock(t.k) END "
    "FROM unnest(:locks, :keys) WITH ORDINALITY AS t(take, k, i)"
).bindparams(bindparam("locks", type_=ARRAY(Boolean)), bindparam("keys", type_=ARRAY(BigInteger)))


class _PostgresLease(Lease, LockCarrier):
    """A thread's local lock, and its advisory lock: held, or to take with the opening."""

    def __init__(
        self, locks: PostgresThreadLocks, local: Lease, key: int, waiting: _Waiting | None
    ) -> None:
        self._locks = locks
        self._local = local
        self._key = key
        self._waiting = waiting  # deferred: how long `take_with` may wait
        self._held = waiting is None

    @property
    def carrier(self) -> LockCarrier:
        """This lease: it sends the run's opening and end on the lock's connection."""
        return self

    async def take_with(self, statement: Executable, values: Mapping[str, Any]) -> int | None:
        """Take the advisory lock, with `statement` when it can (`LockCarrier.take_with`)."""
        if self._held or self._waiting is None:
            return None
        try:
            answer = await self._locks.try_lock(self._key, statement, values)
        except asyncio.CancelledError:
            raise  # a late grant is given back (`try_lock`)
        except BaseException:
            # Sent, and failed: whether it took the lock is unknown, so `release` gives it
            # back (to a session that does not hold it, an unlock is a no-op).
            self._held = True
            raise
        if not answer.ok:  # held elsewhere, nothing written: wait for it, then send it alone
            await self._locks.wait(self._key, self._waiting)  # not granted if it raises
            answer = _Answer(ok=True)
        self._held = True
        return answer.counted

    async def give_back_with(self, statement: Executable, values: Mapping[str, Any]) -> int | None:
        """Give the lock back with `statement` when it can (`LockCarrier.give_back_with`)."""
        if not self._held:
            return None
        # Shielded: once sent, its answer says whether the lock went with it.
        answer = await asyncio.shield(self._locks.ask(False, self._key, statement, values))
        if answer.counted is None:  # not sent: `release` gives the lock back
            return None
        self._held = False
        if not answer.ok:  # the lock connection was made again since: the lock went with it
            log.warning("thread lock %d was not held when its run ended", self._key)
        return answer.counted

    async def release(self) -> None:
        """Queue the advisory unlock (if held), then let the next run in this process go.

        Not waited for: the unlock is queued on the lock session before the local lock is
        let go, so the next run on the thread here asks for the advisory lock after it, on
        the same session, in order (and a session's advisory locks are counted: granted
        again before the unlock lands, it is held once after). Another process finds the
        thread busy for one round trip more, which its wait covers. The answer is off the
        run's path: it waited a round trip for it before.
        """
        try:
            if self._held:
                self._held = False
                unlocking = self._locks.unlock_soon(self._key)
                unlocking.add_done_callback(partial(_unlocked, self._key))
        finally:
            await self._local.release()


class _Waiting(NamedTuple):
    """How long a deferred lease may wait for the advisory lock, and what to say after."""

    deadline: float
    thread_id: str
    timeout: float


def _unlocked(key: int, unlocking: asyncio.Future[_Answer]) -> None:
    """Log an advisory unlock that failed (its session is gone: the server freed its locks)."""
    if not unlocking.cancelled() and unlocking.exception() is not None:
        log.warning("could not unlock thread lock %d: %s", key, unlocking.exception())


class PostgresThreadLocks(ThreadLocks):
    """Local locks first (so one waiter per thread polls the database), then advisory.

    Args:
        url: The database URL; the lock connection is opened outside the store's pool.
    """

    def __init__(self, url: str, **engine_options: Any) -> None:
        self._local = LocalThreadLocks()
        self._engine: AsyncEngine = create_async_engine(
            url,
            poolclass=NullPool,
            isolation_level="AUTOCOMMIT",
            **{"connect_args": PG_TIMEOUTS, **engine_options},
        )
        self._session = _LockSession(self._engine)
        self._background: set[asyncio.Task[Any]] = set()

    async def acquire(
        self, thread_id: str, user_id: str, timeout: float, *, deferred: bool = False
    ) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock (see `ThreadLocks`)."""
        waiting = _Waiting(time.monotonic() + timeout, thread_id, timeout)
        local = await self._local.acquire(thread_id, user_id, timeout)
        key = advisory_key(thread_id, user_id)
        if deferred:
            return _PostgresLease(self, local, key, waiting)
        try:
            await self.wait(key, waiting)
        except BaseException:
            await local.release()
            raise
        return _PostgresLease(self, local, key, None)

    async def wait(self, key: int, waiting: _Waiting) -> None:
        """Take the advisory lock `key`, trying until the deadline.

        Raises:
            ConflictError: It stayed held elsewhere until the deadline.
        """
        pause = _POLL_START
        while not (await self.try_lock(key)).ok:
            left = waiting.deadline - time.monotonic()
            if left <= 0:
                raise _busy(waiting.thread_id, waiting.timeout)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_MAX)

    async def try_lock(
        self,
        key: int,
        statement: Executable | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> _Answer:
        """Try once to take the advisory lock `key`, with `statement` if the session is free."""
        attempt = self._session.ask(True, key, statement, values)
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # The database may grant the lock after the waiter gave up: give it back then.
            attempt.add_done_callback(lambda done: self._undo(done, key))
            raise

    def ask(
        self, take: bool, key: int, statement: Executable, values: Mapping[str, Any]
    ) -> asyncio.Future[_Answer]:
        """Queue a lock or unlock of `key` with `statement` on the lock session (`_LockSession`)."""
        return self._session.ask(take, key, statement, values)

    def _undo(self, attempt: asyncio.Future[_Answer], key: int) -> None:
        if attempt.cancelled() or attempt.exception() is not None or not attempt.result().ok:
            return
        task = asyncio.ensure_future(self.unlock(key))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def unlock(self, key: int) -> None:
        """Give back the advisory lock `key` this process holds."""
        await self._session.unlock(key)

    def unlock_soon(self, key: int) -> asyncio.Future[_Answer]:
        """Queue the unlock of `key` (in order on the lock session); its answer to come."""
        return self._session.unlock_soon(key)

    async def settle(self) -> None:
        """Wait until the locks and unlocks asked for are answered (a release's, too)."""
        await self._session.settle()

    async def close(self) -> None:
        """Close the lock connection (which frees every lock still held) and the engine."""
        await self._session.close()
        await self._engine.dispose()


def thread_locks(url: str) -> ThreadLocks:
    """The locks a store at `url` needs: advisory on PostgreSQL, local otherwise."""
    if url.startswith("postgresql"):
        return PostgresThreadLocks(url)
    return LocalThreadLocks()
