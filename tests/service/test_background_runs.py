"""Background runs (`POST /runs`): queued at once (202, `pending`), run by a worker in their
thread's order, listed, read, joined (from any replica), cancelled and deleted; every lookup
is the caller's own.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from tests.service._queued import Gated, echo, thread_texts, wait_status
from tests.service._support import wait_for
from tests.service.conftest import MakeService

pytestmark = [pytest.mark.usefixtures("no_ambient_settings"), pytest.mark.timeout(90)]


async def test_a_background_run_is_queued_at_once_then_runs_and_can_be_joined(
    service: MakeService,
) -> None:
    model = Gated(echo)
    svc = await service(Agent("helper", model))
    made = await svc.client.post("/runs", json={"message": "hello", "thread_id": "t"})
    assert made.status_code == 202
    run = made.json()
    assert run["status"] == "pending"
    assert run["thread_id"] == "t"
    assert made.headers["X-Run-Id"] == run["run_id"]
    assert await wait_status(svc.client, run["run_id"], "running") == "running"

    join = asyncio.create_task(svc.client.get(f"/runs/{run['run_id']}/join"))
    await asyncio.sleep(0.2)
    assert not join.done()  # it waits for the run's end
    model.gate.set()
    joined = await join
    assert joined.status_code == 200
    ended = json.loads(joined.text)
    assert ended["status"] == "completed"
    assert ended["attempt"] == 1
    assert await thread_texts(svc.client, "t") == ["user: hello", "assistant: echo: hello"]
    # Joining an ended run answers at once, with the same record.
    again = json.loads((await svc.client.get(f"/runs/{run['run_id']}/join")).text)
    assert again == ended


async def test_enqueued_runs_wait_their_turn_and_run_in_order(service: MakeService) -> None:
    model = Gated(echo, echo, echo)
    svc = await service(Agent("helper", model))
    ids = []
    for text in ("one", "two", "three"):
        made = await svc.client.post("/runs", json={"message": text, "thread_id": "t"})
        assert made.status_code == 202
        ids.append(made.json()["run_id"])
    await wait_status(svc.client, ids[0], "running")
    listed = (await svc.client.get("/runs", params={"thread_id": "t"})).json()
    assert [r["run_id"] for r in listed] == ids[::-1]  # newest first
    assert [r["status"] for r in listed] == ["pending", "pending", "running"]
    assert [r["multitask_strategy"] for r in listed] == ["enqueue"] * 3

    model.gate.set()
    for run_id in ids:
        assert await wait_status(svc.client, run_id, "completed") == "completed"
    assert model.asked == ["one", "two", "three"]
    assert await thread_texts(svc.client, "t") == [
        "user: one",
        "assistant: echo: one",
        "user: two",
        "assistant: echo: two",
        "user: three",
        "assistant: echo: three",
    ]


async def test_reject_refuses_a_busy_thread_at_once(service: MakeService) -> None:
    model = Gated(echo)
    svc = await service(Agent("helper", model))
    first = (await svc.client.post("/runs", json={"message": "a", "thread_id": "t"})).json()
    await wait_status(svc.client, first["run_id"], "running")
    refused = await svc.client.post(
        "/runs", json={"message": "b", "thread_id": "t", "multitask_strategy": "reject"}
    )
    assert refused.status_code == 409
    assert "enqueue" in refused.json()["detail"]
    model.gate.set()


async def test_cancel_a_waiting_run_ends_it_without_running_it(service: MakeService) -> None:
    model = Gated(echo, echo)
    svc = await service(Agent("helper", model))
    first = (await svc.client.post("/runs", json={"message": "a", "thread_id": "t"})).json()
    second = (await svc.client.post("/runs", json={"message": "b", "thread_id": "t"})).json()
    await wait_status(svc.client, first["run_id"], "running")
    cancelled = await svc.client.post(f"/runs/{second['run_id']}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "interrupted"
    model.gate.set()
    await wait_status(svc.client, first["run_id"], "completed")
    await asyncio.sleep(0.3)  # a worker poll or two: the cancelled run must stay ended
    assert model.asked == ["a"]
    assert await thread_texts(svc.client, "t") == ["user: a", "assistant: echo: a"]


async def test_cancel_with_rollback_deletes_the_run_and_its_messages(
    service: MakeService,
) -> None:
    model = Gated(echo, echo)
    svc = await service(Agent("helper", model))
    model.before = 10**9
    await svc.client.post("/invoke", json={"message": "kept", "thread_id": "t"})
    model.before = 3  # the next run stops part-way
    run = (await svc.client.post("/runs", json={"message": "undo me", "thread_id": "t"})).json()
    await wait_for(model.at_gate.is_set, "the run to stream part of its answer")
    await wait_status(svc.client, run["run_id"], "running")
    cancelled = await svc.client.post(
        f"/runs/{run['run_id']}/cancel", params={"action": "rollback"}
    )
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "interrupted"
    assert (await svc.client.get(f"/runs/{run['run_id']}")).status_code == 404
    assert await thread_texts(svc.client, "t") == ["user: kept", "assistant: echo: kept"]


async def test_delete_cancels_a_running_run_then_deletes_it(service: MakeService) -> None:
    model = Gated(echo, "next")
    svc = await service(Agent("helper", model))
    run = (await svc.client.post("/runs", json={"message": "a", "thread_id": "t"})).json()
    # In the model's answer, not merely claimed: else the delete stops it before it asks the
    # model, and the model's first answer goes to the next run.
    await wait_for(model.at_gate.is_set, "the run to stream part of its answer")
    await wait_status(svc.client, run["run_id"], "running")
    deleted = await svc.client.delete(f"/runs/{run['run_id']}")
    assert deleted.status_code == 204
    assert (await svc.client.get(f"/runs/{run['run_id']}")).status_code == 404
    assert (await svc.client.delete(f"/runs/{run['run_id']}")).status_code == 404
    model.gate.set()
    nxt = await svc.client.post("/invoke", json={"message": "b", "thread_id": "t"})
    assert nxt.status_code == 200  # the thread is free again
    assert nxt.json()["content"] == "next"


async def test_unknown_and_other_users_runs_and_threads_are_404(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel([echo] * 5)), api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    as_alice = {"Authorization": f"Bearer {alice}"}
    as_bob = {"Authorization": f"Bearer {bob}"}
    made = await svc.client.post(
        "/runs", json={"message": "mine", "thread_id": "t"}, headers=as_alice
    )
    run_id = made.json()["run_id"]
    await wait_status(svc.client, run_id, "completed", headers=as_alice)
    for method, path in (
        ("GET", f"/runs/{run_id}"),
        ("GET", f"/runs/{run_id}/join"),
        ("POST", f"/runs/{run_id}/cancel"),
        ("DELETE", f"/runs/{run_id}"),
    ):
        answer = await svc.client.request(method, path, headers=as_bob)
        assert answer.status_code == 404, (method, path)
        unknown_path = path.replace(run_id, "run_nope")
        unknown = await svc.client.request(method, unknown_path, headers=as_alice)
        assert unknown.status_code == 404, (method, path)
    assert (
        await svc.client.get("/runs", params={"thread_id": "t"}, headers=as_bob)
    ).status_code == 404
    listed = await svc.client.get("/runs", params={"thread_id": "t"}, headers=as_alice)
    assert [r["run_id"] for r in listed.json()] == [run_id]
    # Bob's run on his own thread `t` is another thread: Alice's is untouched.
    bobs = await svc.client.post("/runs", json={"message": "his", "thread_id": "t"}, headers=as_bob)
    await wait_status(svc.client, bobs.json()["run_id"], "completed", headers=as_bob)
    assert await thread_texts(svc.client, "t", headers=as_alice) == [
        "user: mine",
        "assistant: echo: mine",
    ]


async def test_an_unknown_agent_is_404_and_a_bad_strategy_422(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel([echo])))
    unknown = await svc.client.post("/runs", json={"message": "a", "agent": "nobody"})
    assert unknown.status_code == 404
    bad = await svc.client.post("/runs", json={"message": "a", "multitask_strategy": "later"})
    assert bad.status_code == 422


async def test_a_run_made_on_one_replica_is_run_by_another_and_joined_from_the_first(
    service: MakeService, postgres_db_url: str
) -> None:
    # The first replica takes no runs (run_concurrency 0): a worker of the second does.
    front = await service(
        Agent("helper", ScriptedModel([echo])), database_url=postgres_db_url, run_concurrency=0
    )
    back = await service(Agent("helper", ScriptedModel([echo])), database_url=postgres_db_url)
    made = await front.client.post("/runs", json={"message": "far", "thread_id": "t"})
    assert made.status_code == 202
    run_id = made.json()["run_id"]
    joined = json.loads((await front.client.get(f"/runs/{run_id}/join")).text)
    assert joined["status"] == "completed"
    assert await thread_texts(front.client, "t") == ["user: far", "assistant: echo: far"]
    record = await front.state.store.get_run(run_id, "local")
    assert record is not None
    assert record.worker_id == back.state.runs.worker_id  # the second replica ran it


async def test_two_replicas_run_one_threads_queue_once_each_and_in_order(
    service: MakeService, postgres_db_url: str
) -> None:
    replicas = [
        await service(Agent("helper", ScriptedModel([echo] * 10)), database_url=postgres_db_url)
        for _ in range(2)
    ]
    texts = [f"q{i}" for i in range(6)]
    ids = []
    for i, text in enumerate(texts):  # alternately to each replica: both workers compete
        made = await replicas[i % 2].client.post(
            "/runs", json={"message": text, "thread_id": "shared"}
        )
        ids.append(made.json()["run_id"])
    for run_id in ids:
        assert await wait_status(replicas[0].client, run_id, "completed", timeout=30)
    records = [await replicas[0].state.store.get_run(r, "local") for r in ids]
    assert all(r is not None and r.attempt == 1 for r in records)  # none ran twice
    expected = [line for t in texts for line in (f"user: {t}", f"assistant: echo: {t}")]
    assert await thread_texts(replicas[1].client, "shared") == expected


async def test_a_replica_takes_no_more_queued_runs_than_its_run_concurrency(
    service: MakeService,
) -> None:
    model = Gated(echo, echo)
    svc = await service(Agent("helper", model), run_concurrency=1)
    first = (await svc.client.post("/runs", json={"message": "a", "thread_id": "t1"})).json()
    second = (await svc.client.post("/runs", json={"message": "b", "thread_id": "t2"})).json()
    await wait_status(svc.client, first["run_id"], "running")
    await asyncio.sleep(1.2)  # two polls of the worker: the second thread is free, yet
    assert await wait_status(svc.client, second["run_id"], "pending") == "pending"
    model.gate.set()
    assert await wait_status(svc.client, second["run_id"], "completed") == "completed"
    assert model.asked == ["a", "b"]
