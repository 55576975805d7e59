"""Durable runs: a run whose worker died is taken over by another worker once its lease
lapses, and finished from its stored thread; a run that keeps losing its worker ends `error`
after `max_attempts`; a worker that lost its lease stops its copy and writes nothing more.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import update

from parley.agents import Agent
from parley.agents.events import AgentEvent, RunEnded, RunStarted, TextDelta
from parley.messages import Msg
from parley.models.testing import ScriptedModel
from parley.service.runs_protocol import EventLog, EventWriter, RunInput
from parley.service.store import Store
from parley.service.store.queue import RunQueue, new_run_id
from parley.service.store.tables import runs
from tests.service._queued import Gated, echo, thread_texts, wait_status
from tests.service._support import wait_for, wait_for_run
from tests.service.conftest import MakeService
from tests.service.test_postgres import service_popen

pytestmark = [pytest.mark.usefixtures("no_ambient_settings"), pytest.mark.timeout(120)]


async def _orphan(store: Store, question: str, *, thread_id: str = "t") -> str:
    """A run a worker started (its question stored) and then died with: its lease lapsed."""
    dead = RunQueue(store, worker_id="dead-worker", lease_seconds=30, max_attempts=9)
    run_id = new_run_id()
    message = Msg.user(question)
    # Reserved: the live service's worker cannot take it before the dead one does.
    await dead.create(
        run_id, thread_id, "local", "helper", "m", RunInput(message=message), reserve=True
    )
    assert await dead.claim(run_id, then=lambda _h, _r: [message]) is not None
    past = datetime(2000, 1, 1, tzinfo=UTC)
    await store.transact(
        lambda conn: conn.execute(update(runs).where(runs.c.id == run_id).values(lease_until=past))
    )
    return run_id


async def test_a_run_whose_worker_died_is_taken_over_and_finished(service: MakeService) -> None:
    model = ScriptedModel([echo])
    svc = await service(Agent("helper", model))
    run_id = await _orphan(svc.state.store, "still there?")
    assert await wait_status(svc.client, run_id, "completed") == "completed"
    record = (await svc.client.get(f"/runs/{run_id}")).json()
    assert record["attempt"] == 2
    # The question was stored once (by the first attempt), the answer once (by the second).
    assert await thread_texts(svc.client, "t") == [
        "user: still there?",
        "assistant: echo: still there?",
    ]


async def test_a_run_that_keeps_losing_its_worker_ends_error_with_the_reason(
    service: MakeService,
) -> None:
    model = ScriptedModel([echo])
    svc = await service(Agent("helper", model), max_attempts=1)
    run_id = await _orphan(svc.state.store, "doomed")
    assert await wait_status(svc.client, run_id, "error") == "error"
    record = (await svc.client.get(f"/runs/{run_id}")).json()
    assert "started 1 times" in record["error"]
    assert "PARLEY_MAX_ATTEMPTS" in record["error"]
    assert model.requests == []  # never run again


async def test_a_worker_that_lost_its_lease_stops_and_writes_nothing(
    service: MakeService,
) -> None:
    model = Gated(echo)
    svc = await service(Agent("helper", model))
    invoke = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "mine?", "thread_id": "t"})
    )
    handle = await wait_for_run(svc.state)
    await wait_for(model.at_gate.is_set, "the run to stream part of its answer")
    # Another worker took the run over (as after this worker's lease lapsed).
    await svc.state.store.transact(
        lambda conn: conn.execute(
            update(runs)
            .where(runs.c.id == handle.run_id)
            .values(worker_id="other-worker", attempt=runs.c.attempt + 1)
        )
    )
    await svc.state.runs.renew()  # this worker learns it lost the run
    answered = await invoke
    assert answered.status_code == 200
    record = await svc.state.store.get_run(handle.run_id, "local")
    assert record is not None
    assert (record.status, record.worker_id, record.attempt) == ("running", "other-worker", 2)
    assert await thread_texts(svc.client, "t") == ["user: mine?"]  # no partial answer written


def _status(url: str, run_id: str) -> str:
    status: str = httpx.get(f"{url}/runs/{run_id}", timeout=5).json()["status"]
    return status


def test_a_replica_killed_mid_run_has_its_run_finished_by_another(postgres_db_url: str) -> None:
    with (
        service_popen(postgres_db_url, delay=0.5, PARLEY_LEASE_SECONDS="2") as (first, doomed),
        service_popen(postgres_db_url, delay=0.5, PARLEY_LEASE_SECONDS="2") as (
            second,
            _,
        ),
    ):
        made = httpx.post(f"{first}/runs", json={"message": "hello", "thread_id": "t"}, timeout=10)
        assert made.status_code == 202
        run_id = made.json()["run_id"]
        deadline = time.monotonic() + 10
        while _status(first, run_id) != "running":  # the replica that made it runs it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.6)  # part of its answer streamed (one chunk every half second)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)

        joined = httpx.get(f"{second}/runs/{run_id}/join", params={"timeout": 60}, timeout=70)
        assert joined.status_code == 200
        record = joined.json()
        assert record["status"] == "completed"
        assert record["attempt"] == 2
        thread = httpx.get(f"{second}/threads/t", timeout=5).json()
        texts = [(m["role"], m["content"][0]["text"]) for m in thread["messages"]]
        assert texts == [("user", "hello"), ("assistant", "turn 1: hello")]


@pytest.mark.parametrize(("idempotent", "sent"), [(False, 0), (True, 1)])
async def test_a_takeover_reruns_an_interrupted_call_only_if_its_tool_is_idempotent(
    service: MakeService, idempotent: bool, sent: int
) -> None:
    from parley.tools import tool  # noqa: PLC0415

    calls: list[str] = []

    @tool(idempotent=idempotent)
    async def send(text: str) -> str:
        """Send a message."""
        calls.append(text)
        return "sent"

    model = ScriptedModel(["done"])
    svc = await service(Agent("helper", model, tools=[send]))
    store = svc.state.store
    run_id = await _orphan(store, "send hi")
    # The dead worker had stored the model's call, and died before the tool's result.
    call = ScriptedModel.tool_call("send", {"text": "hi"}, call_id="call_1").content[0]
    await store.add_messages("t", "local", [Msg.assistant(call)], run_id)
    assert await wait_status(svc.client, run_id, "completed") == "completed"
    assert len(calls) == sent
    stored = [m for m, _ in await store.get_messages("t", "local")]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1].text == "done"
    result = stored[2].tool_results[0]
    assert result.is_error is (not idempotent)


class _Writer(EventWriter):
    """Keeps what a run's worker puts, and what the store said of the run at close."""

    def __init__(self, log: _Log, run_id: str) -> None:
        self.log, self.run_id = log, run_id
        self.events: list[AgentEvent] = []
        self.status_at_close: str | None = None

    def put(self, event: AgentEvent) -> int:
        self.events.append(event)
        return len(self.events)

    async def flush(self) -> int:
        return len(self.events)

    async def close(self) -> None:
        record = await self.log.store.get_run(self.run_id, "local")
        self.status_at_close = record.status if record is not None else None


