"""One run per thread at a time: in this process, and on PostgreSQL across processes.

A run holds its thread's lock from before its first message is stored until its last one is.
A second request on a busy thread waits up to a timeout, then gets `ConflictError` (409).

In one process an `asyncio.Lock` per thread does it. On PostgreSQL the holder also takes a
session-level advisory lock, keyed by a hash of the thread id, on a connection of its own: the
server releases it when that connection ends, so a process killed mid-run frees its threads.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from abc import ABC, abstractmethod
from typing import Any

from sqlalchemy import NullPool, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from parley.errors import ConflictError

__all__ = ["Lease", "LocalThreadLocks", "PostgresThreadLocks", "ThreadLocks", "thread_locks"]

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
    async def acquire(self, thread_id: str, timeout: float) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock.

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


class _LocalLease(Lease):
    def __init__(self, locks: LocalThreadLocks, thread_id: str, lock: asyncio.Lock) -> None:
        self._locks = locks
        self._thread_id = thread_id
        self._lock = lock

    async def release(self) -> None:
        self._lock.release()
        self._locks.forget(self._thread_id, self._lock)


class LocalThreadLocks(ThreadLocks):
    """Per-thread `asyncio.Lock`s, dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    async def acquire(self, thread_id: str, timeout: float) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock (see `ThreadLocks`)."""
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        self._users[thread_id] = self._users.get(thread_id, 0) + 1
        try:
            async with asyncio.timeout(timeout):
                await lock.acquire()
        except TimeoutError:
            self.forget(thread_id, lock)
            raise _busy(thread_id, timeout) from None
        except BaseException:
            self.forget(thread_id, lock)
            raise
        return _LocalLease(self, thread_id, lock)

    def forget(self, thread_id: str, lock: asyncio.Lock) -> None:
        """One user of the lock is done; drop it when it was the last."""
        left = self._users.get(thread_id, 1) - 1
        if left > 0:
            self._users[thread_id] = left
        elif self._locks.get(thread_id) is lock:
            del self._locks[thread_id]
            del self._users[thread_id]

    def __len__(self) -> int:
        return len(self._locks)


def advisory_key(thread_id: str) -> int:
    """The thread's advisory lock key: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(thread_id.encode(), digest_size=8, person=b"parley-thread").digest()
    return int.from_bytes(digest, "big", signed=True)


class _PostgresLease(Lease):
    def __init__(self, local: Lease, conn: AsyncConnection, key: int) -> None:
        self._local = local
        self._conn = conn
        self._key = key

    async def release(self) -> None:
        try:
            await self._conn.execute(select(func.pg_advisory_unlock(self._key)))
        finally:
            # Closing ends the session, which frees the lock even if the unlock failed.
            await self._conn.close()
            await self._local.release()


class PostgresThreadLocks(ThreadLocks):
    """Local locks first (one connection per busy thread, not per waiter), then advisory.

    Args:
        url: The database URL; lock holders connect outside the store's pool (a long run
            must not hold a pooled connection away from short queries).
    """

    def __init__(self, url: str, **engine_options: Any) -> None:
        self._local = LocalThreadLocks()
        self._engine: AsyncEngine = create_async_engine(
            url, poolclass=NullPool, isolation_level="AUTOCOMMIT", **engine_options
        )

    async def acquire(self, thread_id: str, timeout: float) -> Lease:
        """Wait up to `timeout` seconds for the thread's lock (see `ThreadLocks`)."""
        deadline = time.monotonic() + timeout
        local = await self._local.acquire(thread_id, timeout)
        try:
            conn = await self._engine.connect()
        except BaseException:
            await local.release()
            raise
        key = advisory_key(thread_id)
        try:
            await self._wait(conn, key, deadline, thread_id, timeout)
        except BaseException:
            await conn.close()
            await local.release()
            raise
        return _PostgresLease(local, conn, key)

    async def _wait(
        self, conn: AsyncConnection, key: int, deadline: float, thread_id: str, timeout: float
    ) -> None:
        pause = _POLL_START
        while True:
            got = (await conn.execute(select(func.pg_try_advisory_lock(key)))).scalar_one()
            if got:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise _busy(thread_id, timeout)
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_MAX)

    async def close(self) -> None:
        """Close the lock engine (held leases end with their connections)."""
        await self._engine.dispose()


def thread_locks(url: str) -> ThreadLocks:
    """The locks a store at `url` needs: advisory on PostgreSQL, local otherwise."""
    if url.startswith("postgresql"):
        return PostgresThreadLocks(url)
    return LocalThreadLocks()
