"""What a run spares the store: the run worker is woken by a run's end only when a queued run
may start after it (waking it after every run cost a busy service a poll of the queue, a write
and a read, a run), and a run's first start does not read its empty event log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Engine, event

from parley.messages import Msg
from parley.service.events import StoreEventLog
from parley.service.runs import RunManager
from parley.service.runs_protocol import RunInput
from parley.service.store import Store
from parley.service.store.locks import LocalThreadLocks
from tests.service._agents import echo_agent


@pytest.fixture
async def manager(sqlite_url: str) -> AsyncIterator[RunManager]:
    store = await Store.open(sqlite_url)
    runs = RunManager(store, LocalThreadLocks(), busy_timeout=5)
    try:
        yield runs
    finally:
        await runs.close()
        await store.close()


async def test_a_run_with_nothing_queued_after_it_does_not_wake_the_worker(
    manager: RunManager,
) -> None:
    handle = await manager.start(
        echo_agent(), agent_key="echo", user_id="u", thread_id="t", message=Msg.user("hi")
    )
    await handle.done.wait()
    assert not manager.wake.is_set()


async def test_a_run_queued_during_another_wakes_the_worker_when_it_ends(
    manager: RunManager,
) -> None:
    handle = await manager.start(
        echo_agent(0.05), agent_key="echo", user_id="u", thread_id="t", message=Msg.user("hi")
    )
    # Queued behind it on its thread (this process cannot take it now: the thread is busy).
    record, waiting = await manager.submit(
        agent_key="echo",
        user_id="u",
        thread_id="t",
        run_input=RunInput(message=Msg.user("after you")),
    )
    assert waiting is None
    assert record.status == "pending"
    assert not handle.done.is_set()
    manager.wake.clear()

    await handle.done.wait()
    assert manager.wake.is_set()


async def test_a_first_start_reads_nothing_of_its_empty_event_log(sqlite_url: str) -> None:
    store = await Store.open(sqlite_url)
    events = await StoreEventLog.open(store)
    runs = RunManager(store, LocalThreadLocks(), busy_timeout=5, events=events)
    sent: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    try:
        event.listen(Engine, "before_cursor_execute", seen)
        try:
            handle = await runs.start(
                echo_agent(), agent_key="echo", user_id="u", thread_id="t", message=Msg.user("hi")
            )
            await handle.done.wait()
        finally:
            event.remove(Engine, "before_cursor_execute", seen)
        log = [seq async for seq, _ in events.follow(handle.run_id, 0)]  # (this one reads it)
    finally:
        await runs.close()
        await events.close()
        await store.close()

    assert log == list(range(1, len(log) + 1))  # numbered from 1, none missing
    assert not [s for s in sent if "max(run_events.seq)" in s]
