"""The OpenAI test double itself, checked by the official SDK's own parsing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from parley.providers.openai.server import HTTPError, OpenAIServer, RecordedRequest, Reply, ToolCall

pytest_plugins = ["tests.models.openai_fixtures"]


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url, max_retries=0)
    yield sdk
    await sdk.close()


MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]


async def test_sdk_parses_a_whole_completion(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(Reply(text="Hello", reasoning="r", tool_calls=[ToolCall("f", {"a": 1}, "c1")]))
    completion = await client.chat.completions.create(model="m", messages=MESSAGES)
    message = completion.choices[0].message
    assert message.content == "Hello"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert (call.id, call.function.name, call.function.arguments) == ("c1", "f", '{"a": 1}')
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 10


async def test_sdk_parses_a_streamed_completion(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(Reply(text="Hello world", chunk_size=3))
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello world"
    assert chunks[-1].usage is not None
    assert chunks[-1].choices == []


async def test_sdk_parses_a_streamed_response(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(Reply(text="Hi there", reasoning="why", tool_calls=[ToolCall("f", {})]))
    stream = await client.responses.create(model="m", input="Hi", stream=True)
    events = [event async for event in stream]
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    done = events[-1].response  # type: ignore[union-attr]
    assert done.output_text == "Hi there"
    assert [item.type for item in done.output] == ["reasoning", "message", "function_call"]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]  # type: ignore[union-attr]
    assert "".join(deltas) == "Hi there"


async def test_sdk_parses_a_whole_response(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(Reply(text="Hi"))
    response = await client.responses.create(model="m", input="Hi")
    assert response.output_text == "Hi"
    assert response.usage is not None
    assert response.usage.output_tokens > 0


async def test_sdk_sees_the_scripted_status(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(HTTPError.rate_limit(retry_after=2))
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limit_exceeded"


async def test_requests_are_recorded_and_steps_may_be_functions(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    def echo(request: RecordedRequest) -> Reply:
        return Reply(text=request.json["messages"][-1]["content"].upper())

    server.add(echo)
    completion = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert completion.choices[0].message.content == "HI"
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.json["model"] == "m"
    server.assert_consumed()


async def test_unexpected_and_unused_steps_fail_loudly(
    server: OpenAIServer, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.InternalServerError, match="no scripted response left"):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(AssertionError, match="found no step left"):
        server.assert_consumed()
    server.unexpected.clear()
    server.add(Reply(text="never asked"))
    with pytest.raises(AssertionError, match="never used"):
        server.assert_consumed()


async def test_unknown_routes_are_404(server: OpenAIServer, client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        await client.models.list()
    with pytest.raises(openai.NotFoundError):
        await client.moderations.create(input="x")


def test_stops_cleanly_and_frees_the_port() -> None:
    server = OpenAIServer().start()
    url = server.url
    server.stop()
    with OpenAIServer() as again:
        assert again.url.startswith("http://127.0.0.1:")
    assert url.startswith("http://127.0.0.1:")
