"""LangGraph's server API (`/langgraph`) driven by the official `langgraph-sdk` client.

The app is served by uvicorn on 127.0.0.1 (`tests.service._live.running`) with scripted
models, so every answer, and every event of its stream, is known. Two users (API keys) show
that a thread is its owner's only.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
)
from langgraph_sdk.schema import Command

from parley.agents import Agent
from parley.errors import ModelError
from parley.messages import TextBlock, ThinkingBlock
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from parley.service.langgraph import responses
from parley.service.store import Store
from tests.sample_tools import send_email
from tests.service._live import running
from tests.service.conftest import MakeService
from tests.service.langgraph._proxy import cutting_proxy

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

ANSWER = "Hello there, my friend."


def _agents() -> list[Agent]:
    echo = Agent("echo", ScriptedModel([ANSWER] * 50, stream=True, chunk_size=6))
    slow = Agent(
        "slow", ScriptedModel(["a b c d e f g h"] * 5, stream=True, chunk_size=1, chunk_delay=0.2)
    )
    call = ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, call_id="call_mail")
    mail = Agent(
        "mail",
        ScriptedModel([call, "Sent.", call, "Not sent."], stream=True),
        tools=[send_email],
    )
    return [echo, slow, mail]


async def _keys(url: str) -> tuple[str, str]:
    store = await Store.open(url)
    try:
        alice, _ = await store.create_api_key("alice")
        bob, _ = await store.create_api_key("bob")
        return alice, bob
    finally:
        await store.close()


_CLIENTS: list[Any] = []


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """The app's base URL and two users' keys (the clients made on it close with it)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"
    alice, bob = asyncio.run(_keys(url))
    app = create_app(ServiceSettings(database_url=url, api_keys=True), agents=_agents())
    with running(app) as base:
        try:
            yield base, alice, bob
        finally:
            while _CLIENTS:
                _CLIENTS.pop().close()


@pytest.fixture
def alice_thread(server: tuple[str, str, str]) -> tuple[Any, str]:
    """Alice's client, and a new thread of hers."""
    base, alice, _ = server
    client = _client(base, alice)
    return client, client.threads.create()["thread_id"]


def _client(base: str, key: str, *, as_api_key: bool = False) -> Any:
    """The SDK's client; the key as `Authorization: Bearer`, or as its `api_key` (X-Api-Key)."""
    if as_api_key:
        client = get_sync_client(url=f"{base}/langgraph", api_key=key)
    else:
        headers = {"Authorization": f"Bearer {key}"}
        client = get_sync_client(url=f"{base}/langgraph", headers=headers)
    _CLIENTS.append(client)
    return client


