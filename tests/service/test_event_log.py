"""The run event log (`parley.service.events`) on a real SQLite and a real PostgreSQL.

Runs are made through the store (`open_run`, `end_run`) and their events put through the
log's writer, as a worker does. On PostgreSQL two `Store`s on one database stand for two
replicas: one writes, the other follows through its NOTIFY doorbell; its listening
connection is killed (`pg_terminate_backend`) and the follower still gets everything. A
replica LISTENs only while a reader follows a run there.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import func, select, text, update

from parley.agents.events import AgentEvent, RunEnded, RunStarted, TextDelta
from parley.messages import Msg
from parley.service.events import LISTENER_NAME, StoreEventLog
from parley.service.runs_protocol import EventRows, EventsExpiredError, UnknownEventIdError
from parley.service.store import Store
from parley.service.store.tables import run_events, runs
from tests._external import pg_connection

WAIT = 20.0  # every wait is bounded: a lost wake-up fails the test, it never hangs it
SLOW = 600.0  # a follower with these intervals is woken only by its doorbell


@pytest.fixture
async def events(store: Store) -> AsyncIterator[StoreEventLog]:
    log = await StoreEventLog.open(store)
    try:
        yield log
    finally:
        await log.close()


@pytest.fixture
def store_url(database_url: str) -> str:
    """The store (conftest's) on SQLite, then on PostgreSQL."""
    return database_url


async def _new_run(store: Store) -> str:
    run_id = uuid.uuid4().hex
    await store.open_run(run_id, "t-" + run_id[:8], "ann", "echo", "m", expire_approvals=True)
    return run_id


def _text(i: int) -> TextDelta:
    return TextDelta(text=f"t{i}")


async def _collect(log: StoreEventLog, run_id: str, after: int | None) -> list[tuple[int, Any]]:
    async with asyncio.timeout(WAIT):
        return [item async for item in log.follow(run_id, after)]


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT):
        while not check():
            await asyncio.sleep(0.02)


async def _write_run(log: StoreEventLog, store: Store, run_id: str, count: int) -> None:
    """Write a run's events one by one (a yield between each), then end it."""
    writer = await log.writer(run_id)
    writer.put(RunStarted(run_id=run_id, agent="echo"))
    for i in range(count):
        writer.put(_text(i))
        await asyncio.sleep(0)
        if i % 7 == 0:
            await writer.flush()
    writer.put(RunEnded(status="completed"))
    await writer.close()
    await store.end_run(run_id, "success", None, None)


class _Counting(StoreEventLog):
    """A log that counts its own batches (each a transaction of its own)."""

    batches: list[int]

    async def store_batch(
        self, run_id: str, rows: list[dict[str, Any]], *, fence: tuple[str, int] | None = None
    ) -> bool:
        self.batches.append(len(rows))
        return await super().store_batch(run_id, rows, fence=fence)


def _counting(store: Store, **options: Any) -> _Counting:
    log = _Counting(store, **options)
    log.batches = []
    return log


async def _stored_seqs(store: Store, run_id: str) -> list[int]:
    async with store.engine.connect() as db:
        query = select(run_events.c.seq).where(run_events.c.run_id == run_id)
        return sorted((await db.execute(query)).scalars())


# -- order and exactly once ----------------------------------------------------------------------


async def test_replay_then_live_is_exactly_once_under_concurrent_writes(
    store: Store, events: StoreEventLog
) -> None:
    run_id = await _new_run(store)
    count = 120
    writing = asyncio.create_task(_write_run(events, store, run_id, count))
    followers = []
    # Readers joining at different points of the run: each from the start.
    for _ in range(4):
        followers.append(asyncio.create_task(_collect(events, run_id, 0)))
        await asyncio.sleep(0.01)
    await writing
    late = await _collect(events, run_id, 0)  # after its end: all of it from the store
    for got in [*(await asyncio.gather(*followers)), late]:
        assert [seq for seq, _ in got] == list(range(1, count + 3))
        assert isinstance(got[0][1], RunStarted)
        assert [e.text for _, e in got[1:-1]] == [f"t{i}" for i in range(count)]
        assert isinstance(got[-1][1], RunEnded)


