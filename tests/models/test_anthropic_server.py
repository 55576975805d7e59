"""The Anthropic test double itself, checked by the official SDK's own parsing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.providers.anthropic.server import (
    AnthropicServer,
    HTTPError,
    Redacted,
    Reply,
    ServerBlock,
    Text,
    Thinking,
    ToolUse,
)
from tests._requires import require_module

pytest_plugins = ["tests.models.anthropic_fixtures"]

anthropic = require_module("anthropic", "anthropic")

MESSAGES: list[Any] = [{"role": "user", "content": "Hi"}]
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "title": "t",
            "url": "https://example.com",
            "encrypted_content": "e",
            "page_age": None,
        }
    ],
}


@pytest.fixture
async def client(server: AnthropicServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.url, max_retries=0)
    yield sdk
    await sdk.close()


def _reply() -> Reply:
    return Reply(
        content=[
            Thinking("plan", signature="sig-1"),
            Redacted("opaque"),
            ToolUse("web_search", {"query": "q"}, "srvtoolu_1", kind="server_tool_use"),
            ServerBlock(SEARCH_RESULT),
            Text("Hello"),
            ToolUse("f", {"a": 1}, "toolu_1"),
        ],
        input_tokens=20,
        cache_read_tokens=7,
        output_tokens=9,
        chunk_size=2,
    )


async def test_sdk_parses_a_whole_message(
    server: AnthropicServer, client: anthropic.AsyncAnthropic
) -> None:
    server.add(_reply())
    message = await client.messages.create(model="m", max_tokens=10, messages=MESSAGES)
    assert [block.type for block in message.content] == [
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (20, 7)
    assert message.usage.output_tokens == 9


async def test_sdk_accumulates_a_streamed_message_the_same(
    server: AnthropicServer, client: anthropic.AsyncAnthropic
) -> None:
    server.add(_reply(), _reply())
    whole = await client.messages.create(model="m", max_tokens=10, messages=MESSAGES)
    async with client.messages.stream(model="m", max_tokens=10, messages=MESSAGES) as stream:
        streamed = await stream.get_final_message()
    # The SDK's own accumulation of the events gives the whole message back.
    assert [b.to_dict() for b in streamed.content] == [b.to_dict() for b in whole.content]
    assert streamed.stop_reason == whole.stop_reason
    assert streamed.usage.output_tokens == 9
    assert streamed.usage.cache_read_input_tokens == 7


async def test_sdk_raises_the_status_errors(
    server: AnthropicServer, client: anthropic.AsyncAnthropic
) -> None:
    server.add(HTTPError.overloaded(), HTTPError.rate_limit(retry_after=3))
    with pytest.raises(anthropic.OverloadedError) as overloaded:
        await client.messages.create(model="m", max_tokens=10, messages=MESSAGES)
    assert overloaded.value.type == "overloaded_error"
    with pytest.raises(anthropic.RateLimitError) as limited:
        await client.messages.create(model="m", max_tokens=10, messages=MESSAGES)
    assert limited.value.response.headers["retry-after"] == "3"


async def test_sdk_raises_an_error_event(
    server: AnthropicServer, client: anthropic.AsyncAnthropic
) -> None:
    server.add(Reply(text="abcdef", error_at=3))
    stream = await client.messages.create(model="m", max_tokens=10, messages=MESSAGES, stream=True)
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        async for _ in stream:
            pass


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ({"temperature": 1.0}, 400, "temperature: Extra inputs are not permitted"),
        ({"top_k": 5}, 400, "top_k: Extra inputs are not permitted"),
        ({"max_tokens": None}, 400, "max_tokens: Field required"),
    ],
)
async def test_the_double_refuses_what_the_api_refuses(
    server: AnthropicServer,
    client: anthropic.AsyncAnthropic,
    extra: dict[str, Any],
    status: int,
    message: str,
) -> None:
    server.add(Reply(text="unused"))
    with pytest.raises(anthropic.APIStatusError, match=message) as caught:
        await client.messages.create(model="m", max_tokens=10, messages=MESSAGES, extra_body=extra)
    assert caught.value.status_code == status
    with pytest.raises(AssertionError, match="never used"):
        server.assert_consumed()


async def test_the_double_wants_a_key_and_a_version(
    server: AnthropicServer, client: anthropic.AsyncAnthropic
) -> None:
    no_key = {"Authorization": anthropic.omit}
    with pytest.raises(anthropic.AuthenticationError):
        await client.messages.create(
            model="m", max_tokens=10, messages=MESSAGES, extra_headers=no_key
        )
    no_version = {"anthropic-version": anthropic.omit}
    with pytest.raises(anthropic.BadRequestError, match="anthropic-version"):
        await client.messages.create(
            model="m", max_tokens=10, messages=MESSAGES, extra_headers=no_version
        )
    assert len(server.requests) == 2