def _human(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def _running_slow(client: Any, tid: str, text: str) -> dict[str, Any]:
    """A run of the slow agent on thread `tid`, once its answer began streaming."""
    run: dict[str, Any] = client.runs.create(tid, "slow", input=_human(text))
    stream = client.runs.join_stream(
        tid, run["run_id"], last_event_id="-1", stream_mode="messages-tuple"
    )
    for part in stream:
        if part.event == "messages":
            break  # it is running
    return run


# -- assistants and threads ----------------------------------------------------------------


def test_assistants_are_the_served_agents(server: tuple[str, str, str]) -> None:
    base, alice, _ = server
    client = _client(base, alice)
    found = client.assistants.search()
    assert [a["graph_id"] for a in found] == ["echo", "slow", "mail"]
    echo = found[0]
    assert echo["assistant_id"] == str(
        uuid.uuid5(uuid.UUID(int=0x6BA7B8219DAD11D180B400C04FD430C8), "echo")
    )
    assert client.assistants.get(echo["assistant_id"]) == echo
    assert client.assistants.get("echo") == echo
    schemas = client.assistants.get_schemas("echo")
    assert schemas["graph_id"] == "echo"
    assert "messages" in schemas["input_schema"]["properties"]
    with pytest.raises(NotFoundError):
        client.assistants.get(str(uuid.uuid4()))
    # agent-chat-ui asks /info with no credentials before anything else, as LangGraph serves it
    assert httpx.get(f"{base}/langgraph/info").json()["flags"]["assistants"] is True
    assert httpx.get(f"{base}/langgraph/ok").json() == {"ok": True}
    assert httpx.post(f"{base}/langgraph/assistants/search", json={}).status_code == 401
    raw = httpx.post(
        f"{base}/langgraph/assistants/search",
        json={"limit": 1},
        headers={"Authorization": f"Bearer {alice}"},
    )
    assert raw.headers["X-Pagination-Total"] == "3"
    assert len(raw.json()) == 1


def test_threads_create_get_search_state_delete(server: tuple[str, str, str]) -> None:
    base, alice, _ = server
    client = _client(base, alice)
    thread = client.threads.create(graph_id="slow")
    tid = thread["thread_id"]
    assert thread["status"] == "idle"
    assert thread["metadata"]["graph_id"] == "slow"
    assert client.threads.get(tid)["thread_id"] == tid
    with pytest.raises(ConflictError):
        client.threads.create(thread_id=tid)
    assert client.threads.create(thread_id=tid, if_exists="do_nothing")["thread_id"] == tid
    state = client.threads.get_state(tid)
    assert state["values"] == {}
    assert state["next"] == []
    assert state["checkpoint"] is None
    other = client.threads.create()
    found = client.threads.search(metadata={"graph_id": "slow"})
    assert [t["thread_id"] for t in found] == [tid]
    assert {t["thread_id"] for t in client.threads.search()} == {tid, other["thread_id"]}
    client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        client.threads.get(tid)


def test_another_users_thread_and_run_are_not_found(server: tuple[str, str, str]) -> None:
    base, alice, bob = server
    mine = _client(base, alice)
    theirs = _client(base, bob, as_api_key=True)
    assert theirs.threads.search() == []  # they are known: their key, sent as X-Api-Key
    with pytest.raises(AuthenticationError):
        _client(base, "pk_not_a_key", as_api_key=True).threads.search()
    tid = mine.threads.create()["thread_id"]
    run = mine.runs.create(tid, "echo", input=_human("hi"))
    mine.runs.join(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        theirs.threads.get(tid)
    with pytest.raises(NotFoundError):
        theirs.threads.get_state(tid)
    with pytest.raises(NotFoundError):
        theirs.runs.get(tid, run["run_id"])
    with pytest.raises(httpx.HTTPStatusError) as joined:  # the SDK's join raises httpx's
        theirs.runs.join(tid, run["run_id"])
    assert joined.value.response.status_code == 404
    with pytest.raises(NotFoundError):
        list(theirs.runs.join_stream(tid, run["run_id"], last_event_id="-1"))
    with pytest.raises(httpx.HTTPStatusError) as waited:
        theirs.runs.wait(tid, "echo", input=_human("mine now"))
    assert waited.value.response.status_code == 404
    assert theirs.threads.search() == []


# -- runs ----------------------------------------------------------------------------------


def _parts(stream: Any) -> list[tuple[str, Any]]:
    return [(part.event, part.data) for part in stream]


def test_stream_every_mode_in_order(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    modes = ["values", "messages-tuple", "updates", "custom"]
    parts = _parts(client.runs.stream(tid, "echo", input=_human("hi"), stream_mode=modes))
    names = [name for name, _ in parts]
    chunks = -(-len(ANSWER) // 6) + 1  # six characters a delta, then the closing chunk
    assert names == ["metadata", "values", *["messages"] * chunks, "updates", "values"]
    meta = parts[0][1]
    assert set(meta) == {"run_id", "attempt"}
    assert meta["attempt"] == 1
    assert parts[1][1]["messages"][0]["type"] == "human"
    assert parts[1][1]["messages"][0]["content"] == "hi"
    pieces = [data for name, data in parts if name == "messages"]
    assert "".join(chunk["content"] for chunk, _ in pieces) == ANSWER
    assert {chunk["type"] for chunk, _ in pieces} == {"AIMessageChunk"}
    assert len({chunk["id"] for chunk, _ in pieces}) == 1
    assert pieces[-1][0]["chunk_position"] == "last"
    assert pieces[0][1]["langgraph_node"] == "model"
    assert pieces[0][1]["thread_id"] == tid
    assert pieces[0][1]["run_id"] == meta["run_id"]
    update = parts[-2][1]["model"]["messages"][0]
    assert update["type"] == "ai"
    assert update["content"] == ANSWER
    final = parts[-1][1]["messages"]
    assert [m["type"] for m in final] == ["human", "ai"]
    assert final[1] == update
    run = client.runs.get(tid, meta["run_id"])
    assert run["status"] == "success"


def test_stream_a_tool_call_as_chunks_then_the_interrupt(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    parts = _parts(
        client.runs.stream(tid, "mail", input=_human("mail them"), stream_mode="messages-tuple")
    )
    names = [name for name, _ in parts]
    assert names[0] == "metadata"
    assert names[-1] == "values"  # the interrupt's, sent whatever the modes
    assert set(names[1:-1]) == {"messages"}
    chunks = [chunk for name, (chunk, _) in parts[1:-1]]
    first = chunks[0]
    assert first["tool_call_chunks"][0]["name"] == "send_email"
    assert first["tool_call_chunks"][0]["id"] == "call_mail"
    assert first["tool_calls"][0]["name"] == "send_email"
    args = "".join(c["tool_call_chunks"][0]["args"] for c in chunks if c["tool_call_chunks"])
    assert json.loads(args) == {"to": "a@b.c"}
    assert {c["tool_call_chunks"][0]["index"] for c in chunks if c["tool_call_chunks"]} == {0}
    assert chunks[-1]["chunk_position"] == "last"
    assert len({c["id"] for c in chunks}) == 1
    values = parts[-1][1]
    assert values["__interrupt__"][0]["value"]["calls"][0]["id"] == "call_mail"
    assert values["messages"][-1]["tool_calls"][0]["args"] == {"to": "a@b.c"}


def test_stream_values_only_and_openai_style_input(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    parts = _parts(
        client.runs.stream(
            tid,
            "echo",
            input={"messages": [{"role": "user", "content": [{"type": "text", "text": "yo"}]}]},
        )
    )
    assert [name for name, _ in parts] == ["metadata", "values", "values"]
    assert [m["content"] for m in parts[-1][1]["messages"]] == ["yo", ANSWER]


def test_wait_state_and_history(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    first = client.runs.wait(tid, "echo", input=_human("one"))
    assert [m["content"] for m in first["messages"]] == ["one", ANSWER]
    second = client.runs.wait(tid, "echo", input=_human("two"))
    assert [m["content"] for m in second["messages"]] == ["one", ANSWER, "two", ANSWER]
    state = client.threads.get_state(tid)
    assert state["values"] == second
    history = client.threads.get_history(tid)
    assert [len(s["values"]["messages"]) for s in history] == [4, 2]
    assert history[0]["checkpoint_id"] == state["checkpoint_id"]
    assert history[0]["parent_checkpoint_id"] == history[1]["checkpoint_id"]
    assert client.threads.get(tid)["values"] == second


def test_stateless_wait_and_stream(server: tuple[str, str, str]) -> None:
    base, alice, _ = server
    client = _client(base, alice)
    values = client.runs.wait(None, "echo", input=_human("alone"))
    assert [m["content"] for m in values["messages"]] == ["alone", ANSWER]
    parts = _parts(client.runs.stream(None, "echo", input=_human("again")))
    assert [name for name, _ in parts] == ["metadata", "values", "values"]
    assert client.threads.search() == []  # their threads went with them (on_completion)


def test_create_join_get_list(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    run = client.runs.create(tid, "echo", input=_human("later"), metadata={"tag": "x"})
    assert run["thread_id"] == tid
    assert run["status"] == "pending"  # as it was made, however quickly it ran
    assert run["multitask_strategy"] == "enqueue"
    values = client.runs.join(tid, run["run_id"])
    assert [m["content"] for m in values["messages"]] == ["later", ANSWER]
    got = client.runs.get(tid, run["run_id"])
    assert got["status"] == "success"
    assert got["metadata"] == {"tag": "x"}
    assert [r["run_id"] for r in client.runs.list(tid)] == [run["run_id"]]
    client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        client.runs.get(tid, "run_unknown")


def test_join_stream_replays_with_last_event_id(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    modes = ["values", "messages-tuple"]
    live = list(
        client.runs.stream(
            tid, "echo", input=_human("hi"), stream_mode=modes, stream_resumable=True
        )
    )
    run_id = live[0].data["run_id"]
    replay = list(client.runs.join_stream(tid, run_id, last_event_id="-1"))
    assert [(p.event, p.data, p.id) for p in replay] == [(p.event, p.data, p.id) for p in live]
    assert [p.id for p in live[:3]] == ["1", "1.1", "2"]
    middle = live[4].id
    rest = list(client.runs.join_stream(tid, run_id, last_event_id=middle))
    assert [p.id for p in rest] == [p.id for p in live[5:]]
    assert list(client.runs.join_stream(tid, run_id)) == []  # live only: it ended
    with pytest.raises(BadRequestError):
        list(client.runs.join_stream(tid, run_id, last_event_id="9999"))
    with pytest.raises(BadRequestError):
        list(client.runs.join_stream(tid, run_id, last_event_id="abc"))


def test_stream_headers_name_the_run_relative_to_the_mount(server: tuple[str, str, str]) -> None:
    base, alice, _ = server
    auth = {"Authorization": f"Bearer {alice}"}
    client = _client(base, alice)
    tid = client.threads.create()["thread_id"]
    body = {"assistant_id": "echo", "input": _human("hi")}
    with httpx.stream(
        "POST", f"{base}/langgraph/threads/{tid}/runs/stream", json=body, headers=auth
    ) as answer:
        text = answer.read().decode()
    run_id = text.split('"run_id":"')[1].split('"')[0]
    assert answer.headers["Location"] == f"/threads/{tid}/runs/{run_id}/stream"
    assert answer.headers["Content-Location"] == f"/threads/{tid}/runs/{run_id}"
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    assert text.startswith(
        f'event: metadata\r\ndata: {{"run_id":"{run_id}","attempt":1}}\r\nid: 1\r\n\r\n'
    )
    again = httpx.get(
        f"{base}/langgraph{answer.headers['Location']}", headers=auth | {"Last-Event-ID": "-1"}
    )
    assert again.text == text
    created = httpx.post(f"{base}/langgraph/threads/{tid}/runs", json=body, headers=auth)
    assert created.status_code == 200
    assert created.headers["Content-Location"] == f"/threads/{tid}/runs/{created.json()['run_id']}"
    waited = httpx.post(f"{base}/langgraph/threads/{tid}/runs/wait", json=body, headers=auth)
    location = waited.headers["Location"]
    assert location.startswith(f"/threads/{tid}/runs/")
    assert location.endswith("/join")


def test_cancel_interrupts_a_run(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    run = _running_slow(client, tid, "go")
    client.runs.cancel(tid, run["run_id"], wait=True)
    assert client.runs.get(tid, run["run_id"])["status"] == "interrupted"
    with pytest.raises(NotFoundError):
        client.runs.cancel(tid, "run_unknown")


def test_busy_thread_reject_and_enqueue(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    first = client.runs.create(tid, "slow", input=_human("first"))
    with pytest.raises(ConflictError):
        client.runs.create(tid, "slow", input=_human("no"), multitask_strategy="reject")
    second = client.runs.wait(tid, "echo", input=_human("second"))  # enqueue: waits its turn
    assert client.runs.get(tid, first["run_id"])["status"] == "success"
    assert [m["content"] for m in second["messages"]][-2:] == ["second", ANSWER]


def test_approval_is_an_interrupt_resumed_with_a_command(alice_thread: tuple[Any, str]) -> None:
    client, tid = alice_thread
    parked = client.runs.wait(tid, "mail", input=_human("mail them"))
    (interrupt,) = parked["__interrupt__"]
    assert interrupt["value"]["calls"] == [
        {"name": "send_email", "args": {"to": "a@b.c"}, "id": "call_mail", "type": "tool_call"}
    ]
    assert interrupt["id"] == interrupt["value"]["interrupt_id"]
    assert parked["messages"][-1]["tool_calls"][0]["id"] == "call_mail"
    assert client.threads.get(tid)["status"] == "interrupted"
    state = client.threads.get_state(tid)
    assert state["next"] == ["tools"]
    assert state["interrupts"] == [interrupt]
    parts = _parts(
        client.runs.stream(tid, "mail", command=Command(resume=True), stream_mode=["updates"])
    )
    assert [name for name, _ in parts] == ["metadata", "updates", "updates"]
    tool = parts[1][1]["tools"]["messages"][0]
    assert tool["type"] == "tool"
    assert tool["tool_call_id"] == "call_mail"
    assert parts[2][1]["model"]["messages"][0]["content"] == "Sent."
    assert client.threads.get(tid)["status"] == "idle"
    # parked again, and refused this time: the update stream shows the interrupt first
    parts = _parts(client.runs.stream(tid, "mail", input=_human("again"), stream_mode="updates"))
    # the interrupt's values come too, as LangGraph sends them whatever the modes
    assert [name for name, _ in parts] == ["metadata", "updates", "updates", "values"]
    assert [next(iter(data)) for _, data in parts[1:3]] == ["model", "__interrupt__"]
    assert parts[3][1]["__interrupt__"][0]["id"] != interrupt["id"]
    values = client.runs.wait(tid, "mail", command={"resume": False})
    assert values["messages"][-1]["content"] == "Not sent."
    assert values["messages"][-2]["status"] == "error"
    with pytest.raises(httpx.HTTPStatusError) as again:
        client.runs.wait(tid, "mail", command={"resume": True})
    assert again.value.response.status_code == 409


def test_bad_input_is_refused_clearly(server: tuple[str, str, str]) -> None:
    base, alice, _ = server
    client = _client(base, alice)
    tid = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as waited:  # wait raises httpx's errors
        client.runs.wait(str(uuid.uuid4()), "echo", input=_human("nowhere"))
    assert waited.value.response.status_code == 404
    auth = {"Authorization": f"Bearer {alice}"}
    cases = [
        {"assistant_id": "nobody", "input": _human("x")},
        {"assistant_id": "echo", "input": {"messages": [{"type": "robot", "content": "x"}]}},
        {"assistant_id": "echo", "input": _human("x"), "stream_mode": ["telepathy"]},
        {"assistant_id": "echo"},
    ]
    for body in cases:
        answer = httpx.post(f"{base}/langgraph/threads/{tid}/runs/wait", json=body, headers=auth)
        assert answer.status_code == 422, body
        assert answer.json()["detail"]
    deadline = time.monotonic() + 5
    while client.threads.get(tid)["status"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.threads.get_state(tid)["values"] == {}


# -- reconnects and keep-alives --------------------------------------------------------------


@pytest.fixture
def drip(tmp_path: Path) -> Iterator[tuple[str, str, int]]:
    """An agent that streams slowly enough to be cut mid-way: base URL, a key, the port."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"
    alice, _ = asyncio.run(_keys(url))
    model = ScriptedModel(
        ["one two three four five six seven"] * 5, stream=True, chunk_size=4, chunk_delay=0.05
    )
    app = create_app(
        ServiceSettings(database_url=url, api_keys=True), agents=[Agent("drip", model)]
    )
    with running(app) as base:
        try:
            yield base, alice, int(base.rsplit(":", 1)[1])
        finally:
            while _CLIENTS:
                _CLIENTS.pop().close()


def test_the_sdk_reconnects_to_a_cut_stream_and_misses_nothing(
    drip: tuple[str, str, int],
) -> None:
    base, alice, port = drip
    direct = _client(base, alice)
    tid = direct.threads.create()["thread_id"]
    with cutting_proxy(port, cut_after=4) as proxy:
        client = _client(proxy.url, alice)  # the stream is its first connection's request
        modes = ["values", "messages-tuple", "updates"]
        got = list(client.runs.stream(tid, "drip", input=_human("hi"), stream_mode=modes))
    run_id = got[0].data["run_id"]
    whole = list(direct.runs.join_stream(tid, run_id, last_event_id="-1"))
    assert len(whole) > 8  # it was cut after 4 frames
    assert proxy.requests == [
        f"POST /langgraph/threads/{tid}/runs/stream HTTP/1.1",
        f"GET /langgraph/threads/{tid}/runs/{run_id}/stream HTTP/1.1",  # its Location
    ]
    assert proxy.headers[1]["last-event-id"] == got[3].id  # the last frame it had
    assert [(p.event, p.data, p.id) for p in got] == [(p.event, p.data, p.id) for p in whole]


def test_idle_streams_and_waits_send_keep_alives(
    drip: tuple[str, str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, alice, _ = drip
    monkeypatch.setattr(responses, "HEARTBEAT_SECONDS", 0.01)
    auth = {"Authorization": f"Bearer {alice}"}
    body = {"assistant_id": "drip", "input": _human("hi"), "stream_mode": ["updates"]}
    tid = _client(base, alice).threads.create()["thread_id"]
    streamed = httpx.post(f"{base}/langgraph/threads/{tid}/runs/stream", json=body, headers=auth)
    assert ": heartbeat\n\n" in streamed.text
    assert streamed.text.startswith("event: metadata")  # the first frame comes first
    waited = httpx.post(f"{base}/langgraph/threads/{tid}/runs/wait", json=body, headers=auth)
    assert waited.text.startswith("\n")
    assert waited.json()["messages"][-1]["content"] == "one two three four five six seven"


async def test_a_browser_app_may_read_the_run_headers(service: MakeService) -> None:
    svc = await service(*_agents()[:1], cors_origins=["http://app.example"])
    answer = await svc.client.post(
        "/langgraph/threads/search", json={}, headers={"Origin": "http://app.example"}
    )
    exposed = answer.headers["Access-Control-Expose-Headers"]
    for name in ("Location", "Content-Location", "X-Pagination-Total"):
        assert name in exposed


@pytest.mark.parametrize(
    ("on_disconnect", "ends"), [("continue", "success"), ("cancel", "interrupted")]
)
def test_a_client_leaving_its_stream(
    server: tuple[str, str, str], on_disconnect: str, ends: str
) -> None:
    base, alice, _ = server
    client = _client(base, alice)
    tid = client.threads.create()["thread_id"]
    body = {"assistant_id": "slow", "input": _human("go"), "stream_mode": ["messages-tuple"]}
    if on_disconnect == "cancel":
        body["on_disconnect"] = "cancel"  # "continue" is the default: sent as no field
    auth = {"Authorization": f"Bearer {alice}"}
    url = f"{base}/langgraph/threads/{tid}/runs/stream"
    with httpx.stream("POST", url, json=body, headers=auth) as answer:
        run_id = answer.headers["Content-Location"].rsplit("/", 1)[1]
        for line in answer.iter_lines():
            if line.startswith("event: messages"):
                break  # it is running: leave
    client.runs.join(tid, run_id)
    assert client.runs.get(tid, run_id)["status"] == ends


@pytest.mark.parametrize("resumable", [True, False])
async def test_a_stream_past_its_retention_is_gone(service: MakeService, resumable: bool) -> None:
    # Every run's events are kept `event_retention` (the event log's), resumable or not.
    svc = await service(*_agents()[:1], event_retention=0.01)
    client = svc.client
    tid = (await client.post("/langgraph/threads", json={})).json()["thread_id"]
    body = {"assistant_id": "echo", "input": _human("hi"), "stream_resumable": resumable}
    waited = await client.post(f"/langgraph/threads/{tid}/runs/wait", json=body)
    run_id = waited.headers["Content-Location"].rsplit("/", 1)[1]
    stream = f"/langgraph/threads/{tid}/runs/{run_id}/stream"
    for _ in range(200):  # the events go a moment after the run ends (bounded wait)
        answer = await client.get(stream, headers={"Last-Event-ID": "-1"})
        if answer.status_code == 410:
            break
        await asyncio.sleep(0.02)
    assert answer.status_code == 410
    assert "no longer kept" in answer.json()["detail"]
    joined = await client.get(f"/langgraph/threads/{tid}/runs/{run_id}/join")
    assert [m["content"] for m in joined.json()["messages"]] == ["hi", ANSWER]  # from the store


# -- failures and parley's own events ----------------------------------------------------------


def test_a_failed_run_and_thinking_as_custom_events(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"
    alice, _ = asyncio.run(_keys(url))
    thought = ChatResponse(content=[ThinkingBlock(thinking="Let me see."), TextBlock(text="Yes.")])
    agents = [
        Agent("broken", ScriptedModel([ModelError("the model's server is down")] * 3)),
        Agent("thinker", ScriptedModel([thought], stream=True)),
    ]
    app = create_app(ServiceSettings(database_url=url, api_keys=True), agents=agents)
    with running(app) as base:
        try:
            client = _client(base, alice)
            tid = client.threads.create()["thread_id"]
            parts = _parts(client.runs.stream(tid, "broken", input=_human("hi")))
            assert [name for name, _ in parts] == ["metadata", "values", "error"]
            assert parts[-1][1]["error"] == "ModelError"
            assert "down" in parts[-1][1]["message"]
            assert client.runs.get(tid, parts[0][1]["run_id"])["status"] == "error"
            failed = client.runs.wait(tid, "broken", input=_human("again"), raise_error=False)
            assert failed["__error__"]["error"] == "ModelError"

            modes = ["custom", "values"]
            parts = _parts(
                client.runs.stream(None, "thinker", input=_human("?"), stream_mode=modes)
            )
            custom = [data for name, data in parts if name == "custom"]
            assert {c["type"] for c in custom} == {"thinking_delta"}
            assert "".join(c["text"] for c in custom) == "Let me see."
            final = parts[-1][1]["messages"][-1]
            assert final["content"] == "Yes."
            assert final["additional_kwargs"]["reasoning_content"] == "Let me see."
        finally:
            while _CLIENTS:
                _CLIENTS.pop().close()


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
def test_a_new_run_stops_the_running_one(alice_thread: tuple[Any, str], strategy: str) -> None:
    client, tid = alice_thread
    first = _running_slow(client, tid, "first")
    values = client.runs.wait(tid, "echo", input=_human("second"), multitask_strategy=strategy)
    texts = [m["content"] for m in values["messages"]]
    assert texts[-2:] == ["second", ANSWER]
    if strategy == "interrupt":  # its question and partial answer stay
        assert texts[0] == "first"
        assert client.runs.get(tid, first["run_id"])["status"] == "interrupted"
    else:  # gone, with its messages
        assert texts == ["second", ANSWER]
