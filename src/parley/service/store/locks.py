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
from functools import partial
from typing import Any

from sqlalchemy import BigInteger, Boolean, NullPool, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import PendingRollbackError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from parley.errors import ConflictError
from parley.service.store.prepared import fetch
from parley.service.store.runners import is_database_down
from parley.service.store.store import PG_TIMEOUTS

__all__ = ["Lease", "LocalThreadLocks", "PostgresThreadLocks", "ThreadLocks", "thread_locks"]

log = logging.getLogger("parley.service")

_POLL_START = 0.01
_POLL_MAX = 0.2


class Lease(ABC):
    """A held thread lock; `release()` it exactly once."""

    @abstractmethod
    async def release(self) -> None:
        """Let the next run on the thread go."""


class ThreadLocks(ABC):
    """Hands out per-thread leases."""

    @abstractmethod
    async def acquire(self, thread_id: str, user_id: str, timeout: float) -> Lease:
        """Wait up to `timeout` seconds for the lock of `user_id`'s thread `thread_id`.

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

    async def acquire(self, thread_id: str, user_id: str, timeout: float) -> Lease:
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


class _LockSession:
    """The one connection that holds every advisory lock this process takes.

    Session-level advisory locks belong to a connection, and a connection holds any number
    of them, so one connection serves all of a process's runs: the database's connection
    limit is not spent on open streams, and no run waits for a connection to open. Its
    queries take turns, so the locks and unlocks asked for meanwhile go together, as ONE
    query, on the next turn (under many clients a round trip each, one after another, was
    what every run waited for). If the connection dies, the server frees its locks, as when
    the process dies; the next query opens a new one.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._turn = asyncio.Lock()
        self._asked: list[tuple[bool, int, asyncio.Future[bool]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def lock(self, key: int) -> bool:
        """Try to take the advisory lock `key` (`pg_try_advisory_lock`); whether it was."""
        return await self._ask(True, key)

    async def unlock(self, key: int) -> bool:
        """Give back the advisory lock `key` (`pg_advisory_unlock`); whether it was held."""
        return await self._ask(False, key)

    def unlock_soon(self, key: int) -> asyncio.Future[bool]:
        """Queue the unlock of `key` now, in order with what this session was asked before."""
        return self._queue(False, key)

    async def _ask(self, lock: bool, key: int) -> bool:
        return await self._queue(lock, key)

    def _queue(self, lock: bool, key: int) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asked.append((lock, key, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="parley-thread-locks")
        return future

    async def _drain(self) -> None:
        async with self._turn:
            while self._asked:
                batch, self._asked = self._asked, []
                try:
                    done = await self._run(batch)
                except asyncio.CancelledError:
                    for _, _, future in batch:
                        future.cancel()
                    raise
                except Exception as exc:
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, _, future), ok in zip(batch, done, strict=True):
                    if not future.done():
                        future.set_result(ok)

    async def _run(self, batch: list[tuple[bool, int, asyncio.Future[bool]]]) -> list[bool]:
        """One query for the batch; once more on a new connection if it was lost.

        A connection lost (the database restarted) held no lock a caller still counts on:
        the server freed them all. So the query is tried again on a fresh connection at
        once, and the first request after a restart is not refused for a stale one. The
        order of a batch's rows does not matter: a session's advisory locks are counted, so
        a lock and an unlock of one key (a late grant given back as a new run takes the
        thread) leave it held once in either order, and different keys are independent.
        """
        params = {"locks": [lock for lock, _, _ in batch], "keys": [key for _, key, _ in batch]}
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


# Each row: its place in the batch, and the lock's or unlock's answer.
_LOCK_BATCH = text(
    "SELECT t.i, CASE WHEN t.take THEN pg_try_advisory_lock(t.k) "
    "ELSE pg_advisory_unlock(t.k) END "
    "FROM unnest(:locks, :keys) WITH ORDINALITY AS t(take, k, i)"
).bindparams(bindparam("locks", type_=ARRAY(Boolean)), bindparam("keys", type_=ARRAY(BigInteger)))


class _PostgresLease(Lease):
    def __init__(self, locks: PostgresThreadLocks, local: Lease, key: int) -> None:
        self._locks = locks
        self._local = local
        self._key = key

    async def release(self) -> None:
        """Queue the advisory unlock, then let the next run in this process go at once.

        Not waited for: the unlock is queued on the lock session before the local lock is
        let go, so the next run on the thread here asks for the advisory lock after it, on
        the same session, in order (and a session's advisory locks are counted: granted
        again before the unlock lands, it is held once after). Another process finds the
        thread busy for one round trip more, which its wait covers. The answer is off the
        run's path: it waited a round trip for it before.
        """
        try:
            unlocking = self._locks.unlock_soon(self._key)
            unlocking.add_done_callback(partial(_unlocked, self._key))
        finally:
            await self._local.release()


def _unlocked(key: int, unlocking: asyncio.Future[bool]) -> None:
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

    async def acquire(self, thread_id: str, user_id: str, timeout: float) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock (see `ThreadLocks`)."""
        deadline = time.monotonic() + timeout
        local = await self._local.acquire(thread_id, user_id, timeout)
        key = advisory_key(thread_id, user_id)
        try:
            await self._wait(key, deadline, thread_id, timeout)
        except BaseException:
            await local.release()
            raise
        return _PostgresLease(self, local, key)

    async def _wait(self, key: int, deadline: float, thread_id: str, timeout: float) -> None:
        pause = _POLL_START
        while not await self._try_lock(key):
            left = deadline - time.monotonic()
            if left <= 0:
                raise _busy(thread_id, timeout)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_MAX)

    async def _try_lock(self, key: int) -> bool:
        attempt = asyncio.ensure_future(self._session.lock(key))
        try:
            return bool(await asyncio.shield(attempt))
        except asyncio.CancelledError:
            # The database may grant the lock after the waiter gave up: give it back then.
            attempt.add_done_callback(lambda done: self._undo(done, key))
            raise

    def _undo(self, attempt: asyncio.Future[Any], key: int) -> None:
        if attempt.cancelled() or attempt.exception() is not None or not attempt.result():
            return
        task = asyncio.ensure_future(self.unlock(key))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def unlock(self, key: int) -> None:
        """Give back the advisory lock `key` this process holds."""
        await self._session.unlock(key)

    def unlock_soon(self, key: int) -> asyncio.Future[bool]:
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