async def test_resuming_after_an_id_gives_the_rest(store: Store, events: StoreEventLog) -> None:
    run_id = await _new_run(store)
    await _write_run(events, store, run_id, 600)  # over two pages
    got = await _collect(events, run_id, 300)
    assert [seq for seq, _ in got] == list(range(301, 603))
    assert isinstance(got[-1][1], RunEnded)


async def test_live_only_follower_gets_a_suffix_ending_with_the_end(
    store: Store, events: StoreEventLog
) -> None:
    run_id = await _new_run(store)
    writer = await events.writer(run_id)
    for i in range(5):
        writer.put(_text(i))
    await writer.flush()
    follower = asyncio.create_task(_collect(events, run_id, None))
    await asyncio.sleep(0.05)
    for i in range(5, 8):
        writer.put(_text(i))
    writer.put(RunEnded(status="completed"))
    await writer.close()
    got = await follower
    seqs = [seq for seq, _ in got]
    assert seqs[-1] == 9
    assert all(seq > 5 for seq in seqs)  # nothing from before it joined
    assert seqs == list(range(seqs[0], 10))


async def test_a_writer_numbers_on_from_the_stored_log(store: Store, events: StoreEventLog) -> None:
    run_id = await _new_run(store)
    first = await events.writer(run_id)
    assert [first.put(_text(i)) for i in range(3)] == [1, 2, 3]
    assert await first.flush() == 3
    taken_over = await events.writer(run_id)  # another worker takes the run over
    assert taken_over.put(RunStarted(run_id=run_id, agent="echo")) == 4
    await taken_over.close()


async def test_events_queued_together_are_stored_in_one_transaction(store: Store) -> None:
    log = _counting(store)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    for i in range(100):  # no await between: the flush task runs once they are all queued
        writer.put(_text(i))
    assert await writer.flush() == 100
    assert log.batches == [100]


async def test_a_run_ended_without_its_end_event_ends_its_followers(
    store: Store, events: StoreEventLog
) -> None:
    run_id = await _new_run(store)
    writer = await events.writer(run_id)
    writer.put(_text(0))
    await writer.close()
    await store.end_run(run_id, "interrupted", None, "the process died")
    assert [seq for seq, _ in await _collect(events, run_id, 0)] == [1]
    assert await _collect(events, run_id, None) == []


# -- bad ids, retention ---------------------------------------------------------------------------


async def test_an_id_beyond_the_log_is_refused(store: Store, events: StoreEventLog) -> None:
    run_id = await _new_run(store)
    writer = await events.writer(run_id)
    writer.put(_text(0))
    await writer.flush()
    with pytest.raises(UnknownEventIdError):  # running: an id not given yet was never given
        await _collect(events, run_id, 5)
    writer.put(RunEnded(status="completed"))
    await writer.close()
    await store.end_run(run_id, "success", None, None)
    with pytest.raises(UnknownEventIdError) as caught:
        await _collect(events, run_id, 3)
    assert caught.value.status_code == 400
    with pytest.raises(UnknownEventIdError):
        await events.check(run_id, 3)
    assert await _collect(events, run_id, 2) == []  # its last id: nothing more, not an error
    assert await _collect(events, run_id, None) == []  # ended: nothing live


async def test_sweep_drops_old_logs_and_says_so(store: Store, events: StoreEventLog) -> None:
    ended, running = await _new_run(store), await _new_run(store)
    for run_id in (ended, running):
        writer = await events.writer(run_id)
        writer.put(_text(0))
        await writer.close()
    await store.end_run(ended, "success", None, None)
    assert await events.sweep(3600) == 0  # not old yet
    assert await events.sweep(0) == 1
    async with store.engine.connect() as conn:
        left = (await conn.execute(select(run_events.c.run_id))).scalars().all()
        expired = (
            await conn.execute(select(runs.c.events_expired).where(runs.c.id == ended))
        ).scalar_one()
    assert left == [running]
    assert expired is True
    with pytest.raises(EventsExpiredError) as caught:
        await _collect(events, ended, 0)
    assert caught.value.status_code == 410
    with pytest.raises(EventsExpiredError):
        await events.check(ended, None)
    assert await events.sweep(0) == 0  # once


