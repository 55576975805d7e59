"""What one run costs the database: the statements of a run on a new thread, counted, so they
cannot grow back unseen.

On PostgreSQL each statement is a round trip, and a transaction two more (BEGIN, COMMIT):
a run takes its thread's lock and makes the thread with its record and question in ONE
statement, and stores its end with its answer and its events (and their doorbell) and gives
its lock back in one; neither inside a transaction. A run shorter than its log's flush
interval stores no batch of events of its own. On SQLite (no round trips) its end is one
fenced UPDATE, no SELECT before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from parley.messages import Msg
from parley.service.events import StoreEventLog
from parley.service.runs import RunHandle, RunManager
from parley.service.store import Store, thread_locks
from parley.service.store.locks import LocalThreadLocks, PostgresThreadLocks
from tests.service._agents import echo_agent
from tests.service._sent import Sent


@pytest.fixture
async def postgres_runs(postgres_db_url: str) -> AsyncIterator[RunManager]:
    async with _manager(postgres_db_url) as runs:
        yield runs


@pytest.fixture
async def sqlite_runs(sqlite_url: str, sqlite_sent: Sent) -> AsyncIterator[RunManager]:
    # After `sqlite_sent`: its trace is on every connection the store opens.
    async with _manager(sqlite_url) as runs:
        yield runs


class _manager:  # noqa: N801 - used as a function
    """A run manager as the service makes one: its store, thread locks and event log."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> RunManager:
        self.store = await Store.open(self.url)
        self.events = await StoreEventLog.open(self.store)
        self.locks = (
            thread_locks(self.url) if self.url.startswith("postgresql") else LocalThreadLocks()
        )
        self.runs = RunManager(self.store, self.locks, busy_timeout=5, events=self.events)
        return self.runs

    async def __aexit__(self, *exc: object) -> None:
        await self.runs.close()
        await self.events.close()
        await self.locks.close()
        await self.store.close()


async def _run(runs: RunManager, thread_id: str) -> RunHandle:
    """One run on a new thread, to its end and its event log's last flush."""
    handle = await runs.start(
        echo_agent(), agent_key="echo", user_id="u", thread_id=thread_id, message=Msg.user("hi")
    )
    assert handle.task is not None
    await handle.task  # its end recorded, its lock given back, its events stored
    if isinstance(runs.locks, PostgresThreadLocks):
        await runs.locks.settle()  # its unlock, sent without waiting, answered
    return handle


async def _stored_whole(runs: RunManager, handle: RunHandle) -> None:
    """The run as a run's end leaves it: ended, its question and answer kept, its log whole."""
    record = await runs.store.get_run(handle.run_id, "u")
    assert record is not None
    assert record.status == "completed"
    assert record.usage is not None
    stored = await runs.store.get_messages(handle.thread_id, "u")
    assert [(m.role, m.text, run_id) for m, run_id in stored] == [
        ("user", "hi", handle.run_id),
        ("assistant", "turn 1: hi", handle.run_id),
    ]
    thread = await runs.store.get_thread(handle.thread_id, "u")
    assert thread is not None
    assert thread.title == "hi"
    assert runs.events is not None
    seqs = [seq async for seq, _ in runs.events.follow(handle.run_id, 0)]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_a_run_on_postgres_is_two_statements_with_its_lock_and_events(
    postgres_runs: RunManager, asyncpg_sent: Sent
) -> None:
    await _run(postgres_runs, "warm-up")  # the pool's first connections, their type lookups
    asyncpg_sent.on = True
    handle = await _run(postgres_runs, "t")
    asyncpg_sent.on = False

    # No transaction: each write is one statement, committed on its own.
    assert not [s for s in asyncpg_sent.statements if s.split()[0] in ("BEGIN", "COMMIT")]
    others = asyncpg_sent.others()
    # The opening takes the thread's lock (thread, run, question), the end gives it back
    # (+ answer, events, doorbell): no statement of the lock's own.
    assert len(others) == 2, others
    assert others[0].startswith("WITH locked AS")
    assert "pg_try_advisory_lock" in others[0]
    assert "INSERT INTO threads" in others[0]
    assert others[1].startswith("WITH ended AS")
    assert "INSERT INTO run_events" in others[1]  # its events, and their doorbell
    assert "pg_notify" in others[1]
    assert "pg_advisory_unlock" in others[1]
    # Both straight on asyncpg's connection (`prepared.fetch`), not through SQLAlchemy.
    assert [s for s in asyncpg_sent.straight if s in others] == others
    assert asyncpg_sent.event_batches() == []  # it ended within its log's flush interval
    await _stored_whole(postgres_runs, handle)


