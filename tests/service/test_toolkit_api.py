"""agent-service-toolkit's endpoints: the same JSON, the same frames, the same errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.compat.service_toolkit import ChatHistory, ChatMessage, ServiceMetadata
from parley.messages import Msg
from parley.models.testing import ScriptedModel
from tests.sample_tools import add
from tests.service.conftest import MakeService


def calc_agent(*steps: Any, name: str = "calc") -> Agent:
    return Agent(name, ScriptedModel(list(steps), stream=True), tools=[add], description="Adds")


def tool_round(answer: str = "It is 3.") -> list[Any]:
    return [ScriptedModel.tool_call("add", {"a": 1, "b": 2}, call_id="call_1"), answer]


def frames(body: str) -> list[Any]:
    """The JSON of each `data:` frame, `"[DONE]"` as is; fails on any other line."""
    out: list[Any] = []
    for line in body.split("\n"):
        if not line:
            continue
        assert line.startswith("data: "), f"a line that is not a data frame: {line!r}"
        data = line[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_info_lists_agents_and_toolkit_model_names(service: MakeService) -> None:
    svc = await service(calc_agent(), Agent("echo", ScriptedModel([]), description="Echoes"))
    response = await svc.client.get("/info")
    assert response.status_code == 200
    info = ServiceMetadata.model_validate(response.json())
    assert [(a.key, a.description) for a in info.agents] == [("calc", "Adds"), ("echo", "Echoes")]
    assert info.default_agent == "calc"
    # Names every release of the toolkit's AllModelEnum knows (since March 2025), or its
    # client refuses the whole answer: `gpt-4o-mini` is gone from the current one.
    assert info.models == ["fake", "openai-compatible"]
    assert info.default_model == "fake"


async def test_invoke_answers_with_the_final_ai_message(service: MakeService) -> None:
    svc = await service(calc_agent(*tool_round()))
    response = await svc.client.post("/calc/invoke", json={"message": "1+2?"})
    assert response.status_code == 200
    body = response.json()
    message = ChatMessage.model_validate(body)
    assert (message.type, message.content) == ("ai", "It is 3.")
    assert message.run_id == response.headers["x-run-id"]
    assert body["thread_id"] == response.headers["x-thread-id"]
    assert message.response_metadata["usage_metadata"]["output_tokens"] > 0
    run = await svc.client.get(f"/runs/{message.run_id}")
    assert run.json()["status"] == "completed"


async def test_invoke_without_agent_uses_the_default(service: MakeService) -> None:
    svc = await service(calc_agent("hello"), Agent("other", ScriptedModel([])))
    response = await svc.client.post("/invoke", json={"message": "hi"})
    assert response.json()["content"] == "hello"


async def test_a_thread_carries_the_conversation(service: MakeService) -> None:
    agent = calc_agent("first answer", "second answer")
    svc = await service(agent)
    first = await svc.client.post("/invoke", json={"message": "one"})
    thread_id = first.json()["thread_id"]
    second = await svc.client.post("/invoke", json={"message": "two", "thread_id": thread_id})
    assert second.json()["thread_id"] == thread_id
    model = agent.model
    assert isinstance(model, ScriptedModel)
    seen = [m.text for m in model.requests[-1].messages if m.role != "system"]
    assert seen == ["one", "first answer", "two"]


async def test_client_chosen_thread_id_is_kept(service: MakeService) -> None:
    svc = await service(calc_agent("ok"))
    response = await svc.client.post("/invoke", json={"message": "hi", "thread_id": "my-thread"})
    assert response.headers["x-thread-id"] == "my-thread"
    history = await svc.client.post("/history", json={"thread_id": "my-thread"})
    assert [m["content"] for m in history.json()["messages"]] == ["hi", "ok"]


async def test_stream_sends_toolkit_frames_then_done(service: MakeService) -> None:
    svc = await service(calc_agent(*tool_round("It is three.")))
    response = await svc.client.post("/calc/stream", json={"message": "1+2?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    run_id, thread_id = response.headers["x-run-id"], response.headers["x-thread-id"]
    got = frames(response.text)
    assert got[-1] == "[DONE]"
    kinds = [f["type"] for f in got[:-1]]
    assert kinds[:2] == ["message", "message"]
    assert set(kinds[2:-1]) == {"token"}
    assert kinds[-1] == "message"
    call, result, *_, answer = (f["content"] for f in got[:-1])
    assert call["type"] == "ai"
    assert call["tool_calls"] == [
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}
    ]
    assert (result["type"], result["content"], result["tool_call_id"]) == ("tool", "3", "call_1")
    tokens = "".join(f["content"] for f in got if isinstance(f, dict) and f["type"] == "token")
    assert tokens == answer["content"] == "It is three."
    for message in (call, result, answer):
        assert (message["run_id"], message["thread_id"]) == (run_id, thread_id)
        ChatMessage.model_validate(message)


async def test_stream_without_tokens_sends_messages_only(service: MakeService) -> None:
    svc = await service(calc_agent("plain answer"))
    response = await svc.client.post("/calc/stream", json={"message": "hi", "stream_tokens": False})
    got = frames(response.text)
    assert [f["type"] for f in got[:-1]] == ["message"]
    assert got[0]["content"]["content"] == "plain answer"


async def test_stream_in_parley_mode_sends_agent_events(service: MakeService) -> None:
    svc = await service(calc_agent(*tool_round()))
    response = await svc.client.post("/calc/stream", json={"message": "1+2?", "events": "parley"})
    got = frames(response.text)
    assert got[-1] == "[DONE]"
    events = got[:-1]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_ended"
    for expected in ("tool_call_started", "tool_call_ended", "tool_result", "text_delta"):
        assert expected in kinds
    assert events[-1]["status"] == "completed"
    assert events[-1]["usage"]["output_tokens"] > 0
    assert {e["run_id"] for e in events} == {response.headers["x-run-id"]}
    assert {e["thread_id"] for e in events} == {response.headers["x-thread-id"]}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/nope/invoke", {"message": "hi"}),
        ("POST", "/nope/stream", {"message": "hi"}),
    ],
)
async def test_unknown_agent_is_404_before_any_frame(
    service: MakeService, method: str, path: str, body: dict[str, Any]
) -> None:
    svc = await service(calc_agent())
    response = await svc.client.request(method, path, json=body)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": "agent 'nope' not found"}


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/invoke", {}, ["body", "message"]),
        ("/invoke", {"message": 5}, ["body", "message"]),
        ("/stream", {"message": "hi", "stream_tokens": "many"}, ["body", "stream_tokens"]),
        ("/stream", {"message": "hi", "events": "xml"}, ["body", "events"]),
        ("/invoke", {"message": "hi", "model": "no-such-model"}, ["body", "model"]),
        ("/invoke", {"message": "hi", "thread_id": ""}, ["body", "thread_id"]),
        ("/history", {}, ["body", "thread_id"]),
        ("/feedback", {"run_id": "r", "key": "k"}, ["body", "score"]),
    ],
)
async def test_invalid_input_is_422_naming_the_field(
    service: MakeService, path: str, body: dict[str, Any], loc: list[str]
) -> None:
    svc = await service(calc_agent())
    response = await svc.client.post(path, json=body)
    assert response.status_code == 422
    details = response.json()["detail"]
    assert loc in [d["loc"] for d in details]
    assert all(d["msg"] for d in details)


async def test_body_that_is_not_json_is_refused_clearly(service: MakeService) -> None:
    svc = await service(calc_agent())
    headers = {"content-type": "application/json"}
    response = await svc.client.post("/invoke", content=b"{not json", headers=headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"
    # Bytes that are not even UTF-8 text: the same 422, with the reason.
    response = await svc.client.post("/invoke", content=b"\xff\xfe{", headers=headers)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["type"] == "json_invalid"
    assert "utf-8" in error["ctx"]["error"]


async def test_history_reads_the_thread_back(service: MakeService) -> None:
    svc = await service(calc_agent(*tool_round()))
    invoked = await svc.client.post("/invoke", json={"message": "1+2?"})
    thread_id, run_id = invoked.json()["thread_id"], invoked.json()["run_id"]
    response = await svc.client.post("/history", json={"thread_id": thread_id})
    assert response.status_code == 200
    history = ChatHistory.model_validate(response.json())
    assert [(m.type, m.content) for m in history.messages] == [
        ("human", "1+2?"),
        ("ai", ""),
        ("tool", "3"),
        ("ai", "It is 3."),
    ]
    assert {m.run_id for m in history.messages} == {run_id}
    assert history.messages[1].tool_calls[0]["name"] == "add"


async def test_history_leaves_system_messages_out(service: MakeService) -> None:
    svc = await service(calc_agent("ok"))
    await svc.client.post("/invoke", json={"message": "hi", "thread_id": "t1"})
    # A system message in a thread (an announcement, a summary) is the agent's business.
    await svc.state.store.add_messages("t1", "local", [Msg.system("Be brief.")], None)
    response = await svc.client.post("/history", json={"thread_id": "t1"})
    assert [m["type"] for m in response.json()["messages"]] == ["human", "ai"]


async def test_history_of_a_thread_never_used_is_empty(service: MakeService) -> None:
    svc = await service(calc_agent())
    response = await svc.client.post("/history", json={"thread_id": "never-used"})
    assert response.status_code == 200
    assert response.json()["messages"] == []


async def test_feedback_is_stored(service: MakeService) -> None:
    svc = await service(calc_agent("ok"))
    run_id = (await svc.client.post("/invoke", json={"message": "hi"})).json()["run_id"]
    response = await svc.client.post(
        "/feedback",
        json={"run_id": run_id, "key": "human-feedback-stars", "score": 0.8, "kwargs": {"a": 1}},
    )
    assert response.status_code == 200
    assert response.json() == {"status": "success"}
    stored = await svc.state.store.get_feedback(run_id)
    assert stored == [
        {"key": "human-feedback-stars", "score": 0.8, "kwargs": {"a": 1}, "user_id": "local"}
    ]


async def test_feedback_on_an_unknown_run_is_404(service: MakeService) -> None:
    svc = await service(calc_agent())
    response = await svc.client.post("/feedback", json={"run_id": "nope", "key": "k", "score": 1})
    assert response.status_code == 404


async def test_health(service: MakeService) -> None:
    svc = await service(calc_agent())
    response = await svc.client.get("/health")
    assert response.json() == {"status": "ok"}


async def test_the_page_is_served_at_the_root(service: MakeService) -> None:
    svc = await service(calc_agent())
    response = await svc.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<title>" in response.text


async def test_unknown_path_is_a_json_or_page_404_not_a_500(service: MakeService) -> None:
    svc = await service(calc_agent())
    for method, path in [("GET", "/nope.js"), ("POST", "/threads/x/y"), ("GET", "/runs/x")]:
        response = await svc.client.request(method, path)
        assert response.status_code in (404, 405), (method, path, response.status_code)


async def test_failing_model_gives_502_with_a_reason(service: MakeService) -> None:
    from parley.errors import ModelConnectionError  # noqa: PLC0415

    svc = await service(calc_agent(ModelConnectionError("the model host is down")))
    response = await svc.client.post("/invoke", json={"message": "hi"})
    assert response.status_code == 502
    assert "the model host is down" in response.json()["detail"]
    assert "Traceback" not in response.text


def test_asgi_transport_sanity() -> None:
    # The suite drives the app through httpx's ASGI transport; that the toolkit's paths are
    # the routes FastAPI really has is checked against its OpenAPI schema.
    from parley.service import create_app  # noqa: PLC0415

    app = create_app(agents=[calc_agent()])
    paths = set(app.openapi()["paths"])
    for path in (
        "/info",
        "/invoke",
        "/{agent_id}/invoke",
        "/stream",
        "/{agent_id}/stream",
        "/history",
        "/feedback",
        "/health",
    ):
        assert path in paths
    assert isinstance(httpx.ASGITransport(app=app), httpx.AsyncBaseTransport)
