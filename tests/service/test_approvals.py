"""Approvals: a run parks on a tool call that needs a person, and an answer resumes it.

The interrupt is announced (`interrupt` frame, or `approval_requested` in parley's events),
shown on the thread, answered once (approve, deny, or per call), and expired by a new message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.agents.approval import DENIED, NOT_RUN
from parley.messages import ToolCallBlock
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.tools import FunctionTool, tool
from tests.service._support import DONE, frames, run_records
from tests.service.conftest import MakeService, Service


@dataclass
class Tools:
    """A tool that needs approval and one that does not, recording what ran."""

    ran: list[str] = field(default_factory=list)

    def build(self) -> list[FunctionTool]:
        @tool(requires_approval=True)
        def delete_file(path: str) -> str:
            """Delete a file.

            Args:
                path: The file to delete.
            """
            self.ran.append(f"delete {path}")
            return f"deleted {path}"

        @tool
        def list_files() -> str:
            """List the files."""
            self.ran.append("list")
            return "a.txt b.txt"

        return [delete_file, list_files]


def _delete(path: str = "a.txt", call_id: str = "call_1") -> ChatResponse:
    return ScriptedModel.tool_call("delete_file", {"path": path}, call_id=call_id)


def _calls(*blocks: ToolCallBlock) -> ChatResponse:
    return ChatResponse(content=list(blocks), finish_reason="tool_calls")


def _block(name: str, call_id: str, **args: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=args)


async def _setup(
    service: MakeService, *steps: Any, **settings: Any
) -> tuple[Service, ScriptedModel, Tools]:
    tools = Tools()
    model = ScriptedModel(list(steps))
    svc = await service(Agent("helper", model, tools=tools.build()), **settings)
    return svc, model, tools


async def _answer(
    svc: Service, interrupt: dict[str, Any], approved: bool, *, via: str
) -> httpx.Response:
    """Approve or deny all the calls of a parked run's interrupt (`via`: invoke or stream)."""
    return await svc.client.post(
        f"/approvals/{interrupt['interrupt_id']}/{via}", json={"approved": approved}
    )


async def _park(svc: Service, thread_id: str = "t", **extra: Any) -> dict[str, Any]:
    """Stream a message that parks; the interrupt frame's content."""
    body = {"message": "delete a.txt please", "thread_id": thread_id, **extra}
    response = await svc.client.post("/stream", json=body)
    assert response.status_code == 200, response.text
    got = frames(response.text)
    assert got[-1] == DONE
    assert got[-2]["type"] == "interrupt"
    interrupt: dict[str, Any] = got[-2]["content"]
    interrupt["_run_id"] = response.headers["X-Run-Id"]
    return interrupt


async def test_a_call_needing_approval_parks_the_run(service: MakeService) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.")
    response = await svc.client.post(
        "/stream", json={"message": "delete a.txt please", "thread_id": "t"}
    )
    run_id = response.headers["X-Run-Id"]
    got = frames(response.text)

    assert [f if f == DONE else f["type"] for f in got] == ["message", "interrupt", DONE]
    ai = got[0]["content"]
    assert ai["type"] == "ai"
    assert ai["tool_calls"] == [
        {"name": "delete_file", "args": {"path": "a.txt"}, "id": "call_1", "type": "tool_call"}
    ]
    interrupt = got[1]["content"]
    assert set(interrupt) == {"interrupt_id", "thread_id", "run_id", "calls"}
    assert interrupt["interrupt_id"].startswith("int_")
    assert interrupt["thread_id"] == "t"
    assert interrupt["run_id"] == run_id
    assert interrupt["calls"] == ai["tool_calls"]
    assert tools.ran == []  # nothing ran before a person said so

    detail = (await svc.client.get("/threads/t")).json()
    assert detail["status"] == "awaiting_approval"
    (pending,) = detail["pending"]
    assert pending == interrupt
    assert detail["messages"][-1]["metadata"]["interrupt_id"] == interrupt["interrupt_id"]
    listed = (await svc.client.get("/threads")).json()["threads"]
    assert listed[0]["status"] == "awaiting_approval"
    run = (await svc.client.get(f"/runs/{run_id}")).json()
    assert run["status"] == "awaiting_approval"