# -- PostgreSQL: replicas and the doorbell ---------------------------------------------------------


@pytest.fixture
async def replicas(postgres_db_url: str) -> AsyncIterator[tuple[Store, Store]]:
    one, two = await Store.open(postgres_db_url), await Store.open(postgres_db_url, migrate=False)
    try:
        yield one, two
    finally:
        await one.close()
        await two.close()


async def _put_and_flush(log: StoreEventLog, run_id: str, *events: AgentEvent) -> None:
    writer = await log.writer(run_id)
    for event in events:
        writer.put(event)
    await writer.close()


@asynccontextmanager
async def _writer_and_follower(
    replicas: tuple[Store, Store], *, writer_listens: bool = False
) -> AsyncIterator[tuple[StoreEventLog, StoreEventLog]]:
    """Replica one's log to write with, replica two's to follow with, its doorbell up.

    Only a NOTIFY can wake the follower before a test's bound: it neither polls nor rechecks.
    """
    one, two = replicas
    writing = await StoreEventLog.open(one, listen=writer_listens)
    reading = await StoreEventLog.open(two, poll_interval=SLOW, recheck_interval=SLOW)
    try:
        await _until(lambda: reading.doorbell_up)
        yield writing, reading
    finally:
        await writing.close()
        await reading.close()


async def test_another_replica_follows_through_the_doorbell(
    replicas: tuple[Store, Store],
) -> None:
    one, _ = replicas
    async with _writer_and_follower(replicas, writer_listens=True) as (writing, reading):
        run_id = await _new_run(one)
        follower = asyncio.create_task(_collect(reading, run_id, 0))
        await asyncio.sleep(0.05)
        for i in range(3):
            await _put_and_flush(writing, run_id, _text(i))
        await _put_and_flush(writing, run_id, RunEnded(status="completed"))
        got = await follower
        assert [seq for seq, _ in got] == [1, 2, 3, 4]


async def test_a_replica_listens_only_while_a_reader_follows_there(
    replicas: tuple[Store, Store],
) -> None:
    one, two = replicas
    writing = await StoreEventLog.open(one, listen=False)
    reading = await StoreEventLog.open(
        two, poll_interval=SLOW, recheck_interval=SLOW, listen_linger=0.2
    )
    heard: list[str] = []
    on_notify = reading._on_notify

    def hear(conn: object, pid: int, channel: str, payload: object) -> None:
        heard.append(str(payload))
        on_notify(conn, pid, channel, payload)

    reading._on_notify = hear  # type: ignore[method-assign]
    try:
        await _until(lambda: reading.doorbell_up)
        assert not reading.listening  # nobody follows a run here
        unfollowed, followed = await _new_run(one), await _new_run(one)
        # Its NOTIFY is sent while replica two does not LISTEN: never delivered to it. Had it
        # listened, it would have heard this one before the next (one connection, in order).
        await _put_and_flush(writing, unfollowed, _text(0))
        follower = asyncio.create_task(_collect(reading, followed, 0))
        await _until(lambda: reading.listening)
        await _put_and_flush(writing, followed, _text(0), RunEnded(status="completed"))
        assert [seq for seq, _ in await follower] == [1, 2]  # woken by its doorbell alone
        assert {payload.rpartition(":")[0] for payload in heard} == {followed}
        await _until(lambda: not reading.listening)  # the linger after the last reader
        # UNLISTENed on the server too: this NOTIFY is not heard before the next run's.
        heard.clear()
        await _put_and_flush(writing, unfollowed, _text(1))
        later = await _new_run(one)
        follower = asyncio.create_task(_collect(reading, later, 0))
        await _until(lambda: reading.listening)
        await _put_and_flush(writing, later, RunEnded(status="completed"))
        assert len(await follower) == 1
        assert {payload.rpartition(":")[0] for payload in heard} == {later}
    finally:
        await writing.close()
        await reading.close()


