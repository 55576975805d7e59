"""The OpenAI-compatible API, driven by the official `openai` SDK against a live server.

Each agent is a model; the agents run on scripted models, so each test states what the model
is asked and answers. The SDK talks to uvicorn on 127.0.0.1 (`tests.service._live`); what
the service stored is read back through its own endpoints with httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from parley.agents import Agent
from parley.errors import ModelError
from parley.messages import Base64Source, Msg, TextBlock, ToolCallBlock, URLSource
from parley.models import ChatResponse
from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel, Step
from parley.service import ServiceSettings, create_app
from parley.service.store import Store
from tests.sample_tools import add, send_email
from tests.service._live import running
from tests.service.conftest import MakeService

pytestmark = pytest.mark.timeout(120)


PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "2mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG, base64."""


def sum_answer(request: ChatRequest) -> str:
    """The answer after `add` ran: it quotes the tool's result the model was given."""
    [result] = request.messages[-1].tool_results
    return f"2 + 3 = {result.text}."


@pytest.fixture(autouse=True)
def _no_auth_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # ServiceSettings reads these; a developer's shell must not turn auth on here.
    for name in ("AUTH_SECRET", "PARLEY_AUTH_SECRET", "PARLEY_API_KEYS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"


AgentModel = tuple[Agent, ScriptedModel]


def agent(key: str, *steps: Step, max_iters: int = 10, chunk_delay: float = 0.0) -> AgentModel:
    """An agent on a streaming scripted model, with the tools `add` and `send_email`."""
    model = ScriptedModel(steps, stream=True, chunk_size=3, chunk_delay=chunk_delay)
    return Agent(
        key, model, system_prompt="You are terse.", tools=[add, send_email], max_iters=max_iters
    ), model


@contextlib.asynccontextmanager
async def serve(
    db_url: str, *agents: Agent, api_key: str = "unused", **settings: Any
) -> AsyncIterator[tuple[openai.AsyncOpenAI, httpx.AsyncClient]]:
    """The app on a live socket: the SDK's client on `/v1`, and an httpx client on the rest."""
    app: FastAPI = create_app(ServiceSettings(database_url=db_url, **settings), agents=agents)
    headers = {"Authorization": f"Bearer {api_key}"}
    with running(app) as url:
        async with (
            openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0) as sdk,
            httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http,
        ):
            yield sdk, http


async def run_status(http: httpx.AsyncClient, run_id: str, *, timeout: float = 10.0) -> str:
    """The run's status once it has ended."""
    deadline = time.monotonic() + timeout
    while True:
        status: str = (await http.get(f"/runs/{run_id}")).json()["status"]
        if status != "running":
            return status
        assert time.monotonic() < deadline, f"run {run_id} still running after {timeout:g}s"
        await asyncio.sleep(0.02)


async def stored(http: httpx.AsyncClient, thread_id: str) -> list[Msg]:
    """A thread's messages, as the service stored them."""
    response = await http.get(f"/threads/{thread_id}")
    assert response.status_code == 200, response.text
    return [Msg.model_validate(m) for m in response.json()["messages"]]


async def read_into(seen: list[Any], stream: AsyncIterator[Any]) -> None:
    """Keep a stream's chunks in `seen` until it ends (or raises)."""
    async for chunk in stream:
        seen.append(chunk)  # noqa: PERF401  (what came before an error is kept)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def add_call(call_id: str, a: int, b: int) -> dict[str, Any]:
    """An OpenAI-style tool call of `add`, its arguments as the JSON text the wire carries."""
    arguments = json.dumps({"a": a, "b": b})
    return {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}


# -- models --------------------------------------------------------------------------------


async def test_models_are_the_agents(db_url: str) -> None:
    helper, _ = agent("helper")
    mailer, _ = agent("mailer")
    async with serve(db_url, helper, mailer) as (sdk, _http):
        models = [m async for m in sdk.models.list()]
        assert [m.id for m in models] == ["helper", "mailer"]
        assert {(m.object, m.owned_by) for m in models} == {("model", "parley")}
        assert all(isinstance(m.created, int) and m.created > 0 for m in models)

        one = await sdk.models.retrieve("mailer")
        assert (one.id, one.object) == ("mailer", "model")

        with pytest.raises(openai.NotFoundError) as caught:
            await sdk.models.retrieve("gpt-4o")
        assert caught.value.status_code == 404
        assert caught.value.code == "model_not_found"
        assert "helper, mailer" in caught.value.message


# -- answers ---------------------------------------------------------------------------------


