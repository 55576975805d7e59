"""Every agent over AG-UI (`/agui/...`), read as an AG-UI client reads it.

Each stream is parsed back into `ag_ui.core` event models (an SSE `data:` line each, as the
SDKs' HTTP agents split them) and checked against the rules `@ag-ui/client`'s `verifyEvents`
applies (1.0): the run starts first; a text message, reasoning message or tool call is
started once, written to while open, and closed; nothing is open at `RUN_FINISHED`; nothing
follows `RUN_ERROR`, nor `RUN_FINISHED`. The messages snapshot is what a client keeps, and
what it sends back on the next run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Event,
    EventType,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

from parley.agents import Agent
from parley.errors import ConflictError, ModelError
from parley.messages import TextBlock, ThinkingBlock
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from tests.sample_tools import add, send_email
from tests.service._agents import echo_agent
from tests.service._live import running
from tests.service._support import wait_for_run
from tests.service.conftest import MakeService, Service

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


# -- an AG-UI client's view ---------------------------------------------------------------


def parse(body: str) -> list[BaseEvent]:
    """The events of an SSE body, validated as `ag_ui.core` events."""
    out: list[BaseEvent] = []
    for chunk in body.split("\n\n"):
        if chunk:
            assert chunk.startswith("data: "), f"not a data frame: {chunk!r}"
            out.append(EVENTS.validate_json(chunk.removeprefix("data: ")))
    return out


def verify(events: list[BaseEvent]) -> None:
    """Fail on any event `@ag-ui/client`'s verifier would refuse (the rules above)."""
    assert events, "no event at all"
    assert events[0].type in {EventType.RUN_STARTED, EventType.RUN_ERROR}, events[0]
    opened: dict[str, set[str]] = {"text": set(), "reasoning": set(), "span": set(), "tool": set()}
    kinds = {
        EventType.TEXT_MESSAGE_START: ("text", "open"),
        EventType.TEXT_MESSAGE_CONTENT: ("text", "use"),
        EventType.TEXT_MESSAGE_END: ("text", "close"),
        EventType.REASONING_START: ("span", "open"),
        EventType.REASONING_END: ("span", "close"),
        EventType.REASONING_MESSAGE_START: ("reasoning", "open"),
        EventType.REASONING_MESSAGE_CONTENT: ("reasoning", "use"),
        EventType.REASONING_MESSAGE_END: ("reasoning", "close"),
        EventType.TOOL_CALL_START: ("tool", "open"),
        EventType.TOOL_CALL_ARGS: ("tool", "use"),
        EventType.TOOL_CALL_END: ("tool", "close"),
    }
    for index, event in enumerate(events):
        if index and events[index - 1].type in {EventType.RUN_ERROR, EventType.RUN_FINISHED}:
            raise AssertionError(f"{event.type} after {events[index - 1].type}")
        if event.type in kinds:
            kind, action = kinds[event.type]
            key = getattr(event, "tool_call_id", None) or event.message_id  # type: ignore[attr-defined]
            if action == "open":
                assert key not in opened[kind], f"{event.type} of an open {kind} {key}"
                opened[kind].add(key)
            else:
                assert key in opened[kind], f"{event.type} of no open {kind} {key}"
                if action == "close":
                    opened[kind].discard(key)
        if event.type == EventType.RUN_FINISHED:
            assert not any(opened.values()), f"RUN_FINISHED while open: {opened}"


def types(events: list[BaseEvent]) -> list[str]:
    """The event types, with runs of content deltas folded into one."""
    out: list[str] = []
    for event in events:
        name = event.type.value
        if not (out and out[-1] == name and name.endswith(("_CONTENT", "_ARGS"))):
            out.append(name)
    return out