async def _kill_listeners(store: Store) -> int:
    query = text(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name"
    )
    async with store.engine.connect() as conn:
        return len((await conn.execute(query, {"name": LISTENER_NAME})).all())


async def test_followers_get_everything_when_the_listener_is_killed(
    replicas: tuple[Store, Store],
) -> None:
    one, _ = replicas
    async with _writer_and_follower(replicas) as (writing, reading):
        run_id = await _new_run(one)
        seen: list[int] = []

        async def follow() -> None:
            async with asyncio.timeout(WAIT):
                async for seq, _ in reading.follow(run_id, 0):
                    seen.append(seq)

        follower = asyncio.create_task(follow())
        await _put_and_flush(writing, run_id, _text(0), _text(1))
        await _until(lambda: len(seen) == 2)
        assert await _kill_listeners(one) == 1
        await _until(lambda: not reading.doorbell_up)
        # Sent while nobody listens: these NOTIFYs are lost; the store keeps the events.
        await _put_and_flush(writing, run_id, _text(2), _text(3))
        await _until(lambda: reading.doorbell_up)  # back: every follower reads the store
        await _until(lambda: len(seen) == 4)
        await _put_and_flush(writing, run_id, RunEnded(status="completed"))
        await follower
        assert seen == [1, 2, 3, 4, 5]


async def test_followers_poll_while_the_doorbell_is_down(
    replicas: tuple[Store, Store],
) -> None:
    one, two = replicas
    writing = await StoreEventLog.open(one, listen=False)
    reading = StoreEventLog(two, listen=True, poll_interval=0.05, recheck_interval=SLOW)
    # Built without `open`: its doorbell never starts, so it can only poll.
    try:
        assert not reading.doorbell_up
        run_id = await _new_run(one)
        follower = asyncio.create_task(_collect(reading, run_id, 0))
        await _put_and_flush(writing, run_id, _text(0), RunEnded(status="completed"))
        assert [seq for seq, _ in await follower] == [1, 2]
    finally:
        await writing.close()


@contextlib.asynccontextmanager
async def _doorbell_heard(store: Store) -> AsyncIterator[tuple[list[str], StoreEventLog]]:
    """The doorbells heard on `store`'s database (payloads), and a log on it that rings them."""
    heard: list[str] = []
    async with pg_connection(store.engine.url) as conn:
        await conn.add_listener("parley_events", lambda *args: heard.append(args[-1]))
        writing = await StoreEventLog.open(store, listen=False)
        try:
            yield heard, writing
        finally:
            await writing.close()


async def test_the_doorbell_payload_names_the_run_and_its_last_id(
    replicas: tuple[Store, Store],
) -> None:
    one, _ = replicas
    async with _doorbell_heard(one) as (heard, writing):
        run_id = await _new_run(one)
        await _put_and_flush(writing, run_id, *(_text(i) for i in range(50)))
        await _until(lambda: bool(heard))
        await asyncio.sleep(0.1)
        assert heard == [f"{run_id}:50"]  # one NOTIFY for the one flush
        async with one.engine.connect() as db:
            stored = (await db.execute(select(func.count()).select_from(run_events))).scalar_one()
        assert stored == 50