async def test_a_plain_answer_with_usage_and_its_thread(db_url: str) -> None:
    helper, model = agent("helper", "Hello there, friend.")
    async with serve(db_url, helper) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper",
            messages=[user("Say hello to me")],
            temperature=0.2,  # sampling parameters are accepted, and left to the agent's model
            top_p=0.9,
            max_tokens=50,
            seed=7,
            user="end-user-42",
        )
        completion = raw.parse()
        thread_id, run_id = raw.headers["x-thread-id"], raw.headers["x-run-id"]

        assert completion.object == "chat.completion"
        assert completion.model == "helper"
        assert completion.id == f"chatcmpl-{run_id.removeprefix('run_')}"
        [choice] = completion.choices
        assert choice.message.role == "assistant"
        assert choice.message.content == "Hello there, friend."
        assert choice.message.tool_calls is None
        assert choice.finish_reason == "stop"
        # ScriptedModel counts words: the prompt's (system prompt included), and the
        # answer's plus one.
        assert completion.usage is not None
        assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (7, 4)
        assert completion.usage.total_tokens == 11
        assert completion.model_extra is not None
        assert completion.model_extra["parley"] == {
            "thread_id": thread_id,
            "run_id": run_id,
            "status": "completed",
            "interrupt_id": None,
        }

        [request] = model.requests
        assert [(m.role, m.text) for m in request.messages] == [
            ("system", "You are terse."),
            ("user", "Say hello to me"),
        ]
        assert [(m.role, m.text) for m in await stored(http, thread_id)] == [
            ("user", "Say hello to me"),
            ("assistant", "Hello there, friend."),
        ]
        run = (await http.get(f"/runs/{run_id}")).json()
        assert (run["status"], run["agent"], run["thread_id"]) == ("completed", "helper", thread_id)
        assert (run["usage"]["input_tokens"], run["usage"]["output_tokens"]) == (7, 4)
    model.assert_consumed()


async def test_streaming_deltas_join_into_the_answer_then_usage(db_url: str) -> None:
    answer = "Streaming works, one small piece at a time."
    helper, model = agent("helper", answer)
    async with serve(db_url, helper) as (sdk, _http):
        stream = await sdk.chat.completions.create(
            model="helper",
            messages=[user("Stream please")],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]

    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    assert {c.model for c in chunks} == {"helper"}
    first, *middle, last_choice, usage = chunks
    assert first.choices[0].delta.role == "assistant"
    assert first.choices[0].finish_reason is None
    pieces = [c.choices[0].delta.content for c in middle]
    assert len(pieces) > 3  # the model streamed in 3-character deltas, and so did the service
    assert "".join(p or "" for p in pieces) == answer
    assert all(c.choices[0].finish_reason is None for c in middle)
    assert last_choice.choices[0].finish_reason == "stop"
    assert not last_choice.choices[0].delta.content
    assert usage.choices == []
    assert usage.usage is not None
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens) == (5, 9)
    assert usage.usage.total_tokens == 14
    model.assert_consumed()