async def test_approving_runs_the_tool_and_streams_the_answer(service: MakeService) -> None:
    svc, model, tools = await _setup(service, _delete(), "Deleted a.txt.")
    interrupt = await _park(svc)

    response = await _answer(svc, interrupt, True, via="stream")
    assert response.status_code == 200
    assert response.headers["X-Thread-Id"] == "t"
    run_id = response.headers["X-Run-Id"]
    assert run_id != interrupt["run_id"]
    got = frames(response.text)
    assert got[-1] == DONE
    messages = [f["content"] for f in got[:-1] if f["type"] == "message"]
    assert [(m["type"], m["content"]) for m in messages] == [
        ("tool", "deleted a.txt"),
        ("ai", "Deleted a.txt."),
    ]
    assert messages[0]["tool_call_id"] == "call_1"
    assert {m["run_id"] for m in messages} == {run_id}
    tokens = "".join(f["content"] for f in got[:-1] if f["type"] == "token")
    assert tokens == "Deleted a.txt."
    assert tools.ran == ["delete a.txt"]

    detail = (await svc.client.get("/threads/t")).json()
    assert detail["status"] == "idle"
    assert detail["pending"] == []
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]
    runs = await run_records(svc.state.store, "t")
    assert [(r.run_id, r.status) for r in runs] == [
        (interrupt["run_id"], "awaiting_approval"),
        (run_id, "completed"),
    ]
    model.assert_consumed()


async def test_denying_tells_the_model_the_user_said_no(service: MakeService) -> None:
    svc, model, tools = await _setup(service, _delete(), "Understood, I left it.")
    interrupt = await _park(svc)

    response = await _answer(svc, interrupt, False, via="stream")
    got = frames(response.text)
    final = [f["content"] for f in got[:-1] if f["type"] == "message"][-1]
    assert final["content"] == "Understood, I left it."
    assert tools.ran == []

    seen = model.requests[1].messages[-1]
    assert seen.role == "tool"
    (result,) = seen.tool_results
    assert result.tool_call_id == "call_1"
    assert result.is_error
    assert result.output == DENIED == "denied by the user"


async def test_an_interrupt_is_answered_once(service: MakeService) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.")
    interrupt = await _park(svc)
    url = f"/approvals/{interrupt['interrupt_id']}"

    assert (await svc.client.post(f"{url}/invoke", json={"approved": True})).status_code == 200
    for path in ("invoke", "stream"):
        for verdict in (True, False):
            again = await svc.client.post(f"{url}/{path}", json={"approved": verdict})
            assert again.status_code == 409
            assert "answered already" in again.json()["detail"]
    assert tools.ran == ["delete a.txt"]


async def test_answers_sent_at_once_only_one_counts(service: MakeService) -> None:
    svc, model, tools = await _setup(service, _delete(), "Deleted a.txt.")
    interrupt = await _park(svc)
    url = f"/approvals/{interrupt['interrupt_id']}"
    answers = await asyncio.gather(
        *(
            svc.client.post(f"{url}/{path}", json={"approved": verdict})
            for path in ("invoke", "stream")
            for verdict in (True, False)
        )
    )
    assert sorted(a.status_code for a in answers) == [200, 409, 409, 409]
    assert len(tools.ran) <= 1
    assert len(model.requests) == 2  # one resumed run asked the model again
    roles = [m.role for m, _ in await svc.state.store.get_messages("t", "local")]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_unknown_interrupts_are_404(service: MakeService) -> None:
    svc, _, _ = await _setup(service)
    for path in ("invoke", "stream"):
        response = await svc.client.post(f"/approvals/int_nope/{path}", json={"approved": True})
        assert response.status_code == 404
        assert "int_nope" in response.json()["detail"]


async def test_another_users_interrupt_is_404_and_stays_answerable(service: MakeService) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.", api_keys=True)
    alice, _ = await svc.state.store.create_api_key("alice")
    bob, _ = await svc.state.store.create_api_key("bob")
    as_alice = {"Authorization": f"Bearer {alice}"}
    as_bob = {"Authorization": f"Bearer {bob}"}
    response = await svc.client.post(
        "/stream", json={"message": "delete a.txt", "thread_id": "t"}, headers=as_alice
    )
    interrupt_id = frames(response.text)[-2]["content"]["interrupt_id"]

    for path in ("invoke", "stream"):
        stolen = await svc.client.post(
            f"/approvals/{interrupt_id}/{path}", json={"approved": True}, headers=as_bob
        )
        assert stolen.status_code == 404
    assert tools.ran == []

    own = await svc.client.post(
        f"/approvals/{interrupt_id}/invoke", json={"approved": True}, headers=as_alice
    )
    assert own.status_code == 200
    assert tools.ran == ["delete a.txt"]


