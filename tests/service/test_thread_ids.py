"""Thread ids are per user: clients choose them, so each user has ids of their own.

Two users who pick the same id each get their own thread, on every route; and no answer tells
one user whether another has a thread of some id (the same answer as for an id nobody has),
nor makes them wait for another's run on it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.errors import ConflictError
from parley.service.store import thread_locks
from tests.service._agents import echo_agent
from tests.service._support import frames
from tests.service.conftest import MakeService, Service


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def two_users(service: MakeService) -> tuple[Service, dict[str, str], dict[str, str]]:
    # An agent answering `turn N: <question>`: equal questions on equal threads, equal answers.
    svc = await service(echo_agent(), api_keys=True, busy_timeout=0.2)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    return svc, _bearer(alice), _bearer(bob)


def _agui_input(thread_id: str, text: str, **more: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": "r",
        "state": {},
        "messages": [{"id": f"m-{text}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **more,
    }


def _texts(detail: dict[str, Any]) -> list[str]:
    return [b["text"] for m in detail["messages"] for b in m["content"] if b["type"] == "text"]


async def test_two_users_with_one_thread_id_each_get_their_own_thread(
    two_users: tuple[Service, dict[str, str], dict[str, str]],
) -> None:
    svc, alice, bob = two_users
    client = svc.client
    for who, headers in (("alice", alice), ("bob", bob)):
        said = await client.post(
            "/invoke", json={"message": f"{who} 1", "thread_id": "t"}, headers=headers
        )
        assert said.status_code == 200, said.text
        assert said.json()["content"] == f"turn 1: {who} 1"  # each sees their own thread only
        streamed = await client.post(
            "/stream", json={"message": f"{who} 2", "thread_id": "t"}, headers=headers
        )
        assert streamed.status_code == 200
        messages = [f["content"] for f in frames(streamed.text) if isinstance(f, dict)]
        assert messages[-1]["content"] == f"turn 2: {who} 2"
        agui = await client.post("/agui/run", json=_agui_input("t", f"{who} 3"), headers=headers)
        assert agui.status_code == 200
        assert f"turn 3: {who} 3" in agui.text
        v1 = await client.post(
            "/v1/chat/completions",
            json={"model": "echo", "messages": [{"role": "user", "content": f"{who} 4"}]},
            headers={**headers, "X-Thread-Id": "t"},
        )
        assert v1.status_code == 200, v1.text
        assert v1.json()["choices"][0]["message"]["content"] == f"turn 4: {who} 4"

    for who, headers in (("alice", alice), ("bob", bob)):
        detail = (await client.get("/threads/t", headers=headers)).json()
        assert _texts(detail) == [
            text for n in range(1, 5) for text in (f"{who} {n}", f"turn {n}: {who} {n}")
        ]
        history = (await client.post("/history", json={"thread_id": "t"}, headers=headers)).json()
        assert [m["content"] for m in history["messages"]][:2] == [f"{who} 1", f"turn 1: {who} 1"]
        listed = (await client.get("/threads", headers=headers)).json()["threads"]
        assert [(t["thread_id"], t["title"]) for t in listed] == [("t", f"{who} 1")]

    # Deleting one user's thread leaves the other's.
    assert (await client.delete("/threads/t", headers=bob)).status_code == 204
    assert (await client.get("/threads/t", headers=bob)).status_code == 404
    assert len(_texts((await client.get("/threads/t", headers=alice)).json())) == 8


def _same(answer: Any, thread_id: str) -> str:
    """An answer with the thread id left out, to compare two of them."""
    text = json.dumps(answer, sort_keys=True) if not isinstance(answer, str) else answer
    return text.replace(thread_id, "<id>")


async def _answers(svc: Service, headers: dict[str, str], thread_id: str) -> list[tuple[int, str]]:
    """What each route answers `headers`' user about `thread_id`, status and body."""
    client = svc.client
    out: list[tuple[int, str]] = []

    async def keep(response: Any, body: Any = None) -> None:
        out.append(
            (response.status_code, _same(body if body is not None else response.text, thread_id))
        )

    await keep(await client.get(f"/threads/{thread_id}", headers=headers))
    await keep(await client.post("/history", json={"thread_id": thread_id}, headers=headers))
    await keep(await client.post("/echo/history", json={"thread_id": thread_id}, headers=headers))
    resumed = _agui_input(thread_id, "x", forwardedProps={"command": {"resume": True}})
    await keep(await client.post("/agui/run", json=resumed, headers=headers))
    await keep(await client.delete(f"/threads/{thread_id}", headers=headers))
    # A message on the id: the user's own new thread, whatever another user has.
    invoked = await client.post(
        "/invoke", json={"message": "q", "thread_id": thread_id}, headers=headers
    )
    await keep(invoked, {k: invoked.json()[k] for k in ("type", "content", "thread_id")})
    streamed = await client.post(
        "/stream", json={"message": "more", "thread_id": thread_id}, headers=headers
    )
    said = [
        f["content"]["content"]
        for f in frames(streamed.text)
        if f != "[DONE]" and f["type"] == "message"
    ]
    await keep(streamed, said)
    v1 = await client.post(
        "/v1/chat/completions",
        json={"model": "echo", "messages": [{"role": "user", "content": "again"}]},
        headers={**headers, "X-Thread-Id": thread_id},
    )
    await keep(v1, v1.json()["choices"])
    return out