async def test_a_run_on_an_existing_postgres_thread_is_one_transaction_more(
    postgres_runs: RunManager, asyncpg_sent: Sent
) -> None:
    for _ in range(2):  # the pool's first connection (a new thread's run leaves it unused)
        await _run(postgres_runs, "warm-up")
    first = await _run(postgres_runs, "t")
    asyncpg_sent.on = True
    handle = await _run(postgres_runs, "t")
    asyncpg_sent.on = False

    others = asyncpg_sent.others()
    # The new-thread statement takes the lock and finds the thread (it writes nothing), then
    # the opening's transaction: BEGIN, its claim, its record, the history read, the
    # question, the touch; the end gives the lock back.
    assert others[0].startswith("WITH locked AS")
    assert [s.split()[0].rstrip(";") for s in others[1:3]] == ["BEGIN", "SELECT"]
    assert "pg_advisory_unlock" in others[-1]
    assert not [s for s in others if "pg_try_advisory_lock(t.k)" in s]  # no lock of its own
    assert len(others) <= 12, others
    stored = await postgres_runs.store.get_messages("t", "u")
    assert [(m.text, run_id) for m, run_id in stored] == [
        ("hi", first.run_id),
        ("turn 1: hi", first.run_id),
        ("hi", handle.run_id),
        ("turn 2: hi", handle.run_id),
    ]


async def test_a_run_on_sqlite_is_two_transactions_of_seven_statements_and_its_events(
    sqlite_runs: RunManager, sqlite_sent: Sent
) -> None:
    await _run(sqlite_runs, "warm-up")
    sqlite_sent.on = True
    handle = await _run(sqlite_runs, "t")
    sqlite_sent.on = False

    others = sqlite_sent.others()
    # Opening: the claim, the thread, the run, the question. Ending: the fenced end (no
    # SELECT ... FOR UPDATE before it), the answer, the thread's touch, then its events.
    assert len(others) == 7, others
    assert others[4].startswith("UPDATE runs")
    # Its events last, in the end's transaction: one execution of one statement (SQLite's
    # trace shows each row it runs it for).
    events = sqlite_sent.statements[7:]
    assert sqlite_sent.event_batches() == events
    assert len({sql.split(" VALUES ")[0] for sql in events}) == 1
    assert sqlite_sent.commits == 2  # its opening, and its end with its events
    await _stored_whole(sqlite_runs, handle)


async def test_a_fenced_out_end_on_postgres_writes_nothing(postgres_runs: RunManager) -> None:
    handle = await _run(postgres_runs, "t")
    store = postgres_runs.store
    answer = Msg.assistant("late")
    kept = await store.end_run(
        handle.run_id,
        "completed",
        None,
        None,
        last=("t", "u", [answer]),
        fence=(postgres_runs.worker_id, handle.attempt),  # it ended: no worker holds it
    )
    assert kept is False
    stored = await store.get_messages("t", "u")
    assert "late" not in [m.text for m, _ in stored]


async def test_many_runs_at_once_on_postgres_are_each_stored_whole(
    postgres_runs: RunManager,
) -> None:
    handles = await asyncio.gather(*(_run(postgres_runs, f"t{i}") for i in range(24)))
    for handle in handles:
        await _stored_whole(postgres_runs, handle)


async def test_the_cancel_poll_on_postgres_is_one_statement_whatever_the_number_of_runs(
    postgres_runs: RunManager, asyncpg_sent: Sent
) -> None:
    handle = await _run(postgres_runs, "t")
    store = postgres_runs.store
    await store.request_cancel(handle.run_id)  # it ended: nothing to stop, nothing flagged
    asyncpg_sent.on = True
    asked = [await store.cancel_actions([f"run_{j}" for j in range(n)]) for n in (1, 2, 5)]
    flagged = await store.cancel_requested([handle.run_id, "run_x"])
    asyncpg_sent.on = False

    assert asked == [{}, {}, {}]
    assert flagged == set()
    # One SQL text for every length (an IN list would be three, each PREPAREd anew).
    assert len(set(asyncpg_sent.statements)) == 1, asyncpg_sent.statements


async def test_the_cancel_poll_on_postgres_finds_a_flagged_run(postgres_runs: RunManager) -> None:
    handle = await postgres_runs.start(
        echo_agent(0.2), agent_key="echo", user_id="u", thread_id="t", message=Msg.user("hi")
    )
    store = postgres_runs.store
    await store.request_cancel(handle.run_id, "rollback")  # as another process would
    asked = await store.cancel_actions(["run_other", handle.run_id])
    flagged = await store.cancel_requested([handle.run_id])
    assert handle.task is not None
    await handle.task  # the manager's own poll stops it

    assert asked == {handle.run_id: "rollback"}
    assert flagged == {handle.run_id}