async def test_a_stream_without_include_usage_has_no_usage_chunk(db_url: str) -> None:
    helper, _ = agent("helper", "Short.")
    async with serve(db_url, helper) as (sdk, _http):
        stream = await sdk.chat.completions.create(
            model="helper", messages=[user("Hi")], stream=True
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None and c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Short."


async def test_the_agent_runs_its_tool_and_the_client_gets_the_final_text(db_url: str) -> None:
    call = ScriptedModel.tool_call("add", {"a": 2, "b": 3}, call_id="call_add")
    helper, model = agent("helper", call, sum_answer, call, sum_answer)
    async with serve(db_url, helper) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper", messages=[user("What is 2 + 3?")]
        )
        completion = raw.parse()
        [choice] = completion.choices
        assert choice.message.content == "2 + 3 = 5."
        assert choice.finish_reason == "stop"
        assert choice.message.tool_calls is None

        thread = await stored(http, raw.headers["x-thread-id"])
        assert [m.role for m in thread] == ["user", "assistant", "tool", "assistant"]
        assert thread[1].tool_calls[0].name == "add"
        assert thread[2].tool_results[0].text == "5"

        stream = await sdk.chat.completions.create(
            model="helper", messages=[user("And streamed?")], stream=True
        )
        chunks = [chunk async for chunk in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "2 + 3 = 5."
        assert chunks[-1].choices[0].finish_reason == "stop"
    # The tool's result reached the model, server-side, on both runs.
    assert [r.messages[-1].role for r in model.requests] == ["user", "tool", "user", "tool"]
    model.assert_consumed()


async def test_text_before_a_tool_call_is_in_the_answer_alike_whole_or_streamed(
    db_url: str,
) -> None:
    def narrated() -> ChatResponse:
        call = ToolCallBlock(id="call_add", name="add", input={"a": 2, "b": 3})
        return ChatResponse(content=[TextBlock(text="Let me add."), call])

    helper, model = agent("helper", narrated(), sum_answer, narrated(), sum_answer)
    async with serve(db_url, helper) as (sdk, _http):
        whole = await sdk.chat.completions.create(model="helper", messages=[user("2 + 3?")])
        stream = await sdk.chat.completions.create(
            model="helper", messages=[user("2 + 3?")], stream=True
        )
        streamed = "".join(
            [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        )
    assert whole.choices[0].message.content == "Let me add.\n\n2 + 3 = 5."
    assert streamed == whole.choices[0].message.content
    model.assert_consumed()


async def test_the_iteration_limit_ends_with_length(db_url: str) -> None:
    call = ScriptedModel.tool_call("add", {"a": 1, "b": 1}, call_id="call_add")
    helper, model = agent("helper", call, max_iters=1)
    async with serve(db_url, helper) as (sdk, _http):
        completion = await sdk.chat.completions.create(model="helper", messages=[user("Loop")])
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == ""
    assert completion.model_extra is not None
    assert completion.model_extra["parley"]["status"] == "max_iters"
    model.assert_consumed()


async def test_a_call_that_needs_approval_parks_the_run_and_says_so(db_url: str) -> None:
    call = ScriptedModel.tool_call("send_email", {"to": "ada@example.org"}, call_id="call_mail")
    mailer, model = agent("mailer", call, "Sent it.")
    async with serve(db_url, mailer) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="mailer", messages=[user("Email Ada")]
        )
        completion = raw.parse()
        assert completion.choices[0].finish_reason == "stop"
        assert completion.model_extra is not None
        parley = completion.model_extra["parley"]
        assert parley["status"] == "awaiting_approval"
        assert parley["interrupt_id"]
        # The interrupt is the service's usual one: approving it finishes the run.
        approved = await http.post(
            f"/approvals/{parley['interrupt_id']}/invoke", json={"approved": True}
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["content"] == "Sent it."
        thread = await stored(http, raw.headers["x-thread-id"])
        assert thread[-2].tool_results[0].text == "sent to ada@example.org"
    model.assert_consumed()


# -- the conversation and threads ------------------------------------------------------------


async def test_the_whole_history_in_messages_reaches_the_model(db_url: str) -> None:
    helper, model = agent("helper", "It was 5.")
    history: list[Any] = [
        {"role": "developer", "content": "Answer in one line."},
        user("What is 2 + 3?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [add_call("call_1", 2, 3), add_call("call_2", 0, 0)],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "0"}]},
        {"role": "assistant", "content": "2 + 3 = 5."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What was it again? See"},
                {"type": "image_url", "image_url": {"url": "https://example.org/sum.png"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
            ],
        },
    ]
    async with serve(db_url, helper) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(model="helper", messages=history)
        assert raw.parse().choices[0].message.content == "It was 5."
        thread = await stored(http, raw.headers["x-thread-id"])

    [request] = model.requests
    sent = request.messages
    assert [m.role for m in sent] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert [sent[0].text, sent[1].text] == ["You are terse.", "Answer in one line."]
    assert [(c.id, c.name, c.input) for c in sent[3].tool_calls] == [
        ("call_1", "add", {"a": 2, "b": 3}),
        ("call_2", "add", {"a": 0, "b": 0}),
    ]
    # One tool message per round of results, as parley keeps them; names from the calls.
    assert [(r.tool_call_id, r.name, r.text) for r in sent[4].tool_results] == [
        ("call_1", "add", "5"),
        ("call_2", "add", "0"),
    ]
    assert sent[5].text == "2 + 3 = 5."
    assert sent[6].text == "What was it again? See"
    by_url, inline = sent[6].get_blocks("image")
    assert isinstance(by_url.source, URLSource)
    assert by_url.source.url == "https://example.org/sum.png"
    assert isinstance(inline.source, Base64Source)
    assert (inline.source.media_type, inline.source.data) == ("image/png", PIXEL)
    # The thread holds the request's conversation, then the answer.
    assert [m.role for m in thread] == [m.role for m in sent[1:]] + ["assistant"]
    assert thread[-1].text == "It was 5."
    model.assert_consumed()


async def test_x_thread_id_continues_a_stored_thread(db_url: str) -> None:
    def questions(request: ChatRequest) -> str:
        return " | ".join(m.text for m in request.messages if m.role == "user")

    helper, model = agent("helper", "First answer.", questions, questions)
    async with serve(db_url, helper) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper", messages=[user("First question")]
        )
        thread_id = raw.headers["x-thread-id"]

        # The stored thread is the conversation: of the request, only the last message is new.
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper",
            messages=[
                user("A question the thread never had"),
                {"role": "assistant", "content": "An answer it never gave"},
                user("Second question"),
            ],
            extra_headers={"X-Thread-Id": thread_id},
        )
        assert raw.headers["x-thread-id"] == thread_id
        assert raw.parse().choices[0].message.content == "First question | Second question"
        assert [(m.role, m.text) for m in model.requests[1].messages[1:]] == [
            ("user", "First question"),
            ("assistant", "First answer."),
            ("user", "Second question"),
        ]
        assert len(await stored(http, thread_id)) == 4

        # An id of the client's own that no thread has yet: made, and seeded from the request.
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper",
            messages=[user("Earlier"), {"role": "assistant", "content": "Sure."}, user("Now")],
            extra_headers={"X-Thread-Id": "my-chat-1"},
        )
        assert raw.headers["x-thread-id"] == "my-chat-1"
        assert raw.parse().choices[0].message.content == "Earlier | Now"
        assert [m.text for m in await stored(http, "my-chat-1")] == [
            "Earlier",
            "Sure.",
            "Now",
            "Earlier | Now",
        ]
        listed = (await http.get("/threads")).json()["threads"]
        assert {t["thread_id"] for t in listed} == {thread_id, "my-chat-1"}
    model.assert_consumed()


# -- errors ------------------------------------------------------------------------------------


async def test_an_unknown_model_is_not_found(db_url: str) -> None:
    helper, model = agent("helper")
    async with serve(db_url, helper) as (sdk, _http):
        with pytest.raises(openai.NotFoundError) as caught:
            await sdk.chat.completions.create(model="gpt-4o", messages=[user("Hi")])
    assert caught.value.code == "model_not_found"
    assert caught.value.param == "model"
    assert caught.value.type == "invalid_request_error"
    assert "'gpt-4o' does not exist" in caught.value.message
    assert model.requests == []


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "own tools"),
        ({"tool_choice": "required"}, "tool_choice", "own tools"),
        ({"n": 2}, "n", "n must be 1"),
        ({"response_format": {"type": "json_object"}}, "response_format", "plain text"),
        (
            {"messages": [user("Hi"), {"role": "assistant", "content": "Hey"}]},
            "messages[1].role",
            "the user's",
        ),
        ({"messages": [{"role": "user"}]}, "messages[0].content", "Field required"),
        ({"messages": []}, "messages", "at least 1"),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0]", "'function'"),
        (
            {"messages": [{"role": "user", "content": [{"type": "video", "video": "x"}]}]},
            "messages[0].content[0]",
            "'video'",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}
                        ],
                    }
                ]
            },
            "messages[0].content[0].image_url.url",
            "http(s):// URL or a data: URL",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": "nope", "content": "1"}, user("Hi")]},
            "messages[0].tool_call_id",
            "answers no tool call",
        ),
        ({"extra_headers": {"X-Thread-Id": "x" * 129}}, "X-Thread-Id", "a thread id is"),
    ],
)
async def test_bad_requests_are_400_naming_the_field(
    db_url: str, fields: dict[str, Any], param: str, words: str
) -> None:
    helper, model = agent("helper")
    request: dict[str, Any] = {"model": "helper", "messages": [user("Hi")], **fields}
    async with serve(db_url, helper) as (sdk, _http):
        with pytest.raises(openai.BadRequestError) as caught:
            await sdk.chat.completions.create(**request)
    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"
    assert words in caught.value.message
    assert model.requests == []


