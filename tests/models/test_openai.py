"""`OpenAIChatModel` through the real `openai` SDK against the local wire-format server."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.errors import (
    ConfigurationError,
    ContentFilterError,
    ContextLengthError,
    MissingDependencyError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeoutError,
    RateLimitError,
    UserError,
)
from parley.models import ChatStream
from parley.providers.openai import OpenAIChatModel, OpenAICredential
from parley.providers.openai.server import HTTPError, OpenAIServer, Raw, Reply, Reset, ToolCall

pytest_plugins = ["tests.models.openai_fixtures"]

ModelFactory = Callable[..., Any]
"""The `make_model` fixture (see `openai_fixtures`)."""

HI = [Msg.user("Hi")]
TOOLS: list[dict[str, Any]] = [
    {"name": "weather", "description": "Weather.", "parameters": {"type": "object"}},
    {"name": "time", "description": "Time.", "parameters": {"type": "object"}},
]


# -- answers --------------------------------------------------------------------------------


async def test_whole_answer_with_usage(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="Hello!", input_tokens=12, output_tokens=3, cached_tokens=8))
    response = await make_model().chat(HI)
    assert response.text == "Hello!"
    assert response.is_last
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4o-mini"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.cached_tokens == 8
    assert response.usage.elapsed > 0
    assert server.bodies() == [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    ]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    server.assert_consumed()


async def test_stream_deltas_then_the_whole(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="Hello, world", chunk_size=5, input_tokens=4, output_tokens=3))
    chunks = [chunk async for chunk in make_model().chat_stream(HI)]
    assert [c.text for c in chunks[:-1]] == ["Hello", ", wor", "ld"]
    assert not any(c.is_last for c in chunks[:-1])
    final = chunks[-1]
    assert final.is_last
    assert final.text == "Hello, world"
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (4, 3)
    body = server.bodies()[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_streams_and_calls_reuse_one_connection(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    model = make_model()
    await model.chat_stream(HI).collect()
    await model.chat_stream(HI).collect()
    await model.chat(HI)
    assert len({request.client_port for request in server.requests}) == 1


async def test_call_dispatches_on_stream_flag(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="streamed"))
    stream = await make_model(stream=True)(HI)
    assert isinstance(stream, ChatStream)
    final = await stream.collect()
    assert final.text == "streamed"


async def test_parallel_tool_calls_streamed(server: OpenAIServer, make_model: ModelFactory) -> None:
    calls = [
        ToolCall("weather", {"city": "Paris"}, "call_a"),
        ToolCall("time", {"tz": "CET"}, "call_b"),
    ]
    server.add(Reply(tool_calls=calls, chunk_size=3))
    chunks = [c async for c in make_model().chat_stream(HI, tools=TOOLS)]
    final = chunks[-1]
    assert final.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.input) for c in final.tool_calls] == [
        ("call_a", "weather", {"city": "Paris"}),
        ("call_b", "time", {"tz": "CET"}),
    ]
    streamed = "".join(c.tool_calls[0].raw_input or "" for c in chunks[:-1] if c.tool_calls)
    assert streamed == '{"city": "Paris"}{"tz": "CET"}'


async def test_tool_calls_whole(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(tool_calls=[ToolCall("weather", '{"city": "Par', "call_x")]))
    response = await make_model().chat(HI, tools=TOOLS)
    (call,) = response.tool_calls
    # Broken JSON arguments are kept raw for the tool layer to repair.
    assert (call.id, call.name, call.input, call.raw_input) == (
        "call_x",
        "weather",
        {},
        '{"city": "Par',
    )


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("time", {"type": "function", "function": {"name": "time"}}),
    ],
)
async def test_tool_choice_on_the_wire(
    server: OpenAIServer, make_model: ModelFactory, choice: str, wire: Any
) -> None:
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": False}).chat(HI, TOOLS, choice)
    body = server.bodies()[0]
    assert body["tool_choice"] == wire
    assert body["parallel_tool_calls"] is False
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather.",
            "parameters": {"type": "object"},
        },
    }


async def test_no_tool_fields_without_tools(server: OpenAIServer, make_model: ModelFactory) -> None:
    # OpenAI refuses tool_choice and parallel_tool_calls when no tools are given.
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": True}).chat(HI, tool_choice="none")
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(server.bodies()[0])


async def test_parameters_on_the_wire(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    model = make_model(parameters={"temperature": 0.5, "max_tokens": 100})
    await model.chat(HI, reasoning_effort="low", seed=7, stop=["END"])
    body = server.bodies()[0]
    assert body["temperature"] == 0.5
    assert body["max_completion_tokens"] == 100
    assert "max_tokens" not in body
    assert (body["reasoning_effort"], body["seed"], body["stop"]) == ("low", 7, ["END"])


async def test_unknown_parameter_is_a_user_error(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="unknown parameter 'temprature'"):
        await make_model().chat(HI, temprature=1)


# -- structured output ----------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_by_forced_tool(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(tool_calls=[ToolCall("generate_response", {"name": "Paris", "population": 2})])
    )
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "forced"
    assert result.parsed == City(name="Paris", population=2)
    body = server.bodies()[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "generate_response"}}
    assert body["tools"][0]["function"]["parameters"] == City.model_json_schema()


async def test_structured_output_falls_back_when_tool_choice_is_refused(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "tool_choice is not supported", code="invalid_request"),
        Reply(text='{"name": "Oslo", "population": 1}'),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "native"
    assert result.content == {"name": "Oslo", "population": 1}
    second = server.bodies()[1]
    assert second["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": City.model_json_schema()},
    }
    assert "tools" not in second
    server.assert_consumed()


# -- retries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limited",
    # The fixture's backoff waits near zero, so a wait of 0.10 s can only be the header's.
    [HTTPError.rate_limit(retry_after=0.1), HTTPError.rate_limit(retry_after_ms=100)],
    ids=["retry-after", "retry-after-ms"],
)
async def test_429_waits_what_retry_after_asks(
    server: OpenAIServer,
    make_model: ModelFactory,
    limited: HTTPError,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.add(limited, Reply(text="ok"))
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await make_model().chat(HI)
    assert response.text == "ok"
    # The wait the retry chose, as it logs it before sleeping: the header's, not a backoff.
    assert "retry 1 of" in caplog.text
    assert "in 0.10s" in caplog.text
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 503, 408, 409])
async def test_retryable_statuses_are_retried(
    server: OpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.add(HTTPError(status), Reply(text="ok"))
    assert (await make_model().chat(HI)).text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(
    server: OpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.add(HTTPError(status, "nope", code="bad"), Reply(text="unused"))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model().chat(HI)
    assert caught.value.status_code == status
    assert caught.value.body == {
        "error": {
            "message": "nope",
            "type": "invalid_request_error",
            "param": None,
            "code": "bad",
        }
    }
    assert "nope" in str(caught.value)
    assert len(server.requests) == 1


async def test_retries_give_up_after_max_retries(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(500), HTTPError(502), HTTPError(503))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(max_retries=2).chat(HI)
    assert caught.value.status_code == 503
    server.assert_consumed()


async def test_connection_reset_is_retried(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reset(), Reply(text="ok"))
    assert (await make_model().chat(HI)).text == "ok"


async def test_stream_failing_before_its_first_chunk_is_retried(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(503), Reset(), Reply(text="third time"))
    final = await make_model().chat_stream(HI).collect()
    assert final.text == "third time"
    assert len(server.requests) == 3


async def test_stream_cut_after_its_first_chunk_raises_and_is_not_retried(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdefghijkl", chunk_size=2, cut_after=3), Reply(text="unused"))
    stream = make_model().chat_stream(HI)
    seen: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            seen.append(chunk.text)  # noqa: PERF401  (the chunks before the failure count)

    with pytest.raises(ModelConnectionError):
        await read()
    assert seen == ["ab", "cd"]
    assert stream.response is not None
    assert stream.response.finish_reason == "error"
    assert stream.response.text == "abcd"
    assert len(server.requests) == 1


async def test_malformed_chunk_is_an_output_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, malformed_at=2))
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        await make_model().chat_stream(HI).collect()


async def test_malformed_body_is_an_output_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Raw(b'{"choices": ['))
    with pytest.raises(ModelOutputError):
        await make_model().chat(HI)


async def test_error_event_in_a_stream(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, error_at=2))
    with pytest.raises(ModelHTTPError, match="The server had an error") as caught:
        await make_model(max_retries=0).chat_stream(HI).collect()
    assert caught.value.status_code == 500


async def test_slow_answer_past_the_timeout(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="late", delay=1.0))
    with pytest.raises(ModelTimeoutError):
        await make_model(timeout=0.2, max_retries=0).chat(HI)


async def test_stream_stalling_past_the_timeout(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, chunk_delay=0.6))
    with pytest.raises(ModelTimeoutError):
        await make_model(timeout=0.3, max_retries=0).chat_stream(HI).collect()


# -- error mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (HTTPError.rate_limit(retry_after=7), RateLimitError),
        (HTTPError(400, "too long", code="context_length_exceeded"), ContextLengthError),
        (HTTPError(400, "This model's maximum context length is 8192 tokens"), ContextLengthError),
        (HTTPError(400, "filtered", code="content_filter"), ContentFilterError),
        (HTTPError(418, "teapot"), ModelHTTPError),
    ],
)
async def test_status_errors_map_to_the_tree(
    server: OpenAIServer, make_model: ModelFactory, step: HTTPError, error: type[Exception]
) -> None:
    server.add(step)
    with pytest.raises(error) as caught:
        await make_model(max_retries=0).chat(HI)
    assert type(caught.value) is error
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == 7
        assert caught.value.status_code == 429


async def test_unreachable_server_is_a_connection_error(make_model: ModelFactory) -> None:
    with OpenAIServer() as gone:
        credential = gone.credential()
    with pytest.raises(ModelConnectionError, match="cannot reach openai"):
        await make_model(credential=credential, max_retries=0).chat(HI)


# -- cancellation and cache ------------------------------------------------------------------


async def test_cancel_ends_with_interrupted_and_closes_the_connection(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="x" * 200, chunk_size=1, chunk_delay=0.02))
    stream = make_model().chat_stream(HI)
    first = await anext(stream)
    assert first.text == "x"
    stream.cancel()
    final = await anext(stream)
    assert final.is_last
    assert final.finish_reason == "interrupted"
    assert final.text.startswith("x")
    deadline = time.monotonic() + 5
    while not server.requests[0].disconnected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert server.requests[0].disconnected


async def test_cache_answers_a_repeated_call(
    server: OpenAIServer, make_model: ModelFactory, tmp_path: Any
) -> None:
    server.add(Reply(text="cached answer", tool_calls=[ToolCall("weather", {"city": "Rome"})]))
    model = make_model(cache_dir=tmp_path)
    first = await model.chat(HI, tools=TOOLS)
    again = await model.chat(HI, tools=TOOLS)
    assert again.content == first.content
    assert len(server.requests) == 1


async def test_cached_stream_replays_as_a_stream(
    server: OpenAIServer, make_model: ModelFactory, tmp_path: Any
) -> None:
    server.add(Reply(text="streamed once", chunk_size=3))
    model = make_model(cache_dir=tmp_path)
    live = [c async for c in model.chat_stream(HI)]
    replayed = [c async for c in model.chat_stream(HI)]
    assert len(server.requests) == 1
    assert replayed[-1].is_last
    assert not replayed[0].is_last
    assert replayed[-1].text == live[-1].text == "streamed once"


# -- sync twins, configuration, secrets ------------------------------------------------------


def test_sync_twins(server: OpenAIServer) -> None:
    server.add(Reply(text="sync"), Reply(text="sync stream", chunk_size=4))
    model = OpenAIChatModel(server.credential(), "gpt-4o-mini")
    assert model.chat_sync(HI).text == "sync"
    chunks = list(model.chat_stream_sync(HI))
    assert chunks[-1].text == "sync stream"
    model.close_sync()


async def test_missing_key_is_a_configuration_error(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel(OpenAICredential(base_url=server.url), "gpt-4o")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await model.chat(HI)


async def test_key_from_the_environment(
    server: OpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.add(Reply(text="ok"))
    await make_model(credential=OpenAICredential(base_url=server.url)).chat(HI)
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"


async def test_missing_sdk_names_the_extra(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    model = OpenAIChatModel(server.credential(), "gpt-4o")
    with pytest.raises(MissingDependencyError, match=r"parley\[openai\]"):
        await model.chat(HI)


async def test_remote_hosts_are_blocked_in_tests() -> None:
    model = OpenAIChatModel(OpenAICredential(api_key="sk-x"), "gpt-4o")
    with pytest.raises(UserError, match=r"api\.openai\.com"):
        await model.chat(HI)


async def test_the_key_never_shows(
    server: OpenAIServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-very-secret-value"
    credential = OpenAICredential(api_key=secret, base_url=server.url)  # type: ignore[arg-type]
    model = make_model(credential=credential)
    server.add(HTTPError(500), Reply(text="ok"))
    with caplog.at_level(logging.DEBUG):
        await model.chat(HI)
    shown = [repr(credential), str(credential), repr(model), credential.model_dump_json()]
    shown += [record.getMessage() for record in caplog.records]
    assert all(secret not in text for text in shown)
    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"


# -- content as typed parts (Mistral's reasoning models) -------------------------------------


async def test_stream_of_content_parts_gives_thinking_then_text(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(reasoning="Two and two.", text="Four.", chunk_size=4, content_parts=True))
    chunks = [c async for c in make_model().chat_stream(HI)]
    deltas = [
        (b.type, b.thinking if b.type == "thinking" else b.text)
        for c in chunks[:-1]
        for b in c.content
    ]
    assert deltas == [
        ("thinking", "Two "),
        ("thinking", "and "),
        ("thinking", "two."),
        ("text", "Four"),
        ("text", "."),
    ]
    final = chunks[-1]
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert (final.thinking, final.text) == ("Two and two.", "Four.")
    assert final.finish_reason == "stop"


async def test_whole_answer_of_content_parts(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(reasoning="Two and two.", text="Four.", content_parts=True))
    response = await make_model().chat(HI)
    assert [b.type for b in response.content] == ["thinking", "text"]
    assert (response.thinking, response.text) == ("Two and two.", "Four.")
