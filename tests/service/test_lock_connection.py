"""The thread-lock connection on PostgreSQL after the database dropped it (a restart)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from parley.service.store import thread_locks

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