async def test_per_call_verdicts(service: MakeService) -> None:
    turn = _calls(
        _block("delete_file", "call_a", path="a.txt"),
        _block("delete_file", "call_b", path="b.txt"),
        _block("list_files", "call_c"),
    )
    svc, model, tools = await _setup(service, turn, "Done what I could.")
    interrupt = await _park(svc)
    # Only the calls that need approval wait; the safe one is not asked about.
    assert [c["id"] for c in interrupt["calls"]] == ["call_a", "call_b"]
    url = f"/approvals/{interrupt['interrupt_id']}/invoke"

    stream_url = url.replace("/invoke", "/stream")
    for where, bad in (
        (url, {"call_c": True}),
        (url, {"call_zzz": False}),
        (url, {"call_a": True, "call_x": True}),
        (stream_url, {"call_c": False}),  # an HTTP error, not a frame
    ):
        refused = await svc.client.post(where, json={"approved": bad})
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "approved"]
        assert "no awaiting call" in error["msg"]
    assert tools.ran == []
    detail = (await svc.client.get("/threads/t")).json()
    assert detail["status"] == "awaiting_approval"
    assert [p["interrupt_id"] for p in detail["pending"]] == [interrupt["interrupt_id"]]

    # call_b left out: denied. The safe call runs with the approved one.
    answer = await svc.client.post(url, json={"approved": {"call_a": True}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "Done what I could."
    assert sorted(tools.ran) == ["delete a.txt", "list"]
    results = model.requests[1].messages[-1].tool_results
    assert [(r.tool_call_id, r.is_error, r.text) for r in results] == [
        ("call_a", False, "deleted a.txt"),
        ("call_b", True, DENIED),
        ("call_c", False, "a.txt b.txt"),
    ]


async def test_an_explicit_false_verdict_denies_that_call(service: MakeService) -> None:
    turn = _calls(
        _block("delete_file", "call_a", path="a.txt"),
        _block("delete_file", "call_b", path="b.txt"),
    )
    svc, model, tools = await _setup(service, turn, "ok")
    interrupt = await _park(svc)
    answer = await svc.client.post(
        f"/approvals/{interrupt['interrupt_id']}/invoke",
        json={"approved": {"call_a": False, "call_b": True}},
    )
    assert answer.status_code == 200
    assert tools.ran == ["delete b.txt"]
    results = model.requests[1].messages[-1].tool_results
    assert [(r.tool_call_id, r.is_error) for r in results] == [("call_a", True), ("call_b", False)]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"approved": None},
        {"approved": "yes"},
        {"approved": 1},
        {"approved": [True]},
        {"approved": {"call_1": "true"}},
        {"approved": {"call_1": None}},
    ],
)
async def test_a_malformed_answer_is_422(service: MakeService, body: dict[str, Any]) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.")
    interrupt = await _park(svc)
    response = await svc.client.post(f"/approvals/{interrupt['interrupt_id']}/invoke", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["body", "approved"]
    assert tools.ran == []
    again = await _answer(svc, interrupt, True, via="invoke")
    assert again.status_code == 200


async def test_a_new_message_expires_the_pending_approval(service: MakeService) -> None:
    svc, model, tools = await _setup(service, _delete(), "Fine, never mind that.")
    interrupt = await _park(svc)

    moved_on = await svc.client.post(
        "/invoke", json={"message": "actually, forget it", "thread_id": "t"}
    )
    assert moved_on.status_code == 200
    assert moved_on.json()["content"] == "Fine, never mind that."

    # The model saw the call answered as never run, then the new message.
    prompt = model.requests[1].messages
    assert [m.role for m in prompt] == ["user", "assistant", "tool", "user"]
    (result,) = prompt[2].tool_results
    assert result.tool_call_id == "call_1"
    assert result.is_error
    assert result.output == NOT_RUN
    assert prompt[3].text == "actually, forget it"

    detail = (await svc.client.get("/threads/t")).json()
    assert detail["status"] == "idle"
    assert detail["pending"] == []
    late = await _answer(svc, interrupt, True, via="invoke")
    assert late.status_code == 409
    assert tools.ran == []
    model.assert_consumed()


async def test_approving_through_invoke(service: MakeService) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.")
    interrupt = await _park(svc)

    answer = await _answer(svc, interrupt, True, via="invoke")
    assert answer.status_code == 200
    body = answer.json()
    assert body["type"] == "ai"
    assert body["content"] == "Deleted a.txt."
    assert body["thread_id"] == "t"
    assert answer.headers["X-Thread-Id"] == "t"
    assert body["run_id"] == answer.headers["X-Run-Id"]
    assert tools.ran == ["delete a.txt"]
    run = (await svc.client.get(f"/runs/{body['run_id']}")).json()
    assert run["status"] == "completed"


async def test_a_resumed_run_can_park_again(service: MakeService) -> None:
    svc, _, tools = await _setup(
        service, _delete("a.txt", "call_1"), _delete("b.txt", "call_2"), "Both gone."
    )
    first = await _park(svc)
    response = await _answer(svc, first, True, via="stream")
    got = frames(response.text)
    assert got[-2]["type"] == "interrupt"
    second = got[-2]["content"]
    assert second["interrupt_id"] != first["interrupt_id"]
    assert [c["id"] for c in second["calls"]] == ["call_2"]
    assert second["run_id"] == response.headers["X-Run-Id"]

    done = await _answer(svc, second, True, via="invoke")
    assert done.json()["content"] == "Both gone."
    assert tools.ran == ["delete a.txt", "delete b.txt"]


async def test_parley_events_show_the_approval_request(service: MakeService) -> None:
    svc, _, tools = await _setup(service, _delete(), "Deleted a.txt.")
    response = await svc.client.post(
        "/stream", json={"message": "delete a.txt", "thread_id": "t", "events": "parley"}
    )
    run_id = response.headers["X-Run-Id"]
    events = frames(response.text)
    assert events[-1] == DONE
    for event in events[:-1]:
        assert event["thread_id"] == "t"
        assert event["run_id"] == run_id
    types = [e["type"] for e in events[:-1]]
    assert types[0] == "run_started"
    assert types[-2:] == ["approval_requested", "run_ended"]
    requested = events[-3]
    assert requested["interrupt_id"].startswith("int_")
    assert [c["id"] for c in requested["calls"]] == ["call_1"]
    assert requested["calls"][0]["input"] == {"path": "a.txt"}
    assert events[-2]["status"] == "awaiting_approval"

    resumed = await svc.client.post(
        f"/approvals/{requested['interrupt_id']}/stream",
        json={"approved": True, "events": "parley"},
    )
    after = frames(resumed.text)
    kinds = [e["type"] for e in after[:-1]]
    assert "tool_result" in kinds
    assert kinds[-1] == "run_ended"
    assert after[-2]["status"] == "completed"
    assert tools.ran == ["delete a.txt"]


async def test_an_interrupt_survives_a_restart(service: MakeService) -> None:
    """The parked state is in the store: a new service (new agent objects) answers it."""
    svc, _, _ = await _setup(service, _delete())
    interrupt = await _park(svc)

    again, model, tools = await _setup(service, "Deleted a.txt.")
    response = await _answer(again, interrupt, True, via="invoke")
    assert response.status_code == 200
    assert response.json()["content"] == "Deleted a.txt."
    assert tools.ran == ["delete a.txt"]
    assert model.requests[0].messages[-1].tool_results[0].text == "deleted a.txt"


async def test_the_threads_own_agent_answers_the_interrupt(service: MakeService) -> None:
    tools = Tools()
    other = Agent("chatty", ScriptedModel())  # the default: never called here
    careful = Agent("careful", ScriptedModel([_delete(), "Deleted."]), tools=tools.build())
    svc = await service(other, careful)
    response = await svc.client.post(
        "/careful/stream", json={"message": "delete a.txt", "thread_id": "t"}
    )
    interrupt_id = frames(response.text)[-2]["content"]["interrupt_id"]

    answer = await svc.client.post(f"/approvals/{interrupt_id}/invoke", json={"approved": True})
    assert answer.json()["content"] == "Deleted."
    assert tools.ran == ["delete a.txt"]
    runs = await run_records(svc.state.store, "t")
    assert {r.agent for r in runs} == {"careful"}


async def test_the_agent_that_parked_answers_on_a_thread_shared_by_agents(
    service: MakeService,
) -> None:
    tools = Tools()
    chatty_model = ScriptedModel(["Hi there."])
    careful_model = ScriptedModel([_delete(), "Deleted."])
    chatty = Agent("chatty", chatty_model)
    careful = Agent("careful", careful_model, tools=tools.build())
    svc = await service(chatty, careful)
    # The thread starts with one agent and goes on with another (the toolkit's app lets a
    # user switch agents in a conversation).
    first = await svc.client.post("/chatty/invoke", json={"message": "hi", "thread_id": "t"})
    assert first.status_code == 200
    response = await svc.client.post(
        "/careful/stream", json={"message": "delete a.txt", "thread_id": "t"}
    )
    interrupt_id = frames(response.text)[-2]["content"]["interrupt_id"]

    answer = await svc.client.post(f"/approvals/{interrupt_id}/invoke", json={"approved": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "Deleted."
    assert tools.ran == ["delete a.txt"]
    careful_model.assert_consumed()
    assert len(chatty_model.requests) == 1
    runs = await run_records(svc.state.store, "t")
    assert [r.agent for r in runs] == ["chatty", "careful", "careful"]