def of(events: list[BaseEvent], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def run_input(thread_id: str, *messages: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A `RunAgentInput` as AG-UI's HttpAgent posts it (camelCase)."""
    return {
        "threadId": thread_id,
        "runId": f"client-run-{thread_id}",
        "messages": list(messages),
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **more,
    }


def user(text: str, message_id: str = "msg-1") -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": text}


async def run(svc: Service, body: dict[str, Any], path: str = "/agui/helper/run") -> list[Any]:
    response = await svc.client.post(path, json=body, headers={"Accept": "text/event-stream"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(EventEncoder().get_content_type())
    events = parse(response.text)
    verify(events)
    started = events[0]
    assert isinstance(started, RunStartedEvent)
    assert (started.thread_id, started.run_id) == (body["threadId"], body["runId"])
    assert started.metadata == {"parley": {"run_id": response.headers["x-run-id"]}}
    return events


def snapshot(events: list[BaseEvent]) -> list[dict[str, Any]]:
    [last] = of(events, MessagesSnapshotEvent)
    return [m.model_dump(mode="json", by_alias=True) for m in last.messages]


# -- runs -----------------------------------------------------------------------------------


async def test_a_plain_answer(service: MakeService) -> None:
    model = ScriptedModel(["Hello there, friend."], stream=True, chunk_size=5)
    svc = await service(Agent("helper", model))
    events = await run(svc, run_input("t-plain", user("Hi!", "u-1")))

    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    [start] = of(events, TextMessageStartEvent)
    assert start.role == "assistant"
    deltas = of(events, TextMessageContentEvent)
    assert len(deltas) == 4  # streamed, not sent whole
    assert "".join(d.delta for d in deltas) == "Hello there, friend."
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is None or finished.outcome.type == "success"
    assert finished.usage is not None
    assert finished.usage[0].output_tokens is not None
    assert finished.usage[0].output_tokens > 0
    assert finished.metadata is not None
    assert finished.metadata["parley"]["status"] == "completed"

    # The client's message keeps its id; the answer has the stored one.
    stored = (await svc.client.get("/threads/t-plain")).json()["messages"]
    assert [(m["role"], m["id"]) for m in stored] == [
        ("user", "u-1"),
        ("assistant", stored[1]["id"]),
    ]
    assert snapshot(events) == [
        {"id": "u-1", "role": "user", "content": "Hi!"},
        {
            "id": stored[1]["id"],
            "role": "assistant",
            "content": "Hello there, friend.",
            "name": "helper",
        },
    ]


async def test_the_next_run_continues_the_thread(service: MakeService) -> None:
    svc = await service(echo_agent())
    first = await run(svc, run_input("t-next", user("one", "u-1")), "/agui/echo/run")
    # What the client holds after the snapshot, and its next question.
    kept = snapshot(first)
    events = await run(svc, run_input("t-next", *kept, user("two", "u-2")), "/agui/echo/run")
    text = "".join(d.delta for d in of(events, TextMessageContentEvent))
    assert text == "turn 2: two"  # the model saw the whole thread
    assert [m["id"] for m in snapshot(events)][:3] == [m["id"] for m in kept] + ["u-2"]
    stored = (await svc.client.get("/threads/t-next")).json()["messages"]
    assert len(stored) == 4  # nothing the client sent back was stored twice


async def test_a_new_thread_is_seeded_from_the_clients_messages(service: MakeService) -> None:
    svc = await service(echo_agent())
    earlier = [
        {"id": "s", "role": "system", "content": "Be brief."},
        user("first", "u-1"),
        {"id": "a-1", "role": "assistant", "content": "turn 1: first"},
    ]
    events = await run(svc, run_input("t-seed", *earlier, user("second", "u-2")), "/agui/echo/run")
    assert "".join(d.delta for d in of(events, TextMessageContentEvent)) == "turn 2: second"
    assert [m["id"] for m in snapshot(events)][:3] == ["u-1", "a-1", "u-2"]  # no system


async def test_a_tool_call_round(service: MakeService) -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 2, "b": 2}, call_id="call_add"), "It is 4."],
        stream=True,
    )
    svc = await service(Agent("helper", model, tools=[add]))
    events = await run(svc, run_input("t-tools", user("2+2?")))

    assert types(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    [call] = of(events, ToolCallStartEvent)
    assert (call.tool_call_id, call.tool_call_name) == ("call_add", "add")
    arguments = "".join(a.delta for a in of(events, ToolCallArgsEvent))
    assert json.loads(arguments) == {"a": 2, "b": 2}
    [result] = of(events, ToolCallResultEvent)
    assert (result.tool_call_id, result.content) == ("call_add", "4")
    # The answer is a message of its own turn, not the call's.
    [answer] = of(events, TextMessageStartEvent)
    assert answer.message_id != call.parent_message_id

    messages = snapshot(events)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["toolCalls"] == [
        {"id": "call_add", "type": "function", "function": {"name": "add", "arguments": arguments}}
    ]
    assert (messages[2]["toolCallId"], messages[2]["content"]) == ("call_add", "4")
    assert messages[3]["content"] == "It is 4."
    model.assert_consumed()


async def test_thinking_is_a_reasoning_message(service: MakeService) -> None:
    thought = ChatResponse(content=[ThinkingBlock(thinking="Let me see."), *_text("Yes.")])
    svc = await service(Agent("helper", ScriptedModel([thought], stream=True)))
    events = await run(svc, run_input("t-think", user("Well?")))
    assert types(events)[:8] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    reasoning = "".join(e.delta for e in events if e.type == EventType.REASONING_MESSAGE_CONTENT)  # type: ignore[attr-defined]
    assert reasoning == "Let me see."


def _text(text: str) -> list[Any]:
    return [TextBlock(text=text)]


async def test_an_error_ends_the_run_with_run_error(service: MakeService) -> None:
    model = ScriptedModel([ModelError("the model's server is down")], stream=True)
    svc = await service(Agent("helper", model))
    events = await run(svc, run_input("t-error", user("Hi!")))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    error = events[-1]
    assert isinstance(error, RunErrorEvent)
    assert (error.message, error.code) == ("the model's server is down", "ModelError")
    run_id = events[0].metadata["parley"]["run_id"]  # type: ignore[attr-defined]
    assert (await svc.client.get(f"/runs/{run_id}")).json()["status"] == "error"


async def test_the_default_agent_answers_at_agui_run(service: MakeService) -> None:
    svc = await service(
        Agent("helper", ScriptedModel(["Hi."], stream=True)), Agent("other", ScriptedModel([]))
    )
    events = await run(svc, run_input("t-default", user("Hi!")), "/agui/run")
    assert isinstance(events[-1], RunFinishedEvent)


# -- approvals --------------------------------------------------------------------------------


def _mailer(*answers: Any) -> Agent:
    call = ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, call_id="call_mail")
    return Agent("helper", ScriptedModel([call, *answers], stream=True), tools=[send_email])