async def test_events_stored_just_after_the_runs_end_still_reach_followers(
    store: Store,
) -> None:
    events = StoreEventLog(store, listen=False, recheck_interval=0.005)  # looks all the time
    run_id = await _new_run(store)
    writer = await events.writer(run_id)
    writer.put(_text(0))
    await writer.flush()
    seen: list[int] = []

    async def follow() -> None:
        async with asyncio.timeout(WAIT):
            async for seq, _ in events.follow(run_id, 0):
                seen.append(seq)

    follower = asyncio.create_task(follow())
    await _until(lambda: seen == [1])
    # A worker that stores its run's end before its writer's last flush.
    await store.end_run(run_id, "completed", None, None)
    await asyncio.sleep(0.05)
    writer.put(_text(1))
    writer.put(RunEnded(status="completed"))
    await writer.close()
    await follower
    assert seen == [1, 2, 3]


async def test_replicas_follow_concurrent_runs_exactly_once(
    replicas: tuple[Store, Store],
) -> None:
    one, _ = replicas
    async with _writer_and_follower(replicas) as (writing, reading):
        run_ids = [await _new_run(one) for _ in range(3)]
        followers = [asyncio.create_task(_collect(reading, r, 0)) for r in run_ids for _ in "ab"]
        await asyncio.gather(*(_write_run(writing, one, r, 100) for r in run_ids))
        for got in await asyncio.gather(*followers):
            assert [seq for seq, _ in got] == list(range(1, 103))
            assert [e.text for _, e in got[1:-1]] == [f"t{i}" for i in range(100)]


# -- batches: the flush interval, and the run's end ---------------------------------------------


async def test_events_wait_the_flush_interval_then_go_in_one_batch(store: Store) -> None:
    log = _counting(store, flush_interval=0.3)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    for i in range(3):
        writer.put(_text(i))
        await asyncio.sleep(0.01)  # the flush task runs between them: it waits for more
    assert log.batches == []  # not before the interval, however fast the store
    await _until(lambda: log.batches == [3])  # counted as it starts: let it commit
    async with asyncio.timeout(WAIT):
        assert await writer.flush() == 3
    assert log.batches == [3]
    assert await _stored_seqs(store, run_id) == [1, 2, 3]


async def test_events_after_a_batch_wait_their_own_interval(store: Store) -> None:
    log = _counting(store, flush_interval=0.3)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    writer.put(_text(0))
    await _until(lambda: log.batches == [1])
    writer.put(_text(1))
    writer.put(_text(2))
    await asyncio.sleep(0.1)
    assert log.batches == [1]  # the second batch waits its interval too
    await _until(lambda: log.batches == [1, 2])  # counted as it starts: let it commit
    async with asyncio.timeout(WAIT):
        assert await writer.flush() == 3
    assert log.batches == [1, 2]
    assert await _stored_seqs(store, run_id) == [1, 2, 3]


async def test_events_waiting_their_interval_make_no_task(store: Store) -> None:
    # A run shorter than the interval (most runs) costs its log no task, no wake-up: only a
    # timer, which its end cancels.
    log = _counting(store, flush_interval=SLOW)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    for i in range(3):
        writer.put(_text(i))
        await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t.get_name() == f"events:{run_id}"] == []
    assert log.batches == []
    async with asyncio.timeout(WAIT):
        assert await writer.flush() == 3  # a flush starts the store at once
    assert log.batches == [3]


async def test_a_flush_stores_at_once_whatever_the_interval(store: Store) -> None:
    log = _counting(store, flush_interval=SLOW)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    writer.put(_text(0))
    await asyncio.sleep(0.01)  # its flush task is waiting out the interval
    async with asyncio.timeout(WAIT):
        assert await writer.flush() == 1
    assert log.batches == [1]


async def test_a_runs_end_stores_its_queued_events_in_its_own_transaction(store: Store) -> None:
    log = _counting(store)
    run_id = await _new_run(store)
    follower = asyncio.create_task(_collect(log, run_id, 0))
    writer = await log.writer(run_id)
    for i in range(5):
        writer.put(_text(i))
    await asyncio.sleep(0.01)
    thread = "t-" + run_id[:8]

    def end(rows: EventRows | None) -> Awaitable[bool]:
        answer = Msg.assistant("done")
        return store.end_run(
            run_id, "success", None, None, last=(thread, "ann", [answer]), events=rows
        )

    assert await writer.end_with([RunEnded(status="completed")], end) is True
    assert log.batches == []  # no transaction of their own: they went with the end
    seqs = [seq for seq, _ in await follower]  # woken by the end's commit
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert await _stored_seqs(store, run_id) == seqs
    record = await store.get_run(run_id, "ann")
    assert record is not None
    assert record.status == "success"
    await writer.close()  # nothing left to store
    assert log.batches == []


