"""The run queue on real SQLite and PostgreSQL: claims that never run a run twice, the
per-thread order, fenced writes, lease takeover and the attempt cap.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from parley.messages import Msg
from parley.service.runs_protocol import RunInput
from parley.service.store import Store
from parley.service.store.queue import RunQueue, new_run_id
from parley.service.store.tables import runs


@pytest.fixture
def store_url(database_url: str) -> str:
    """The store (conftest's) on SQLite, then on PostgreSQL."""
    return database_url


def _queue(store: Store, name: str, *, lease: float = 30.0, attempts: int = 3) -> RunQueue:
    return RunQueue(store, worker_id=name, lease_seconds=lease, max_attempts=attempts)


async def _pending(
    queue: RunQueue, thread: str = "t", text: str = "hi", *, reserve: bool = False
) -> str:
    run_id = new_run_id()
    await queue.create(
        run_id, thread, "alice", "helper", "m", RunInput(message=Msg.user(text)), reserve=reserve
    )
    return run_id


async def _expire(store: Store, run_id: str) -> None:
    """Let the run's lease lapse now (as if its worker stopped renewing it long ago)."""
    past = datetime(2000, 1, 1, tzinfo=UTC)
    await store.transact(
        lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(lease_until=past))
    )


async def test_a_pending_run_is_claimed_once_and_stores_its_question(store: Store) -> None:
    a, b = _queue(store, "a"), _queue(store, "b")
    run_id = await _pending(a, text="question")
    record = await store.get_run(run_id, "alice")
    assert record is not None
    assert (record.status, record.attempt, record.worker_id) == ("pending", 0, None)

    question = Msg.user("question")
    claimed = await a.claim(run_id, then=lambda _history, _record: [question])
    assert claimed is not None
    record, opened = claimed
    assert (record.status, record.attempt, record.worker_id) == ("running", 1, "a")
    assert [m.text for m in opened.added] == ["question"]
    assert await b.claim(run_id) is None  # taken: nobody else gets it
    assert await a.claim(run_id) is None
    stored = await store.get_messages("t", "alice")
    assert [(m.text, r) for m, r in stored] == [("question", run_id)]


async def test_two_workers_racing_never_take_one_run_twice(database_url: str) -> None:
    stores = [await Store.open(database_url) for _ in range(2)]
    try:
        queues = [_queue(s, f"w{i}") for i, s in enumerate(stores)]
        ids = [await _pending(queues[0], thread=f"t{i}") for i in range(20)]
        wins = await asyncio.gather(*(q.claim(r) for r in ids for q in queues for _ in range(2)))
        winners = [w[0] for w in wins if w is not None]
        assert sorted(r.run_id for r in winners) == sorted(ids)  # each run exactly once
        assert all(r.attempt == 1 for r in winners)
    finally:
        for s in stores:
            await s.close()


async def test_runs_of_one_thread_go_one_at_a_time_in_queue_order(store: Store) -> None:
    queue = _queue(store, "a")
    first, second, third = [await _pending(queue) for _ in range(3)]
    assert [c.run_id for c in await queue.candidates(10)] == [first]
    assert await queue.claim(second) is None  # not its turn
    assert await queue.claim(first) is not None
    assert await queue.claim(second) is None  # the thread is busy
    assert await queue.candidates(10) == []
    assert await queue.finish(first, 1, "completed", None, None)
    assert [c.run_id for c in await queue.candidates(10)] == [second]
    assert await queue.claim(second) is not None
    assert await queue.claim(third) is None


async def test_a_reserved_run_is_taken_only_by_its_worker_until_its_lease_lapses(
    store: Store,
) -> None:
    mine, other = _queue(store, "mine"), _queue(store, "other")
    run_id = await _pending(mine, reserve=True)
    assert await other.candidates(10) == []
    assert await other.claim(run_id) is None
    await _expire(store, run_id)  # the reserving process died: its reservation lapses
    claimed = await other.claim(run_id)
    assert claimed is not None
    assert claimed[0].worker_id == "other"


async def test_finish_is_fenced_to_the_worker_and_attempt_that_hold_the_run(store: Store) -> None:
    a, b = _queue(store, "a"), _queue(store, "b")
    run_id = await _pending(a)
    assert await a.claim(run_id) is not None
    await _expire(store, run_id)
    taken = await b.claim(run_id)  # a's lease ran out: b takes the run over
    assert taken is not None
    assert taken[0].attempt == 2
    assert await a.heartbeat({run_id: 1}) == set()  # a learns it lost the run
    assert not await a.finish(run_id, 1, "completed", None, None)  # and cannot end it
    assert await b.heartbeat({run_id: 2}) == {run_id}
    assert await b.finish(run_id, 2, "completed", {"input_tokens": 1}, None)
    record = await store.get_run(run_id, "alice")
    assert record is not None
    assert (record.status, record.usage, record.attempt) == ("completed", {"input_tokens": 1}, 2)


async def test_a_run_that_keeps_losing_its_worker_ends_error_after_max_attempts(
    store: Store,
) -> None:
    queue = _queue(store, "a", attempts=2)
    run_id = await _pending(queue)
    for _ in range(2):
        assert await queue.claim(run_id) is not None
        await _expire(store, run_id)
    assert await queue.claim(run_id) is None  # no attempt left
    assert await queue.give_up() == [run_id]
    record = await store.get_run(run_id, "alice")
    assert record is not None
    assert record.status == "error"
    assert record.error is not None
    assert "2 times" in record.error


async def test_rollback_deletes_the_run_and_its_messages(store: Store) -> None:
    queue = _queue(store, "a")
    run_id = await _pending(queue)
    assert await queue.claim(run_id, then=lambda _h, _r: [Msg.user("gone soon")]) is not None
    assert await queue.finish(run_id, 1, "interrupted", None, None, rollback=True)
    assert await store.get_run(run_id, "alice") is None
    assert await store.get_messages("t", "alice") == []
