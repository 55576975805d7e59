"""Group commit's failures, on SQLite and PostgreSQL: a failing write fails alone and costs its
batch one more transaction (not one per write), a refusal a client can ask for fails no batch,
a statement over its timeout fails only its own write, and no write is left waiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, insert, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from parley.errors import NotFoundError
from parley.service.store import Store
from parley.service.store.runners import GreenletRunner, Write, set_outcomes
from parley.service.store.tables import threads


@pytest.fixture
def url(database_url: str) -> str:
    """The store (conftest's) on SQLite, then on PostgreSQL."""
    return database_url


@pytest.fixture
def store_url(url: str) -> str:
    return url


@pytest.fixture
def transactions() -> Iterator[Counter[str]]:
    """The commits and rollbacks of any SQLAlchemy engine while the test runs."""
    seen: Counter[str] = Counter()

    def commit(conn: Any) -> None:
        seen["commit"] += 1

    def rollback(conn: Any) -> None:
        seen["rollback"] += 1

    event.listen(Engine, "commit", commit)
    event.listen(Engine, "rollback", rollback)
    try:
        yield seen
    finally:
        event.remove(Engine, "commit", commit)
        event.remove(Engine, "rollback", rollback)


def _make(thread_id: str, runs: Counter[str]) -> Callable[[Connection], str]:
    def work(conn: Connection) -> str:
        runs[thread_id] += 1
        now = datetime.now(UTC)
        conn.execute(
            insert(threads).values(
                id=thread_id, user_id="u", agent="a", title="", created_at=now, updated_at=now
            )
        )
        return thread_id

    return work


async def _queued_together(store: Store, url: str, writes: list[Any]) -> list[Any]:
    """Await `writes` (coroutines of the store's writes) queued while its writers are busy.

    SQLite's one writer thread is held on a gate; PostgreSQL's writer tasks are each held by a
    statement that sleeps, so what comes meanwhile waits in the queue and goes as one batch.
    """
    if url.startswith("sqlite"):
        gate = threading.Event()
        held = [asyncio.ensure_future(store.transact(lambda conn: gate.wait(10)))]
        await asyncio.sleep(0.05)  # the writer took the gate's write and waits in it
    else:
        held = [
            asyncio.ensure_future(
                store.transact(lambda conn: conn.execute(text("SELECT pg_sleep(0.5)")))
            )
            for _ in range(4)
        ]
        await asyncio.sleep(0.1)  # each of the four writers is in its sleep
    tasks = [asyncio.ensure_future(write) for write in writes]
    await asyncio.sleep(0)  # every task queued its write
    if url.startswith("sqlite"):
        gate.set()
    await asyncio.gather(*held)
    return await asyncio.gather(*tasks, return_exceptions=True)


async def _stored(store: Store) -> set[str]:
    return set(await store.query(lambda conn: conn.execute(select(threads.c.id)).scalars().all()))


async def test_a_failing_write_runs_once_and_the_rest_commit_together(
    store: Store, url: str, transactions: Counter[str]
) -> None:
    runs: Counter[str] = Counter()

    def fails(conn: Connection) -> None:
        runs["fails"] += 1
        _make("half-done", runs)(conn)  # written, then the work fails: rolled back
        raise ValueError("this write is refused")

    works = [_make(f"t{i}", runs) for i in range(30)]
    works.insert(15, fails)
    before = transactions.copy()
    outcomes = await _queued_together(store, url, [store.transact(work) for work in works])

    assert isinstance(outcomes[15], ValueError)
    assert [o for i, o in enumerate(outcomes) if i != 15] == [f"t{i}" for i in range(30)]
    assert await _stored(store) == {f"t{i}" for i in range(30)}
    # The failing write met its own error once; it is not run again for its caller.
    assert runs["fails"] == 1
    # The rest ran again as one batch: at most twice each, and one commit held them all
    # (the holders' commits aside), where running each again alone took thirty.
    assert max(runs[f"t{i}"] for i in range(30)) <= 2
    holders = 1 if url.startswith("sqlite") else 4
    assert transactions["commit"] - before["commit"] <= holders + 1


async def test_feedback_on_no_such_run_fails_no_batch(
    store: Store, url: str, transactions: Counter[str]
) -> None:
    runs: Counter[str] = Counter()
    writes: list[Any] = [store.transact(_make(f"t{i}", runs)) for i in range(20)]
    writes.insert(10, store.add_feedback("run_none", "mallory", "k", 1.0, {}))
    before = transactions.copy()
    outcomes = await _queued_together(store, url, writes)

    assert isinstance(outcomes[10], NotFoundError)
    assert outcomes[10].status_code == 404
    # Refused by its result: no batch was rolled back, no write ran twice.
    assert transactions["rollback"] - before["rollback"] == 0
    assert set(runs.values()) == {1}
    assert await _stored(store) == {f"t{i}" for i in range(20)}


async def test_a_statement_over_its_timeout_fails_only_its_write(postgres_db_url: str) -> None:
    store = await Store.open(postgres_db_url, connect_args={"timeout": 10, "command_timeout": 1})
    try:
        runs: Counter[str] = Counter()
        slow = store.transact(lambda conn: conn.execute(text("SELECT pg_sleep(3)")))
        writes: list[Any] = [slow, *(store.transact(_make(f"t{i}", runs)) for i in range(20))]
        outcomes = await _queued_together(store, postgres_db_url, writes)

        assert isinstance(outcomes[0], TimeoutError)
        assert outcomes[1:] == [f"t{i}" for i in range(20)]
        assert await _stored(store) == {f"t{i}" for i in range(20)}
    finally:
        await store.close()


async def test_a_write_raising_a_base_exception_leaves_the_sqlite_writer_alive(
    sqlite_url: str,
) -> None:
    class Stop(BaseException):
        """Not an `Exception`: what used to end the writer thread for good."""

    def stops(conn: Connection) -> None:
        raise Stop

    store = await Store.open(sqlite_url)
    try:
        with pytest.raises(Stop):
            await store.transact(stops)
        runs: Counter[str] = Counter()
        assert await asyncio.wait_for(store.transact(_make("after", runs)), 10) == "after"
    finally:
        await store.close()


async def test_a_write_queued_as_the_postgres_writers_finish_is_not_left_waiting() -> None:
    # The four writer tasks end in one turn of the loop; a write queued later in that same
    # turn must find a writer (it used to see the set still full and wait for the next write).
    gate = asyncio.Event()

    class Held(GreenletRunner):
        async def _write_batch(self, batch: list[Write]) -> None:
            if batch[0].work != "late":
                await gate.wait()
            set_outcomes([(item, item.work, None) for item in batch])

    # An engine that never connects: only the queue runs (`_write_batch` above sends nothing).
    engine = create_async_engine("postgresql+asyncpg://nobody@127.0.0.1:9/none")
    runner = Held(engine)

    async def late() -> object:
        await gate.wait()  # wakes in the turn the writers end, after them
        return await runner.write("late")  # type: ignore[arg-type]

    first = []
    for i in range(4):
        first.append(asyncio.ensure_future(runner.write(f"w{i}")))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    queued_late = asyncio.ensure_future(late())
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*first) == ["w0", "w1", "w2", "w3"]
    assert await asyncio.wait_for(queued_late, 5) == "late"
    await engine.dispose()