class _Log(EventLog):
    """An event log that records its writers (the store's own is the `events` work's)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.writers: dict[str, _Writer] = {}

    async def writer(
        self, run_id: str, *, new: bool = False, fence: tuple[str, int] | None = None
    ) -> EventWriter:
        self.writers[run_id] = _Writer(self, run_id)
        return self.writers[run_id]

    def follow(self, run_id: str, after: int | None) -> AsyncIterator[tuple[int, AgentEvent]]:
        raise NotImplementedError

    async def sweep(self, retention: float) -> int:
        return 0


async def test_the_event_log_gets_every_event_and_the_end_once_stored(
    service: MakeService,
) -> None:
    svc = await service(Agent("helper", ScriptedModel([echo, echo])))
    log = _Log(svc.state.store)
    svc.state.runs.events = log
    answered = await svc.client.post("/invoke", json={"message": "a", "thread_id": "t"})
    run_id = answered.headers["X-Run-Id"]
    orphan = await _orphan(svc.state.store, "b", thread_id="u")
    await wait_status(svc.client, orphan, "completed")

    for ran, attempt in ((run_id, 1), (orphan, 2)):
        writer = await wait_for(lambda r=ran: log.writers.get(r), "the run's writer")
        await wait_for(lambda w=writer: w.status_at_close, "the writer to be closed")
        first, last = writer.events[0], writer.events[-1]
        assert isinstance(first, RunStarted)
        assert first.attempt == attempt  # a takeover says which start it is
        assert isinstance(last, RunEnded)
        assert last.status == "completed"
        assert writer.status_at_close == "completed"  # stored before RunEnded was told
        assert any(isinstance(e, TextDelta) for e in writer.events)
