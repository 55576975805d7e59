"""Threads: listed newest first a page at a time, read whole, deleted; ids the client chooses.

Every response about a thread names it (`X-Thread-Id`); a run's also names the run.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from sqlalchemy import update

from parley.agents import Agent
from parley.messages import Msg
from parley.models.testing import ScriptedModel
from parley.service.store.locks import Lease
from parley.service.store.tables import threads
from tests.service._support import frames, run_records, wait_for, wait_for_run
from tests.service.conftest import MakeService, Service


def _echo(prefix: str = "echo") -> ScriptedModel:
    """A model that answers every call with the last user message (as many calls as asked)."""
    model = ScriptedModel()
    model.add(*[lambda request: f"{prefix}: {request.messages[-1].text}"] * 200)
    return model


async def _service(service: MakeService, **settings: object) -> Service:
    return await service(Agent("helper", _echo()), **settings)


async def _new_thread(svc: Service, message: str, thread_id: str | None = None) -> str:
    body = (
        {"message": message} if thread_id is None else {"message": message, "thread_id": thread_id}
    )
    response = await svc.client.post("/invoke", json=body)
    assert response.status_code == 200, response.text
    made: str = response.json()["thread_id"]
    return made


# -- listing -----------------------------------------------------------------------------------


async def test_threads_are_listed_newest_first_with_titles(service: MakeService) -> None:
    svc = await _service(service)
    first = await _new_thread(svc, "What is the capital of France?")
    second = await _new_thread(svc, "  Tell me\n a   joke  ")
    long_question = "Explain " + "very " * 40 + "carefully"
    third = await _new_thread(svc, long_question)

    listed = await svc.client.get("/threads")
    assert listed.status_code == 200
    page = listed.json()
    assert page["next"] is None
    infos = page["threads"]
    assert [t["thread_id"] for t in infos] == [third, second, first]
    titles = [t["title"] for t in infos]
    assert titles[2] == "What is the capital of France?"
    assert titles[1] == "Tell me a joke"  # whitespace folded
    assert titles[0].endswith("…")
    assert len(titles[0]) <= 80
    assert " ".join(long_question.split()).startswith(titles[0].removesuffix("…"))
    for info in infos:
        assert set(info) == {"thread_id", "title", "agent", "created_at", "updated_at", "status"}
        assert info["agent"] == "helper"
        assert info["status"] == "idle"
        assert datetime.fromisoformat(info["updated_at"]).utcoffset() is not None

    # Talking in the oldest thread makes it the newest; its title stays its first question.
    await _new_thread(svc, "And Germany?", first)
    again = (await svc.client.get("/threads")).json()["threads"]
    assert [t["thread_id"] for t in again] == [first, third, second]
    assert again[0]["title"] == "What is the capital of France?"


async def _page_through(svc: Service, limit: int) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["before"] = cursor
        response = await svc.client.get("/threads", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        pages += 1
        assert len(page["threads"]) <= limit
        seen.extend(t["thread_id"] for t in page["threads"])
        cursor = page["next"]
        if cursor is None:
            return seen, pages
        assert pages < 100, "the cursor never ends"


async def test_pages_cover_every_thread_once_in_order(service: MakeService) -> None:
    svc = await _service(service)
    made = [await _new_thread(svc, f"question {i}") for i in range(23)]
    newest_first = list(reversed(made))

    for limit in (1, 5, 7, 23, 100):
        seen, pages = await _page_through(svc, limit)
        assert seen == newest_first, f"limit {limit}"
        assert pages == -(-23 // limit)  # ceil: no empty page at the end
    # A full last page still says there is no next one.
    exact = (await svc.client.get("/threads", params={"limit": 23})).json()
    assert exact["next"] is None


async def test_pages_hold_with_threads_updated_at_the_same_instant(service: MakeService) -> None:
    svc = await _service(service)
    made = [await _new_thread(svc, f"question {i}", f"t-{i:02d}") for i in range(12)]
    same = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    async with svc.state.store.engine.begin() as conn:
        await conn.execute(
            update(threads).where(threads.c.id.in_(made[3:9])).values(updated_at=same)
        )

    expected = [
        t["thread_id"] for t in (await svc.client.get("/threads?limit=100")).json()["threads"]
    ]
    assert sorted(expected[:6]) == sorted(made[3:9])  # the future ones first, ties by id
    for limit in (1, 2, 4, 5):
        seen, _ = await _page_through(svc, limit)
        assert seen == expected, f"limit {limit}"
        assert sorted(seen) == sorted(made)


@pytest.mark.parametrize("cursor", ["not a cursor", "bm90LWEtZGF0ZXxmb28=", "%%%", "YQ"])
async def test_a_bad_cursor_is_422(service: MakeService, cursor: str) -> None:
    svc = await _service(service)
    await _new_thread(svc, "hi")
    response = await svc.client.get("/threads", params={"before": cursor})
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["query", "before"]


@pytest.mark.parametrize("limit", ["0", "-1", "101", "many"])
async def test_limit_out_of_bounds_is_422(service: MakeService, limit: str) -> None:
    svc = await _service(service)
    response = await svc.client.get("/threads", params={"limit": limit})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "limit"]


async def test_limit_bounds_themselves_are_fine(service: MakeService) -> None:
    svc = await _service(service)
    await _new_thread(svc, "hi")
    for limit in (1, 100):
        response = await svc.client.get("/threads", params={"limit": limit})
        assert response.status_code == 200
        assert len(response.json()["threads"]) == 1


# -- reading -----------------------------------------------------------------------------------


async def test_thread_detail_has_the_messages_as_msg_json(service: MakeService) -> None:
    svc = await _service(service)
    thread_id = await _new_thread(svc, "first question")
    await _new_thread(svc, "second question", thread_id)

    response = await svc.client.get(f"/threads/{thread_id}")
    assert response.status_code == 200
    assert response.headers["X-Thread-Id"] == thread_id
    detail = response.json()
    assert detail["thread_id"] == thread_id
    assert detail["title"] == "first question"
    assert detail["status"] == "idle"
    assert detail["pending"] == []
    msgs = [Msg.model_validate(m) for m in detail["messages"]]
    stored = [m for m, _ in await svc.state.store.get_messages(thread_id, "local")]
    assert msgs == stored
    assert [(m.role, m.text) for m in msgs] == [
        ("user", "first question"),
        ("assistant", "echo: first question"),
        ("user", "second question"),
        ("assistant", "echo: second question"),
    ]


async def test_an_unknown_thread_is_404(service: MakeService) -> None:
    svc = await _service(service)
    for response in (
        await svc.client.get("/threads/nope"),
        await svc.client.delete("/threads/nope"),
    ):
        assert response.status_code == 404
        assert "nope" in response.json()["detail"]
    history = await svc.client.post("/history", json={"thread_id": "nope"})
    assert history.status_code == 200
    assert history.json() == {"messages": [], "thread_id": "nope"}


# -- deleting ----------------------------------------------------------------------------------


async def test_delete_removes_messages_runs_and_feedback(service: MakeService) -> None:
    svc = await _service(service)
    store = svc.state.store
    answer = await svc.client.post("/invoke", json={"message": "hi", "thread_id": "doomed"})
    run_id = answer.headers["X-Run-Id"]
    feedback = {"run_id": run_id, "key": "stars", "score": 1.0, "kwargs": {"comment": "good"}}
    assert (await svc.client.post("/feedback", json=feedback)).status_code == 200
    kept = await _new_thread(svc, "keep me", "kept")
    assert len(await store.get_feedback(run_id)) == 1

    deleted = await svc.client.delete("/threads/doomed")
    assert deleted.status_code == 204
    assert deleted.content == b""

    assert await store.get_thread("doomed", "local") is None
    assert await store.get_messages("doomed", "local") == []
    assert await run_records(store, "doomed") == []
    assert await store.get_run(run_id, "local") is None
    assert await store.get_feedback(run_id) == []
    assert (await svc.client.get("/threads/doomed")).status_code == 404
    assert (await svc.client.delete("/threads/doomed")).status_code == 404
    assert (await svc.client.get(f"/runs/{run_id}")).status_code == 404
    # The other thread is untouched.
    assert len(await store.get_messages(kept, "local")) == 2
    listed = (await svc.client.get("/threads")).json()["threads"]
    assert [t["thread_id"] for t in listed] == ["kept"]
    # The id is free again.
    again = await svc.client.post("/invoke", json={"message": "reborn", "thread_id": "doomed"})
    assert again.status_code == 200
    assert [m.text for m, _ in await store.get_messages("doomed", "local")] == [
        "reborn",
        "echo: reborn",
    ]


async def test_a_thread_with_a_run_going_cannot_be_deleted(service: MakeService) -> None:
    model = ScriptedModel(["slow " * 200], chunk_size=1, chunk_delay=0.01)
    svc = await service(Agent("slow", model))
    invoke = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "hi", "thread_id": "busy"})
    )
    handle = await wait_for_run(svc.state)

    listed = (await svc.client.get("/threads")).json()["threads"]
    assert listed[0]["status"] == "running"
    refused = await svc.client.delete("/threads/busy")
    assert refused.status_code == 409
    assert "cancel" in refused.json()["detail"]

    cancelled = await svc.client.post(f"/runs/{handle.run_id}/cancel")
    assert cancelled.json()["status"] == "interrupted"
    assert (await invoke).status_code == 200
    assert (await svc.client.delete("/threads/busy")).status_code == 204


async def test_a_thread_is_not_deleted_while_a_run_takes_it(service: MakeService) -> None:
    svc = await _service(service, api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    as_alice = {"Authorization": f"Bearer {alice}"}
    as_bob = {"Authorization": f"Bearer {bob}"}
    made = await svc.client.post(
        "/invoke", json={"message": "hi", "thread_id": "t"}, headers=as_alice
    )
    assert made.status_code == 200
    # A run holds the thread's lock before it is recorded as running (while it starts).
    lease = await svc.state.locks.acquire("t", "alice", 1)
    try:
        refused = await svc.client.delete("/threads/t", headers=as_alice)
        assert refused.status_code == 409
        # Another user learns nothing from a busy thread either.
        assert (await svc.client.delete("/threads/t", headers=as_bob)).status_code == 404
    finally:
        await lease.release()
    assert (await svc.client.delete("/threads/t", headers=as_alice)).status_code == 204


async def test_a_message_waiting_on_a_thread_deleted_meanwhile_starts_it_again(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = await _service(service)
    store, locks = svc.state.store, svc.state.locks
    await _new_thread(svc, "old question", "t")
    lease = await locks.acquire("t", "local", 1)  # a run is on the thread
    waits = asyncio.Event()
    acquire = locks.acquire

    async def tell_and_acquire(
        thread_id: str, user_id: str, timeout: float, *, deferred: bool = False
    ) -> Lease:
        waits.set()  # the request checked the thread, and now waits for its lock
        return await acquire(thread_id, user_id, timeout, deferred=deferred)

    monkeypatch.setattr(locks, "acquire", tell_and_acquire)
    waiting = asyncio.create_task(
        svc.client.post("/invoke", json={"message": "new question", "thread_id": "t"})
    )
    async with asyncio.timeout(5):
        await waits.wait()
    assert not waiting.done()
    assert await store.delete_thread("t", "local")  # gone before the message got the lock
    await lease.release()

    answer = await waiting
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "echo: new question"
    stored = [m.text for m, _ in await svc.state.store.get_messages("t", "local")]
    assert stored == ["new question", "echo: new question"]
    detail = (await svc.client.get("/threads/t")).json()
    assert detail["title"] == "new question"


# -- thread ids --------------------------------------------------------------------------------


async def test_a_client_chosen_thread_id_is_used(service: MakeService) -> None:
    svc = await _service(service)
    chosen = "my thread: symbols/!?&#%~" + "x" * 103
    assert len(chosen) == 128
    response = await svc.client.post("/invoke", json={"message": "hi", "thread_id": chosen})
    assert response.status_code == 200, response.text
    assert response.json()["thread_id"] == chosen
    assert response.headers["X-Thread-Id"] == chosen
    detail = await svc.client.get(f"/threads/{quote(chosen, safe='')}")
    assert detail.status_code == 200
    assert detail.json()["thread_id"] == chosen
    thread = await svc.state.store.get_thread(chosen, "local")
    assert thread is not None
    # The same id continues it.
    await svc.client.post("/invoke", json={"message": "again", "thread_id": chosen})
    assert len(await svc.state.store.get_messages(chosen, "local")) == 4
    # And it is addressable as a path segment, `/` and all.
    assert (await svc.client.delete(f"/threads/{quote(chosen, safe='')}")).status_code == 204
    assert await svc.state.store.get_thread(chosen, "local") is None


async def test_a_new_thread_gets_a_uuid(service: MakeService) -> None:
    svc = await _service(service)
    response = await svc.client.post("/invoke", json={"message": "hi"})
    thread_id = response.json()["thread_id"]
    assert len(thread_id) == 36
    assert response.headers["X-Thread-Id"] == thread_id
    other = (await svc.client.post("/invoke", json={"message": "hi"})).json()["thread_id"]
    assert other != thread_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "x" * 129,
        "line\nbreak",
        "tab\tinside",
        "bell\x07",
        "del\x7f",
        " padded",
        "padded ",
        "日本",
        "ü",
    ],
)
@pytest.mark.parametrize("path", ["/invoke", "/stream", "/helper/invoke"])
async def test_bad_thread_ids_are_422(service: MakeService, bad: str, path: str) -> None:
    svc = await _service(service)
    response = await svc.client.post(path, json={"message": "hi", "thread_id": bad})
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "thread_id"]
    assert isinstance(error["msg"], str)
    assert await svc.state.store.list_threads("local") == []
    assert svc.state.runs.active == {}


async def test_a_nul_in_a_thread_id_is_422(service: MakeService) -> None:
    svc = await _service(service)
    response = await svc.client.post("/invoke", json={"message": "hi", "thread_id": "nul\x00"})
    assert response.status_code == 422  # refused as JSON no database can store
    assert await svc.state.store.list_threads("local") == []


async def test_history_of_an_id_no_thread_can_have_is_empty(service: MakeService) -> None:
    svc = await _service(service)
    for bad in ("日本", "", "x" * 500):
        response = await svc.client.post("/history", json={"thread_id": bad})
        assert response.status_code == 200
        assert response.json() == {"messages": [], "thread_id": bad}


# -- headers -----------------------------------------------------------------------------------


async def test_responses_name_their_thread_and_run(service: MakeService) -> None:
    svc = await _service(service)
    invoke = await svc.client.post("/invoke", json={"message": "hi"})
    thread_id = invoke.json()["thread_id"]
    assert invoke.headers["X-Thread-Id"] == thread_id
    assert invoke.headers["X-Run-Id"] == invoke.json()["run_id"]
    assert invoke.headers["X-Run-Id"].startswith("run_")

    stream = await svc.client.post("/stream", json={"message": "more", "thread_id": thread_id})
    assert stream.headers["X-Thread-Id"] == thread_id
    run_id = stream.headers["X-Run-Id"]
    assert run_id != invoke.headers["X-Run-Id"]
    messages = [f for f in frames(stream.text) if isinstance(f, dict) and f["type"] == "message"]
    assert {m["content"]["run_id"] for m in messages} == {run_id}
    assert {m["content"]["thread_id"] for m in messages} == {thread_id}

    history = await svc.client.post("/history", json={"thread_id": thread_id})
    assert history.headers["X-Thread-Id"] == thread_id
    detail = await svc.client.get(f"/threads/{thread_id}")
    assert detail.headers["X-Thread-Id"] == thread_id
    run = await svc.client.get(f"/runs/{run_id}")
    assert run.json()["thread_id"] == thread_id
    records = await wait_for(lambda: run_records(svc.state.store, thread_id), "the runs")
    assert [r.run_id for r in records] == [invoke.headers["X-Run-Id"], run_id]