async def test_a_parked_run_finishes_with_an_interrupt_and_resumes(service: MakeService) -> None:
    svc = await service(_mailer("Sent it."))
    events = await run(svc, run_input("t-mail", user("Mail them")))
    assert types(events)[-3:] == ["CUSTOM", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    [custom] = of(events, CustomEvent)
    assert custom.name == "on_interrupt"  # as the toolkit's LangGraph agents send it
    assert custom.value["calls"][0]["name"] == "send_email"
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "interrupt"
    [interrupt] = finished.outcome.interrupts  # type: ignore[union-attr]
    assert interrupt.tool_call_id == "call_mail"
    assert interrupt.id == f"{custom.value['interrupt_id']}:call_mail"
    assert of(events, ToolCallResultEvent) == []  # nothing was sent yet

    resume = [{"interruptId": interrupt.id, "status": "resolved"}]
    again = await run(svc, run_input("t-mail", resume=resume))
    [result] = of(again, ToolCallResultEvent)
    assert (result.tool_call_id, result.content) == ("call_mail", "sent to a@b.c")
    assert "".join(d.delta for d in of(again, TextMessageContentEvent)) == "Sent it."
    assert again[-1].outcome is None or again[-1].outcome.type == "success"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "how",
    [
        {"resume": [{"interruptId": "{id}", "status": "cancelled"}]},
        {"resume": [{"interruptId": "{id}", "status": "resolved", "payload": {"approved": False}}]},
        {"forwardedProps": {"command": {"resume": False}}},
        {"forwardedProps": {"command": {"resume": {"call_mail": False}}}},
    ],
)
async def test_a_denied_call_is_not_run(service: MakeService, how: dict[str, Any]) -> None:
    svc = await service(_mailer("Not sent."))
    events = await run(svc, run_input("t-deny", user("Mail them")))
    [interrupt] = events[-1].outcome.interrupts  # type: ignore[attr-defined]
    body = json.loads(json.dumps(how).replace("{id}", interrupt.id))
    again = await run(svc, run_input("t-deny", **body))
    [result] = of(again, ToolCallResultEvent)
    assert "sent to" not in result.content
    messages = (await svc.client.get("/threads/t-deny")).json()["messages"]
    assert messages[2]["content"][0]["is_error"] is True