async def test_a_fenced_out_end_stores_no_event_and_the_writer_numbers_on(store: Store) -> None:
    log = _counting(store)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    writer.put(_text(0))
    writer.put(_text(1))

    def end(rows: EventRows | None) -> Awaitable[bool]:
        fence = ("another-worker", 1)  # not the worker holding the run
        return store.end_run(run_id, "success", None, None, fence=fence, events=rows)

    assert await writer.end_with([RunEnded(status="completed")], end) is False
    assert await _stored_seqs(store, run_id) == []
    # Its queued events are queued again, the end's id given again.
    assert writer.put(RunEnded(status="interrupted")) == 3
    await writer.close()
    assert await _stored_seqs(store, run_id) == [1, 2, 3]


@pytest.mark.parametrize("answer", [True, False], ids=["with-answer", "no-answer"])
async def test_a_runs_end_is_stored_though_a_lost_worker_took_some_of_its_ids(
    store: Store, answer: bool
) -> None:
    log = _counting(store)
    run_id = await _new_run(store)
    taken_over = await log.writer(run_id, new=True)  # numbered before the late batch landed
    lost = await log.writer(run_id, new=True)  # the worker that lost the run
    lost.put(_text(0))
    lost.put(_text(1))
    await lost.flush()  # its late batch: ids 1 and 2
    for i in range(3):
        taken_over.put(_text(10 + i))
    last = ("t-" + run_id[:8], "ann", [Msg.assistant("done")]) if answer else None

    def end(rows: EventRows | None) -> Awaitable[bool]:
        return store.end_run(run_id, "success", None, None, last=last, events=rows)

    assert await taken_over.end_with([RunEnded(status="completed")], end) is True
    record = await store.get_run(run_id, "ann")
    assert record is not None
    assert record.status == "success"  # the end is stored; ids 1 and 2 keep the late batch's
    assert await _stored_seqs(store, run_id) == [1, 2, 3, 4]


async def _hold(store: Store, run_id: str, worker: str, attempt: int) -> None:
    """The run claimed by `worker` at `attempt` (as the queue's claim does)."""
    async with store.engine.begin() as db:
        held = update(runs).where(runs.c.id == run_id).values(worker_id=worker, attempt=attempt)
        await db.execute(held)


async def _stored_texts(store: Store, run_id: str) -> list[str]:
    async with store.engine.connect() as db:
        query = select(run_events.c.data).where(run_events.c.run_id == run_id)
        rows = (await db.execute(query.order_by(run_events.c.seq))).scalars()
        return [TextDelta.model_validate_json(data).text for data in rows]


async def test_a_worker_that_lost_the_run_stores_no_more_of_its_events(store: Store) -> None:
    log = _counting(store, flush_interval=0)
    run_id = await _new_run(store)
    await _hold(store, run_id, "w1", 1)
    lost = await log.writer(run_id, new=True, fence=("w1", 1))
    lost.put(_text(0))
    assert await lost.flush() == 1
    await _hold(store, run_id, "w2", 2)  # its lease ran out: another worker took the run on
    taken_over = await log.writer(run_id, fence=("w2", 2))  # numbers on from the log: 2
    lost.put(_text(1))  # a late batch, under the id that is the new worker's
    await lost.flush()
    assert lost.lost
    assert await _stored_seqs(store, run_id) == [1]
    lost.put(_text(2))  # dropped: it stores nothing more
    await lost.flush()
    assert log.batches == [1, 1]
    taken_over.put(_text(10))
    taken_over.put(_text(11))
    assert await taken_over.flush() == 3
    assert not taken_over.lost
    assert await _stored_texts(store, run_id) == ["t0", "t10", "t11"]


