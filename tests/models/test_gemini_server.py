"""The Gemini test server speaks what the official SDK reads: checked with `google-genai` alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.providers.gemini.server import FunctionCall, GeminiServer, HTTPError, Reply
from tests._requires import require_module

genai = require_module("google.genai", "gemini")


@pytest.fixture
async def client() -> AsyncIterator[tuple[GeminiServer, Any]]:
    import httpx2  # noqa: PLC0415  (comes with google-genai)

    with GeminiServer() as server:
        # httpx2 as parley uses it (the SDK's aiohttp transport warns on import here).
        http = httpx2.AsyncClient()
        options = {"base_url": server.url, "httpx_async_client": http}
        yield server, genai.Client(api_key="k", http_options=options).aio
        await http.aclose()


async def test_the_sdk_reads_a_whole_answer(client: tuple[GeminiServer, Any]) -> None:
    server, aio = client
    server.add(
        Reply(
            thinking="hmm",
            thought_signature="c2lnLXQ=",
            text="Hi!",
            function_calls=[FunctionCall("f", {"a": 1}, id="c1", signature="c2lnLWY=")],
            input_tokens=7,
            output_tokens=3,
            thoughts_tokens=2,
            cached_tokens=4,
        )
    )
    response = await aio.models.generate_content(model="gemini-2.5-flash", contents="Hello")
    thought, text, call = response.candidates[0].content.parts
    assert (thought.thought, thought.text, thought.thought_signature) == (True, "hmm", b"sig-t")
    assert text.text == "Hi!"
    assert (call.function_call.id, call.function_call.name, call.function_call.args) == (
        "c1",
        "f",
        {"a": 1},
    )
    assert call.thought_signature == b"sig-f"
    assert response.candidates[0].finish_reason == genai.types.FinishReason.STOP
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.candidates_token_count) == (7, 3)
    assert (usage.thoughts_token_count, usage.cached_content_token_count) == (2, 4)
    assert server.bodies()[0]["contents"] == [{"role": "user", "parts": [{"text": "Hello"}]}]


async def test_the_sdk_reads_a_stream(client: tuple[GeminiServer, Any]) -> None:
    server, aio = client
    server.add(Reply(text="Hello, world", chunk_size=5, finish_reason="MAX_TOKENS"))
    stream = await aio.models.generate_content_stream(model="gemini-2.5-flash", contents="Hi")
    chunks = [chunk async for chunk in stream]
    assert [c.text for c in chunks] == ["Hello", ", wor", "ld"]
    assert chunks[-1].candidates[0].finish_reason == genai.types.FinishReason.MAX_TOKENS
    assert server.requests[0].path.endswith(":streamGenerateContent?alt=sse")


async def test_the_sdk_reads_an_error(client: tuple[GeminiServer, Any]) -> None:
    server, aio = client
    server.add(HTTPError(400, "bad request"))
    with pytest.raises(genai.errors.ClientError) as caught:
        await aio.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert (caught.value.code, caught.value.status, caught.value.message) == (
        400,
        "INVALID_ARGUMENT",
        "bad request",
    )


async def test_the_sdk_reads_a_blocked_prompt(client: tuple[GeminiServer, Any]) -> None:
    server, aio = client
    server.add(Reply(block_reason="SAFETY"))
    response = await aio.models.generate_content(model="gemini-2.5-flash", contents="Hi")
    assert response.prompt_feedback.block_reason == genai.types.BlockedReason.SAFETY
    assert not response.candidates