async def test_resuming_with_nothing_parked_is_409(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel(["Hi."], stream=True)))
    await run(svc, run_input("t-idle", user("Hi!")))
    body = run_input("t-idle", forwardedProps={"command": {"resume": True}})
    response = await svc.client.post("/agui/helper/run", json=body)
    assert response.status_code == 409


# -- refused before the stream ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (run_input("t", user("hi")), 404, "agent 'nobody' not found"),
        ({"threadId": "t"}, 422, "runId"),
        (run_input("t"), 422, "the last message must be the user's"),
        (
            run_input("t", user("hi"), {"id": "a", "role": "assistant", "content": "x"}),
            422,
            "user's",
        ),
        (
            run_input("t", user("hi"), forwardedProps={"configurable": {"model": "gpt-5-nano"}}),
            400,
            "not available",
        ),
        (
            run_input("t", user("hi"), forwardedProps={"configurable": {"thread_id": "x"}}),
            422,
            "reserved",
        ),
        (run_input("t", user("hi"), forwardedProps={"configurable": "fast"}), 422, "an object"),
        (run_input(" t", user("hi")), 422, "thread id"),
        (
            run_input(
                "t", {"id": "x", "role": "tool", "toolCallId": "nope", "content": "4"}, user("hi")
            ),
            422,
            "answers no tool call",
        ),
    ],
)
async def test_bad_requests_are_refused_before_anything_runs(
    service: MakeService, body: dict[str, Any], status: int, words: str
) -> None:
    svc = await service(Agent("helper", ScriptedModel([])))
    path = "/agui/nobody/run" if status == 404 else "/agui/helper/run"
    response = await svc.client.post(path, json=body)
    assert response.status_code == status, response.text
    assert words in json.dumps(response.json())
    assert (await svc.client.get("/threads")).json()["threads"] == []


async def test_a_model_info_lists_is_taken(service: MakeService) -> None:
    svc = await service(Agent("helper", ScriptedModel(["Hi."], stream=True)))
    body = run_input("t-model", user("hi"), forwardedProps={"configurable": {"model": "fake"}})
    assert isinstance((await run(svc, body))[-1], RunFinishedEvent)


# -- the snapshot, under the thread's lock ------------------------------------------------------


