"""A thread's lock carried by its run's statements (PostgreSQL, `LockCarrier`).

A new message's run takes its thread's advisory lock in its opening statement and gives it
back in its end's, on the lock connection when that is free: one round trip for both. What
must hold: nothing is written without the lock; the lock stays held until the end's writes
are committed; whatever was not sent so (a busy connection, a failure, a cancel) is still
locked and unlocked as a lease always was.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from parley.errors import ConflictError
from parley.messages import Msg
from parley.service.store import Store
from parley.service.store.locks import Lease, PostgresThreadLocks
from tests.service._sent import Sent


@dataclass
class _Setup:
    store: Store
    locks: PostgresThreadLocks
    elsewhere: PostgresThreadLocks  # another replica's
    engine: AsyncEngine  # a plain session, for what the test itself does on the database


@pytest.fixture
async def pg(postgres_db_url: str) -> AsyncIterator[_Setup]:
    store = await Store.open(postgres_db_url)
    locks = PostgresThreadLocks(postgres_db_url)
    elsewhere = PostgresThreadLocks(postgres_db_url)
    engine = create_async_engine(postgres_db_url)
    try:
        yield _Setup(store, locks, elsewhere, engine)
    finally:
        await engine.dispose()
        await elsewhere.close()
        await locks.close()
        await store.close()


async def _open(pg: _Setup, lease: Lease, run_id: str = "r1", thread_id: str = "t") -> None:
    await pg.store.open_run(
        run_id,
        thread_id,
        "u",
        "echo",
        "fake",
        expire_approvals=False,
        then=lambda _history: [Msg.user("hi")],
        lock=lease.carrier,
    )


async def _end(pg: _Setup, lease: Lease, run_id: str = "r1", thread_id: str = "t") -> bool:
    answer = [Msg.assistant("hello")]
    return await pg.store.end_run(
        run_id, "completed", None, None, last=(thread_id, "u", answer), lock=lease.carrier
    )


async def _locked_elsewhere(pg: _Setup, thread_id: str = "t") -> bool:
    """Whether another replica finds the thread's lock held (it asks once)."""
    try:
        other = await pg.elsewhere.acquire(thread_id, "u", 0)
    except ConflictError:
        return True
    await other.release()
    await pg.elsewhere.settle()
    return False


async def _free_soon(pg: _Setup, thread_id: str = "t") -> None:
    async with asyncio.timeout(10):
        while await _locked_elsewhere(pg, thread_id):
            await asyncio.sleep(0.02)


async def test_the_opening_takes_the_lock_and_the_end_gives_it_back_each_in_its_statement(
    pg: _Setup, asyncpg_sent: Sent
) -> None:
    assert (await pg.locks.try_lock(1)).ok  # the lock connection made (its set-up queries)
    await pg.locks.unlock(1)
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    assert not await _locked_elsewhere(pg)  # deferred: not taken before the opening
    asyncpg_sent.on = True
    await _open(pg, lease)
    (opening,) = asyncpg_sent.statements
    assert "pg_try_advisory_lock" in opening
    assert await _locked_elsewhere(pg)

    asyncpg_sent.statements.clear()
    assert await _end(pg, lease)
    (ending,) = asyncpg_sent.statements
    assert "pg_advisory_unlock" in ending
    assert not await _locked_elsewhere(pg)  # given back with the end, before the release

    asyncpg_sent.statements.clear()
    await lease.release()
    await pg.locks.settle()
    assert asyncpg_sent.statements == []  # nothing left to give back
    asyncpg_sent.on = False
    stored = await pg.store.get_messages("t", "u")
    assert [(m.text, run) for m, run in stored] == [("hi", "r1"), ("hello", "r1")]


