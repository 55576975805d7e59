"""Several runs on one thread (`multitask_strategy`): `reject` (409 as before), `enqueue`
(after the current run, in order), `interrupt` (stop it, keep its partial answer; waiting
runs are interrupted too) and `rollback` (stop it, delete it and its messages), on the
toolkit's `/invoke` and `/stream` and on background runs; and `on_disconnect`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.service._live import running
from tests.service._queued import Gated, echo, thread_texts, wait_status
from tests.service._support import wait_for, wait_for_run
from tests.service.conftest import MakeService

pytestmark = [pytest.mark.usefixtures("no_ambient_settings"), pytest.mark.timeout(90)]


async def test_reject_stays_409_after_the_busy_timeout(service: MakeService) -> None:
    model = Gated(echo)
    svc = await service(Agent("helper", model), busy_timeout=0)
    first = asyncio.create_task(svc.client.post("/invoke", json={"message": "a", "thread_id": "t"}))
    await wait_for_run(svc.state)
    body = {"message": "b", "thread_id": "t", "multitask_strategy": "reject"}
    refused = await svc.client.post("/invoke", json=body)
    assert refused.status_code == 409
    model.gate.set()
    assert (await first).status_code == 200


async def test_enqueue_on_invoke_waits_its_turn_past_the_busy_timeout(
    service: MakeService,
) -> None:
    model = Gated(echo, echo, echo)
    svc = await service(Agent("helper", model), busy_timeout=0)
    first = asyncio.create_task(svc.client.post("/invoke", json={"message": "a", "thread_id": "t"}))
    await wait_for_run(svc.state)
    queued = [
        asyncio.create_task(
            svc.client.post(
                "/invoke",
                json={"message": text, "thread_id": "t", "multitask_strategy": "enqueue"},
            )
        )
        for text in ("b", "c")
    ]
    await wait_for(lambda: len(svc.state.runs.waiting) == 2, "both runs to be queued")
    model.gate.set()
    answers = [await first, *[await q for q in queued]]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json()["content"] for a in answers] == ["echo: a", "echo: b", "echo: c"]
    assert model.asked == ["a", "b", "c"]
    assert await thread_texts(svc.client, "t") == [
        "user: a",
        "assistant: echo: a",
        "user: b",
        "assistant: echo: b",
        "user: c",
        "assistant: echo: c",
    ]


async def test_interrupt_stops_the_current_run_and_the_waiting_ones(service: MakeService) -> None:
    model = Gated(echo, "fresh answer")
    svc = await service(Agent("helper", model))
    current = (await svc.client.post("/runs", json={"message": "long", "thread_id": "t"})).json()
    waiting = (await svc.client.post("/runs", json={"message": "next", "thread_id": "t"})).json()
    await wait_for(model.at_gate.is_set, "the current run to stream part of its answer")
    model.pass_later_runs()
    new = await svc.client.post(
        "/invoke",
        json={"message": "now", "thread_id": "t", "multitask_strategy": "interrupt"},
    )
    assert new.status_code == 200
    assert new.json()["content"] == "fresh answer"
    assert await wait_status(svc.client, current["run_id"], "interrupted") == "interrupted"
    assert await wait_status(svc.client, waiting["run_id"], "interrupted") == "interrupted"
    assert model.asked == ["long", "now"]  # the waiting run never ran
    texts = await thread_texts(svc.client, "t")
    assert texts[0] == "user: long"
    assert texts[1] == "assistant: ech"  # the partial answer is kept
    assert texts[2:] == ["user: now", "assistant: fresh answer"]


async def test_rollback_stops_the_current_run_and_removes_it_and_its_messages(
    service: MakeService,
) -> None:
    model = Gated("kept answer", echo, "after rollback")
    svc = await service(Agent("helper", model))
    model.before = 10**9
    await svc.client.post("/invoke", json={"message": "first", "thread_id": "t"})
    model.before = 3
    doomed = (await svc.client.post("/runs", json={"message": "undo", "thread_id": "t"})).json()
    await wait_for(model.at_gate.is_set, "the run to stream part of its answer")
    model.pass_later_runs()
    body = {"message": "instead", "thread_id": "t", "multitask_strategy": "rollback"}
    replaced = await svc.client.post("/runs", json=body)
    assert replaced.status_code == 202
    await wait_status(svc.client, replaced.json()["run_id"], "completed")
    assert (await svc.client.get(f"/runs/{doomed['run_id']}")).status_code == 404
    assert await thread_texts(svc.client, "t") == [
        "user: first",
        "assistant: kept answer",
        "user: instead",
        "assistant: after rollback",
    ]


async def test_a_stream_with_enqueue_streams_once_its_turn_comes(service: MakeService) -> None:
    model = Gated(echo, echo)
    svc = await service(Agent("helper", model))
    first = asyncio.create_task(svc.client.post("/invoke", json={"message": "a", "thread_id": "t"}))
    await wait_for_run(svc.state)
    body = {"message": "b", "thread_id": "t", "multitask_strategy": "enqueue", "events": "parley"}

    async def read() -> list[str]:
        async with svc.client.stream("POST", "/stream", json=body) as response:
            assert response.status_code == 200
            return [line async for line in response.aiter_lines() if line.startswith("data:")]

    streamed = asyncio.create_task(read())
    await wait_for(lambda: len(svc.state.runs.waiting) == 1, "the stream's run to be queued")
    model.gate.set()
    await first
    lines = await streamed
    assert '"type":"run_started"' in lines[0]
    assert any('"type":"run_ended"' in line and '"completed"' in line for line in lines)
    assert lines[-1] == "data: [DONE]"


async def _first_data(lines: Any) -> str:
    async with asyncio.timeout(10):
        async for line in lines:
            if line.startswith("data: {") and '"type":"token"' in line:
                return str(line)
    raise AssertionError("no token came")


@pytest.mark.parametrize(
    ("on_disconnect", "status"), [("cancel", "interrupted"), ("continue", "completed")]
)
async def test_on_disconnect_decides_what_a_client_leaving_a_stream_does(
    sqlite_url: str, on_disconnect: str, status: str
) -> None:
    answer = " ".join(f"w{i}" for i in range(300))
    model = ScriptedModel([answer], chunk_size=1, chunk_delay=0.005)
    app = create_app(ServiceSettings(database_url=sqlite_url), agents=[Agent("helper", model)])
    with running(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "talk", "thread_id": "t", "on_disconnect": on_disconnect}
            async with client.stream("POST", "/stream", json=body) as response:
                run_id = response.headers["X-Run-Id"]
                await _first_data(response.aiter_lines())
            # Left with the stream half read.
            ended = await wait_status(client, run_id, "interrupted", "completed", timeout=20)
            assert ended == status
            texts = await thread_texts(client, "t")
            assert (texts[-1] == f"assistant: {answer}") is (status == "completed")