async def test_the_snapshot_is_read_while_the_run_holds_its_thread(
    service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(
        ["first answer", "second answer"], stream=True, chunk_size=2, chunk_delay=0.01
    )
    svc = await service(Agent("helper", model))
    store, locks = svc.state.store, svc.state.locks
    read = store.get_messages
    lock_held: list[bool] = []

    async def watched(thread_id: str, user_id: str) -> Any:
        # Whether a run could take the thread as this read happens.
        try:
            lease = await locks.acquire(thread_id, user_id, 0)
        except ConflictError:
            lock_held.append(True)
        else:
            await lease.release()
            lock_held.append(False)
        return await read(thread_id, user_id)

    monkeypatch.setattr(store, "get_messages", watched)
    first = asyncio.create_task(run(svc, run_input("t", user("first"))))
    await wait_for_run(svc.state)
    # Another run asks for the thread meanwhile: it gets it when the first lets it go.
    second = asyncio.create_task(
        svc.client.post("/helper/invoke", json={"message": "second", "thread_id": "t"})
    )
    events = await first
    assert (await second).status_code == 200
    assert lock_held == [True]  # the snapshot's one read, before the thread was let go
    # So the second run's question cannot be in it, though it is in the thread now.
    assert [m["content"] for m in snapshot(events)] == ["first", "first answer"]
    stored = [m.text for m, _ in await read("t", "local")]
    assert stored == ["first", "first answer", "second", "second answer"]


# -- auth ---------------------------------------------------------------------------------------


async def test_auth_and_ownership_are_the_services(service: MakeService) -> None:
    model = ScriptedModel(["Hi alice.", "Hi bob."], stream=True)
    svc = await service(Agent("helper", model), api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    body = run_input("t-alice", user("hi"))

    refused = await svc.client.post("/agui/helper/run", json=body)
    assert refused.status_code == 401
    wrong = await svc.client.post(
        "/agui/helper/run", json=body, headers={"Authorization": "Bearer pk_wrong"}
    )
    assert wrong.status_code == 401

    mine = await svc.client.post(
        "/agui/helper/run", json=body, headers={"Authorization": f"Bearer {alice}"}
    )
    assert parse(mine.text)[-1].type == EventType.RUN_FINISHED
    # Bob has no thread t-alice: resuming one is 404, as for any id he does not have; a
    # message makes his own thread of that id, apart from alice's.
    as_bob = {"Authorization": f"Bearer {bob}"}
    for thread_id in ("t-alice", "t-nobody"):
        resumed = await svc.client.post(
            "/agui/helper/run",
            json=run_input(thread_id, user("x"), forwardedProps={"command": {"resume": True}}),
            headers=as_bob,
        )
        assert resumed.status_code == 404
        assert resumed.json() == {"detail": f"thread {thread_id!r} not found"}
    theirs = await svc.client.post(
        "/agui/helper/run", json=run_input("t-alice", user("mine now?")), headers=as_bob
    )
    snapshot = next(e for e in parse(theirs.text) if isinstance(e, MessagesSnapshotEvent))
    assert [m.content for m in snapshot.messages] == ["mine now?", "Hi bob."]
    assert len(await svc.state.store.get_messages("t-alice", "alice")) == 2
    assert len(await svc.state.store.get_messages("t-alice", "bob")) == 2


# -- over a socket, as a front end sees it ----------------------------------------------------


@pytest.fixture
def live(sqlite_url: str) -> Iterator[str]:
    model = ScriptedModel(["Streamed over a socket."], stream=True, chunk_size=4, chunk_delay=0.01)
    app = create_app(ServiceSettings(database_url=sqlite_url), agents=[Agent("helper", model)])
    with running(app) as url:
        yield url


def test_events_arrive_as_they_happen(live: str) -> None:
    """Each event is its own SSE frame as it happens (read line by line, as a client does)."""
    body = run_input("t-live", user("hi"))
    with httpx.stream("POST", f"{live}/agui/helper/run", json=body, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["x-thread-id"] == "t-live"
        seen = [
            EVENTS.validate_json(line.removeprefix("data: "))
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    verify(seen)
    assert len(of(seen, TextMessageContentEvent)) == 6
    assert seen[-1].type == EventType.RUN_FINISHED
