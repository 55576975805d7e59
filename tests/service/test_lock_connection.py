"""The thread-lock connection on PostgreSQL: after the database dropped it (a restart), and
a release that does not wait for the database's answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from parley.errors import ConflictError
from parley.service.store import thread_locks
from parley.service.store.locks import PostgresThreadLocks

_KILL_OTHERS = text(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


async def test_a_lock_after_the_lock_connection_was_dropped_is_taken_on_a_new_one(
    postgres_db_url: str,
) -> None:
    locks = thread_locks(postgres_db_url)
    engine = create_async_engine(postgres_db_url)
    try:
        first = await locks.acquire("t", "alice", 0)
        async with engine.connect() as conn:
            killed = len((await conn.execute(_KILL_OTHERS)).all())
        assert killed >= 1  # the lock connection was one of them
        # Its locks went with it (the server freed them); the next lock is not refused for
        # the stale connection: it is taken on a new one, and held there.
        again = await locks.acquire("u", "alice", 0)
        async with engine.connect() as conn:
            advisory = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
            held = (await conn.execute(advisory)).scalar_one()
        assert held == 1  # the new lock, on the new connection
        await again.release()
        await first.release()  # a lock the server already freed: nothing to give back
    finally:
        await engine.dispose()
        await locks.close()


async def test_a_release_lets_the_thread_go_before_the_database_answers(
    postgres_db_url: str,
) -> None:
    locks = PostgresThreadLocks(postgres_db_url)
    elsewhere = PostgresThreadLocks(postgres_db_url)  # another process's
    session = locks._session
    answers = asyncio.Event()
    run = session._run

    async def slow(batch: Any) -> list[bool]:
        if not all(ask.take for ask in batch):  # an unlock: its answer held back
            await answers.wait()
        return await run(batch)

    session._run = slow  # type: ignore[method-assign]
    try:
        first = await locks.acquire("t", "alice", 0)
        await asyncio.wait_for(first.release(), 5)  # returns with its unlock unanswered
        # The next run on the thread here goes at once; its lock is asked after the unlock,
        # on the same session.
        second = asyncio.ensure_future(locks.acquire("t", "alice", 5))
        await asyncio.sleep(0.05)
        answers.set()
        lease = await asyncio.wait_for(second, 5)
        with pytest.raises(ConflictError):  # held once, by the second run
            await elsewhere.acquire("t", "alice", 0.2)
        await lease.release()
        async with asyncio.timeout(10):  # and free once it let go
            while True:
                try:
                    other = await elsewhere.acquire("t", "alice", 0)
                except ConflictError:
                    await asyncio.sleep(0.02)
                    continue
                break
        await other.release()
    finally:
        await locks.close()
        await elsewhere.close()