async def test_no_route_tells_whether_another_user_has_a_thread_id(
    two_users: tuple[Service, dict[str, str], dict[str, str]],
) -> None:
    svc, alice, bob = two_users
    made = await svc.client.post(
        "/invoke", json={"message": "alice's secret", "thread_id": "t-alice"}, headers=alice
    )
    assert made.status_code == 200
    before = (await svc.client.get("/threads/t-alice", headers=alice)).json()

    # Bob asks about alice's id and about one nobody has: every answer is the same.
    about_hers = await _answers(svc, bob, "t-alice")
    about_none = await _answers(svc, bob, "t-nobody")
    assert about_hers == about_none
    assert [status for status, _ in about_hers] == [404, 200, 200, 404, 404, 200, 200, 200]
    assert all("alice" not in body for _, body in about_hers)

    # Alice's thread is as it was; bob's, of the same id, is his own.
    after = (await svc.client.get("/threads/t-alice", headers=alice)).json()
    assert after == before
    assert _texts((await svc.client.get("/threads/t-alice", headers=bob)).json()) == [
        "q",
        "turn 1: q",
        "more",
        "turn 2: more",
        "again",
        "turn 3: again",
    ]

    # A run of alice's is unknown to bob, as a run that does not exist.
    theirs = {"run_id": made.headers["X-Run-Id"], "key": "k", "score": 1}
    none = {**theirs, "run_id": "run_nobody"}
    on_hers = await svc.client.post("/feedback", json=theirs, headers=bob)
    on_none = await svc.client.post("/feedback", json=none, headers=bob)
    assert on_hers.status_code == on_none.status_code == 404
    assert _same(on_hers.text, theirs["run_id"]) == _same(on_none.text, "run_nobody")


async def test_another_users_run_on_an_id_does_not_hold_yours(
    two_users: tuple[Service, dict[str, str], dict[str, str]],
) -> None:
    svc, alice, bob = two_users
    # A run of alice's holds her thread `t` (busy_timeout is 0.2 s: a wait would be a 409).
    lease = await svc.state.locks.acquire("t", "alice", 1)
    try:
        busy = await svc.client.post(
            "/invoke", json={"message": "hi", "thread_id": "t"}, headers=alice
        )
        assert busy.status_code == 409
        free = await svc.client.post(
            "/invoke", json={"message": "hi", "thread_id": "t"}, headers=bob
        )
        assert free.status_code == 200
        assert free.json()["content"] == "turn 1: hi"
    finally:
        await lease.release()


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_thread_locks_are_per_user(database: str, request: pytest.FixtureRequest) -> None:
    url: str = request.getfixturevalue("sqlite_url" if database == "sqlite" else "postgres_db_url")
    locks = thread_locks(url)
    try:
        alices = await locks.acquire("t", "alice", 0)
        bobs = await locks.acquire("t", "bob", 0)  # another thread: free
        with pytest.raises(ConflictError):
            await locks.acquire("t", "alice", 0)
        # A user and id that join to the same text are other threads all the same.
        joined = await locks.acquire("b:t", "alice:", 0)
        await joined.release()
        await alices.release()
        await bobs.release()
        again = await locks.acquire("t", "alice", 0)
        await again.release()
    finally:
        await locks.close()