async def test_a_failed_run_is_a_server_error_whole_or_an_error_frame_streamed(
    db_url: str,
) -> None:
    narrated = ChatResponse(
        content=[
            TextBlock(text="Let me add."),
            ToolCallBlock(id="call_add", name="add", input={"a": 2, "b": 3}),
        ]
    )
    steps = [ModelError("the provider is down"), narrated, ModelError("down mid-stream")]
    helper, model = agent("helper", *steps)
    async with serve(db_url, helper) as (sdk, http):
        with pytest.raises(openai.InternalServerError) as caught:
            await sdk.chat.completions.create(model="helper", messages=[user("Hi")])
        assert caught.value.status_code == 502
        assert caught.value.type == "server_error"
        assert "the provider is down" in caught.value.message
        run_id = caught.value.response.headers["x-run-id"]
        assert await run_status(http, run_id) == "error"

        # Mid-stream: the chunks so far, then an error frame, which the SDK raises.
        stream = await sdk.chat.completions.create(
            model="helper", messages=[user("Add 2 and 3")], stream=True
        )
        seen: list[Any] = []
        with pytest.raises(openai.APIError) as streamed:
            await read_into(seen, stream)
    assert seen[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in seen) == "Let me add."
    assert streamed.value.message == "the run failed: down mid-stream"
    assert isinstance(streamed.value.body, dict)
    assert streamed.value.body["type"] == "server_error"
    model.assert_consumed()