async def test_a_takeover_waits_for_a_batch_in_flight_then_fences_it_out(
    replicas: tuple[Store, Store],
) -> None:
    """PostgreSQL: a batch that meets a claim under way waits for it, then stores nothing.

    The claim's transaction holds the run's row; the batch's statement, which share-locks
    it, waits, and once the claim commits finds the run held by another. A batch that
    looked at the run without the lock would have read the claim's old row (its snapshot)
    and stored its events under the new worker's ids.
    """
    store, _ = replicas  # PostgreSQL (on SQLite one writer thread: they never overlap)
    log = StoreEventLog(store, flush_interval=0)
    run_id = await _new_run(store)
    await _hold(store, run_id, "w1", 1)
    lost = await log.writer(run_id, new=True, fence=("w1", 1))
    async with pg_connection(store.engine.url) as claim, pg_connection(store.engine.url) as look:
        async with claim.transaction():
            await claim.execute(
                "UPDATE runs SET worker_id = 'w2', attempt = 2 WHERE id = $1", run_id
            )
            lost.put(_text(0))
            flushing = asyncio.create_task(lost.flush())
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%run_events%'"
            )

            async def blocked() -> bool:
                return bool(await look.fetchval(waiting))

            async with asyncio.timeout(WAIT):
                while not await blocked():
                    assert not flushing.done()
                    await asyncio.sleep(0.02)
        async with asyncio.timeout(WAIT):
            await flushing
    assert lost.lost
    assert await _stored_seqs(store, run_id) == []


async def test_an_end_that_fails_stores_no_event_and_keeps_them_queued(store: Store) -> None:
    log = _counting(store)
    run_id = await _new_run(store)
    writer = await log.writer(run_id)
    writer.put(_text(0))

    async def end(rows: EventRows | None) -> bool:
        assert rows is not None
        assert [row["seq"] for row in rows.rows] == [1, 2]
        raise ConnectionError("the database went away")

    with pytest.raises(ConnectionError):
        await writer.end_with([RunEnded(status="completed")], end)
    assert writer.put(RunEnded(status="error")) == 2
    await writer.close()
    assert await _stored_seqs(store, run_id) == [1, 2]
    page = [event async for _, event in log.follow(run_id, 0)]
    assert page[-1] == RunEnded(status="error")


async def test_a_runs_end_rings_the_doorbell_for_its_events(
    replicas: tuple[Store, Store],
) -> None:
    one, _ = replicas
    async with _doorbell_heard(one) as (heard, writing):
        run_id = await _new_run(one)
        writer = await writing.writer(run_id)
        writer.put(_text(0))
        thread = "t-" + run_id[:8]

        def end(rows: EventRows | None) -> Awaitable[bool]:
            answer = Msg.assistant("done")
            last = (thread, "ann", [answer])
            return one.end_run(run_id, "success", None, None, last=last, events=rows)

        assert await writer.end_with([RunEnded(status="completed")], end) is True
        await _until(lambda: bool(heard))
        await asyncio.sleep(0.1)
        assert heard == [f"{run_id}:2"]  # one NOTIFY, sent by the end's own statement
        assert await _stored_seqs(one, run_id) == [1, 2]
        # A run that ends with no answer to store (its end a transaction of statements).
        failed = await _new_run(one)
        writer = await writing.writer(failed)
        writer.put(_text(0))

        def fail(rows: EventRows | None) -> Awaitable[bool]:
            return one.end_run(failed, "error", None, "it broke", events=rows)

        assert await writer.end_with([RunEnded(status="error")], fail) is True
        await _until(lambda: len(heard) == 2)
        assert heard[1] == f"{failed}:2"
        assert await _stored_seqs(one, failed) == [1, 2]
        await writing.close()