async def test_the_end_keeps_the_thread_locked_until_its_writes_commit(pg: _Setup) -> None:
    # A statement-level trigger runs after the end's statement, its unlock included, and
    # before its commit: there it waits on a key the test holds.
    async with pg.engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$"
            )
        )
        await conn.execute(
            text(
                "CREATE TRIGGER hold_commit AFTER UPDATE ON runs "
                "FOR EACH STATEMENT EXECUTE FUNCTION hold_commit()"
            )
        )
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    await _open(pg, lease)
    async with pg.engine.connect() as gate:
        await gate.execute(text("SELECT pg_advisory_lock(4242)"))
        ending = asyncio.ensure_future(_end(pg, lease))
        async with asyncio.timeout(10):  # until the end waits at the gate
            waiting = text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            while not (await gate.execute(waiting)).scalar_one():
                await asyncio.sleep(0.02)
        assert await _locked_elsewhere(pg)  # its unlock ran, its writes are not committed
        await gate.execute(text("SELECT pg_advisory_unlock(4242)"))
        assert await asyncio.wait_for(ending, 10)
    assert not await _locked_elsewhere(pg)
    await lease.release()


async def test_a_thread_locked_elsewhere_is_opened_once_it_is_free(pg: _Setup) -> None:
    other = await pg.elsewhere.acquire("t", "u", 0)
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    opening = asyncio.ensure_future(_open(pg, lease))
    await asyncio.sleep(0.3)
    assert not opening.done()
    assert await pg.store.get_thread("t", "u") is None  # nothing written without the lock
    await other.release()
    await asyncio.wait_for(opening, 10)
    assert await pg.store.get_thread("t", "u") is not None
    assert await _locked_elsewhere(pg)  # ours now
    await lease.release()
    await _free_soon(pg)


async def test_an_opening_that_waits_too_long_writes_nothing_and_says_the_thread_is_busy(
    pg: _Setup,
) -> None:
    other = await pg.elsewhere.acquire("t", "u", 0)
    lease = await pg.locks.acquire("t", "u", 0.3, deferred=True)
    with pytest.raises(ConflictError, match="busy"):
        await _open(pg, lease)
    await lease.release()
    assert await pg.store.get_thread("t", "u") is None
    await other.release()
    await pg.elsewhere.settle()
    assert not await _locked_elsewhere(pg)


async def test_an_opening_cancelled_while_it_waits_leaves_the_thread_free(pg: _Setup) -> None:
    other = await pg.elsewhere.acquire("t", "u", 0)
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    opening = asyncio.ensure_future(_open(pg, lease))
    await asyncio.sleep(0.2)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    await lease.release()
    await other.release()
    await pg.elsewhere.settle()
    await pg.locks.settle()
    await _free_soon(pg)  # a grant that came late was given back
    assert await pg.store.get_thread("t", "u") is None


async def test_an_opening_that_fails_after_taking_the_lock_gives_it_back_on_release(
    pg: _Setup,
) -> None:
    first = await pg.locks.acquire("a", "u", 5, deferred=True)
    await _open(pg, first, run_id="r1", thread_id="a")
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    with pytest.raises(IntegrityError):  # the run's id is taken: nothing of it is stored
        await _open(pg, lease, run_id="r1", thread_id="t")
    assert await pg.store.get_thread("t", "u") is None
    # The statement took the lock before it failed (a session's advisory lock outlives the
    # statement's rollback): held until the lease lets it go.
    assert await _locked_elsewhere(pg)
    await lease.release()
    await _free_soon(pg)
    await first.release()


async def test_an_end_on_a_busy_lock_connection_is_sent_alone_and_unlocked_after(
    pg: _Setup,
) -> None:
    lease = await pg.locks.acquire("t", "u", 5, deferred=True)
    await _open(pg, lease)
    session = pg.locks._session
    async with session._turn:  # the connection busy: what is asked meanwhile goes together
        ending = asyncio.ensure_future(_end(pg, lease))
        other = asyncio.ensure_future(pg.locks.try_lock(12345))  # another thread's lock
        await asyncio.sleep(0.05)
    assert await asyncio.wait_for(ending, 10)  # stored its own way, not with the unlock
    assert (await asyncio.wait_for(other, 10)).ok
    assert await _locked_elsewhere(pg)  # still held: the release gives it back
    await lease.release()
    await _free_soon(pg)
    await pg.locks.unlock(12345)
    stored = await pg.store.get_messages("t", "u")
    assert [m.text for m, _ in stored] == ["hi", "hello"]
