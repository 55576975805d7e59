"""PostgreSQL under many runs at once: writes queued together share one transaction, a failing
one fails alone, and the thread locks asked for together go as one query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, func, insert, select

from parley.service.store import Store, thread_locks
from parley.service.store.locks import PostgresThreadLocks
from parley.service.store.tables import threads
from tests.service._sent import Sent


@pytest.fixture
def store_url(postgres_db_url: str) -> str:
    """The store (conftest's) on PostgreSQL only."""
    return postgres_db_url


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement any SQLAlchemy engine sends while the test runs, and every commit."""
    seen: list[str] = []

    def sent(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    def committed(conn: Any) -> None:
        seen.append("COMMIT")

    event.listen(Engine, "before_cursor_execute", sent)
    event.listen(Engine, "commit", committed)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", sent)
        event.remove(Engine, "commit", committed)


def _make(thread_id: str, *, then_fail: bool = False) -> Callable[[Connection], str]:
    def work(conn: Connection) -> str:
        now = datetime.now(UTC)
        conn.execute(
            insert(threads).values(
                id=thread_id, user_id="u", agent="a", title="", created_at=now, updated_at=now
            )
        )
        if then_fail:
            raise ValueError(f"{thread_id} is refused")
        return thread_id

    return work


async def _stored(store: Store) -> set[str]:
    return set(await store.query(lambda conn: conn.execute(select(threads.c.id)).scalars().all()))


async def test_writes_queued_together_share_one_transaction(
    store: Store, statements: list[str]
) -> None:
    before = statements.count("COMMIT")
    made = await asyncio.gather(*(store.transact(_make(f"t{i}")) for i in range(30)))

    assert made == [f"t{i}" for i in range(30)]
    assert statements.count("COMMIT") - before == 1  # one a write before: 30
    assert await _stored(store) == {f"t{i}" for i in range(30)}


async def test_a_failing_write_fails_alone_and_leaves_nothing(store: Store) -> None:
    works = [_make("before"), _make("refused", then_fail=True), _make("after")]
    outcomes = await asyncio.gather(*(store.transact(w) for w in works), return_exceptions=True)

    assert outcomes[0] == "before"
    assert isinstance(outcomes[1], ValueError)
    assert outcomes[2] == "after"
    assert await _stored(store) == {"before", "after"}
    count = await store.query(
        lambda conn: conn.execute(select(func.count()).select_from(threads)).scalar_one()
    )
    assert count == 2


async def test_thread_locks_asked_together_go_as_one_query(
    postgres_db_url: str, asyncpg_sent: Sent
) -> None:
    locks = thread_locks(postgres_db_url)
    assert isinstance(locks, PostgresThreadLocks)
    asyncpg_sent.on = True
    statements = asyncpg_sent.statements
    try:
        leases = await asyncio.gather(*(locks.acquire(f"t{i}", "u", 0) for i in range(16)))
        taken = [s for s in statements if "advisory" in s]
        await asyncio.gather(*(lease.release() for lease in leases))
        await locks.settle()  # the unlocks are queued, not waited for
        given_back = [s for s in statements if "advisory" in s][len(taken) :]

        assert len(taken) == 1  # one a lock before: 16
        assert len(given_back) == 1
        # They were held: another process's connection (the store's) cannot take them
        # while held, and can once they are given back.
        again = await asyncio.gather(*(locks.acquire(f"t{i}", "u", 0) for i in range(16)))
        await asyncio.gather(*(lease.release() for lease in again))
    finally:
        await locks.close()


async def test_a_thread_lock_held_elsewhere_is_refused_in_a_batch(postgres_db_url: str) -> None:
    mine, theirs = PostgresThreadLocks(postgres_db_url), PostgresThreadLocks(postgres_db_url)
    try:
        held = await theirs.acquire("busy", "u", 0)
        outcomes = await asyncio.gather(
            mine.acquire("free", "u", 0), mine.acquire("busy", "u", 0), return_exceptions=True
        )
        assert not isinstance(outcomes[0], BaseException)
        assert isinstance(outcomes[1], Exception)
        assert "busy" in str(outcomes[1])
        await held.release()
        await theirs.settle()  # the release's unlock (sent without waiting) answered
        taken = await mine.acquire("busy", "u", 0)  # free now
        await taken.release()
        await outcomes[0].release()
    finally:
        await mine.close()
        await theirs.close()