async def test_closing_a_stream_stops_the_run(db_url: str) -> None:
    helper, model = agent("helper", "word " * 200, chunk_delay=0.02)
    async with serve(db_url, helper) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper", messages=[user("Talk")], stream=True
        )
        run_id = raw.headers["x-run-id"]
        stream = raw.parse()
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        await stream.close()
        assert await run_status(http, run_id) == "interrupted"
        thread = await stored(http, raw.headers["x-thread-id"])
        assert thread[-1].metadata["interrupted"] is True
        assert 0 < len(thread[-1].text) < len("word " * 200)
    model.assert_consumed()


async def test_api_keys_guard_v1_with_openai_errors(db_url: str) -> None:
    store = await Store.open(db_url)
    try:
        key, _ = await store.create_api_key("alice")
        bobs, _ = await store.create_api_key("bob")
    finally:
        await store.close()
    helper, model = agent("helper", "Hello, Alice.", "Hello, Bob.")
    async with serve(db_url, helper, api_key=key, api_keys=True) as (sdk, http):
        raw = await sdk.chat.completions.with_raw_response.create(
            model="helper", messages=[user("Hi")]
        )
        assert raw.parse().choices[0].message.content == "Hello, Alice."

        # Alice's thread id names a thread of Bob's own when he sends it: hers is untouched.
        bob = sdk.with_options(api_key=bobs)
        thread_id = raw.headers["x-thread-id"]
        his = await bob.chat.completions.with_raw_response.create(
            model="helper", messages=[user("Let me in")], extra_headers={"X-Thread-Id": thread_id}
        )
        assert his.headers["x-thread-id"] == thread_id
        assert his.parse().choices[0].message.content == "Hello, Bob."
        hers = await http.get(f"/threads/{thread_id}", headers={"Authorization": f"Bearer {key}"})
        assert [m["content"][0]["text"] for m in hers.json()["messages"]] == [
            "Hi",
            "Hello, Alice.",
        ]

        wrong = sdk.with_options(api_key="not-a-key")
        with pytest.raises(openai.AuthenticationError) as caught:
            await wrong.chat.completions.create(model="helper", messages=[user("Hi")])
        assert caught.value.code == "invalid_api_key"
        assert "invalid or revoked API key" in caught.value.message
        assert caught.value.response.headers["www-authenticate"] == "Bearer"
        with pytest.raises(openai.AuthenticationError):
            await wrong.models.list()

        # The rest of the service keeps its own error shape.
        refused = await http.get("/threads", headers={"Authorization": "Bearer not-a-key"})
        assert refused.status_code == 401
        assert refused.json() == {"detail": "invalid or revoked API key"}
    model.assert_consumed()


async def test_other_paths_keep_their_error_shape(service: MakeService) -> None:
    helper, _ = agent("helper")
    svc = await service(helper)
    refused = await svc.client.post("/invoke", json={"message": 3})
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "message"]
    missing = await svc.client.get("/threads/nope")
    assert missing.json() == {"detail": "thread 'nope' not found"}

    v1 = await svc.client.post("/v1/chat/completions", json={"model": "helper"})
    assert v1.status_code == 400
    assert v1.json() == {
        "error": {
            "message": "messages: Field required",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    }
    # Bodies are standard JSON there too: a lone surrogate cannot be stored.
    body = b'{"model": "helper", "messages": [{"role": "user", "content": "\\ud800"}]}'
    surrogate = await svc.client.post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert surrogate.status_code == 400
    assert surrogate.json()["error"]["param"] is None
    assert "lone surrogate" in surrogate.json()["error"]["message"]

    # A wrong method keeps its `Allow` header in OpenAI's shape too.
    wrong_method = await svc.client.get("/v1/chat/completions")
    assert wrong_method.status_code == 405
    assert wrong_method.headers["allow"] == "POST"
    assert wrong_method.json()["error"]["type"] == "invalid_request_error"

    schema = (await svc.client.get("/openapi.json")).json()
    assert {"/v1/models", "/v1/models/{model_id}", "/v1/chat/completions"} <= set(schema["paths"])
