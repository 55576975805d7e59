"""The DashScope test server, driven by the official SDK alone: what it sends, the SDK reads.

Both of the SDK's interfaces read it: the 2.0 client (`dashscope.AsyncClient`, which parley
builds on) and the 1.x calls (`Generation.call`, `AioGeneration.call`, each pointed at the
server with `base_address=`). Also the stream reader's own rules, event by event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.errors import ModelHTTPError
from parley.models.accumulator import MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.providers.dashscope._wire import StreamReader
from parley.providers.dashscope.server import (
    STORAGE_PATH,
    UPLOADS_PATH,
    DashScopeServer,
    HTTPError,
    Reply,
    Reset,
    ToolCall,
)
from tests._requires import require_module

dashscope = require_module("dashscope", "dashscope")

pytest_plugins = ["tests.models.dashscope_fixtures"]

MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def client(server: DashScopeServer) -> AsyncIterator[Any]:
    sdk = dashscope.AsyncClient(api_key="sk-test", base_url=server.url, max_retries=0)
    yield sdk
    await sdk.aclose()


# -- the 2.0 client ---------------------------------------------------------------------------


async def test_the_sdk_reads_a_whole_answer(server: DashScopeServer, client: Any) -> None:
    server.add(Reply(text="Hello!", reasoning="hmm", input_tokens=7, output_tokens=2))
    completion = await client.chat.completions.create(model="qwen-plus", messages=MESSAGES)
    assert completion.output_text == "Hello!"
    assert completion.choices[0].message.reasoning_content == "hmm"
    assert completion.choices[0].finish_reason == "stop"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (7, 2)


async def test_the_sdk_reads_a_stream_with_tool_calls(server: DashScopeServer, client: Any) -> None:
    calls = [ToolCall("weather", {"city": "Paris"}, "call_a")]
    server.add(Reply(reasoning="Think", text="Hello world", tool_calls=calls, chunk_size=3))
    stream = await client.chat.completions.create(model="qwen-plus", messages=MESSAGES, stream=True)
    final = await stream.get_final_message()
    message = final.choices[0].message
    assert (message.reasoning_content, message.content) == ("Think", "Hello world")
    call = message.tool_calls[0]
    assert (call.id, call.function.name) == ("call_a", "weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert final.choices[0].finish_reason == "tool_calls"
    assert server.requests[0].headers["x-dashscope-sse"] == "enable"


async def test_the_sdk_merges_a_cumulative_stream_the_same(
    server: DashScopeServer, client: Any
) -> None:
    server.add(Reply(text="Hello world", chunk_size=3))
    stream = await client.chat.completions.create(
        model="qwen-plus", messages=MESSAGES, stream=True, parameters={"incremental_output": False}
    )
    final = await stream.get_final_message()
    assert final.output_text == "Hello world"


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
async def test_the_sdk_reads_the_error_bodies(
    server: DashScopeServer, client: Any, streamed: bool
) -> None:
    server.add(HTTPError.rate_limit(retry_after=3))
    with pytest.raises(dashscope.v2.errors.RateLimitError) as caught:
        await client.chat.completions.create(model="qwen-plus", messages=MESSAGES, stream=streamed)
    assert caught.value.code == "Throttling.RateQuota"
    assert caught.value.status_code == 429
    assert caught.value.headers["retry-after"] == "3"
    assert caught.value.request_id


async def test_the_sdk_raises_an_error_event(server: DashScopeServer, client: Any) -> None:
    moderated = {"code": "DataInspectionFailed", "message": "Output may be inappropriate."}
    server.add(Reply(text="abcdef", chunk_size=2, error_at=1, error=moderated, error_status=400))
    stream = await client.chat.completions.create(model="qwen-plus", messages=MESSAGES, stream=True)
    with pytest.raises(dashscope.v2.errors.ContentFilterError):
        await stream.get_final_message()


def _faults() -> list[Any]:
    errors = dashscope.v2.errors
    return [
        pytest.param(
            HTTPError(503, "ServiceUnavailable", "busy"), errors.ServiceUnavailableError, id="5xx"
        ),
        pytest.param(Reset(), errors.APIConnectionError, id="reset"),
        pytest.param(Reply(text="late", delay=1.0), errors.APITimeoutError, id="slow-start"),
        pytest.param(
            Reply(text="abcdefgh", chunk_size=2, cut_after=2), httpx.RemoteProtocolError, id="cut"
        ),
        pytest.param(
            Reply(text="abcdefgh", chunk_size=2, malformed_at=1),
            errors.DashScopeError,
            id="malformed",
        ),
        pytest.param(
            Reply(text="abcdef", chunk_size=2, error_at=1),
            errors.InternalServerError,
            id="error-event",
        ),
        pytest.param(
            Reply(text="abcdef", chunk_size=2, chunk_delay=0.6), httpx.ReadTimeout, id="slow-chunks"
        ),
    ]


@pytest.mark.parametrize(("step", "raised"), _faults())
async def test_the_sdk_sees_each_stream_fault(
    server: DashScopeServer, step: Any, raised: type[Exception]
) -> None:
    # The faults parley's tests script are what the SDK's own client takes as failures.
    server.add(step)
    sdk = dashscope.AsyncClient(api_key="sk-test", base_url=server.url, max_retries=0, timeout=0.3)

    async def read() -> Any:
        stream = await sdk.chat.completions.create(
            model="qwen-plus", messages=MESSAGES, stream=True
        )
        return await stream.get_final_message()

    try:
        with pytest.raises(raised):
            await read()
    finally:
        await sdk.aclose()


async def test_the_sdk_uploads_a_local_file_through_the_server(
    server: DashScopeServer, client: Any, tmp_path: Path
) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG fake")
    server.add(Reply(text="A cat."))
    content = [{"type": "text", "text": "What?"}, {"type": "image", "url": image.as_uri()}]
    completion = await client.multimodal.chat.create(
        model="qwen-vl-plus", messages=[{"role": "user", "content": content}]
    )
    assert completion.output_text == "A cat."
    assert [r.path.split("?")[0] for r in server.requests][:2] == [UPLOADS_PATH, STORAGE_PATH]
    sent = server.bodies()[0]["input"]["messages"][0]["content"]
    assert sent[1] == {"image": "oss://dashscope-instant/qwen-vl-plus/scripted/cat.png"}


# -- the 1.x calls ------------------------------------------------------------------------------


def test_generation_call_reads_the_server(server: DashScopeServer) -> None:
    server.add(Reply(text="Hello!"), Reply(text="Hello, streamed", chunk_size=4), HTTPError(400))
    options = {"api_key": "sk-test", "base_address": server.url, "result_format": "message"}
    whole = dashscope.Generation.call(model="qwen-plus", messages=MESSAGES, **options)
    assert whole.status_code == 200
    assert whole.output.choices[0].message.content == "Hello!"
    pieces = [
        chunk.output.choices[0].message.content
        for chunk in dashscope.Generation.call(
            model="qwen-plus", messages=MESSAGES, stream=True, incremental_output=True, **options
        )
    ]
    assert "".join(pieces) == "Hello, streamed"
    failed = dashscope.Generation.call(model="qwen-plus", messages=MESSAGES, **options)
    assert (failed.status_code, failed.code) == (400, "InternalError")


async def test_aio_generation_call_reads_the_server(server: DashScopeServer) -> None:
    server.add(Reply(text="async answer", chunk_size=5))
    chunks = await dashscope.AioGeneration.call(
        model="qwen-plus",
        messages=MESSAGES,
        api_key="sk-test",
        base_address=server.url,
        result_format="message",
        stream=True,
        incremental_output=True,
    )
    pieces = [chunk.output.choices[0].message.content async for chunk in chunks]
    assert "".join(pieces) == "async answer"
    await dashscope.close_shared_aio_session()


# -- the stream reader, event by event ----------------------------------------------------------


def event(message: dict[str, Any], finish: str = "null", **extra: Any) -> bytes:
    body = {
        "output": {"choices": [{"message": message, "finish_reason": finish}]},
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "request_id": "r1",
        **extra,
    }
    return json.dumps(body).encode()


def test_finish_reason_null_is_mid_stream_and_usage_comes_once_at_the_end() -> None:
    reader = StreamReader(model="m", provider="dashscope")
    first = reader.feed("result", event({"content": "Hi"}))
    assert first == [TextDelta("Hi"), MetaDelta(response_id="r1")]
    assert not reader.complete
    assert reader.feed("result", event({"content": " there"})) == [TextDelta(" there")]
    last = reader.feed("result", event({"content": ""}, "stop"))
    [meta] = last
    assert isinstance(meta, MetaDelta)
    assert meta.finish_reason == "stop"
    assert meta.usage is not None
    assert (meta.usage.input_tokens, meta.usage.output_tokens) == (3, 2)
    assert reader.complete


def test_a_cumulative_stream_hands_on_only_what_is_new() -> None:
    reader = StreamReader(model="m", provider="dashscope", incremental=False)
    call = {"index": 0, "id": "c1", "type": "function"}
    events = [
        {"content": "", "reasoning_content": "Th"},
        {"content": "", "reasoning_content": "Think"},
        {"content": "An", "reasoning_content": "Think"},
        {"content": "Answer", "reasoning_content": "Think"},
        {
            "content": "Answer",
            "tool_calls": [{**call, "function": {"name": "f", "arguments": "{"}}],
        },
        {
            "content": "Answer",
            "tool_calls": [{**call, "function": {"name": "f", "arguments": "{}"}}],
        },
    ]
    deltas = [
        d for e in events for d in reader.feed("result", event(e)) if not isinstance(d, MetaDelta)
    ]
    assert deltas == [
        ThinkingDelta("Th"),
        ThinkingDelta("ink"),
        TextDelta("An"),
        TextDelta("swer"),
        ToolCallDelta(0, "c1", "f", "{"),
        ToolCallDelta(0, None, None, "}"),
    ]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_reasoning_signature_is_kept_once(incremental: bool) -> None:
    reader = StreamReader(model="m", provider="dashscope", incremental=incremental)
    thinking = ["Hm", "Hmm"] if not incremental else ["Hm", "m"]
    deltas = [
        d
        for piece in thinking
        for d in reader.feed(
            "result", event({"reasoning_content": piece, "reasoning_signature": "sig-1"})
        )
        if isinstance(d, ThinkingDelta)
    ]
    assert deltas == [ThinkingDelta("Hm", signature="sig-1"), ThinkingDelta("m")]


def test_multimodal_content_parts_are_read_as_text() -> None:
    reader = StreamReader(model="m", provider="dashscope")
    deltas = reader.feed("result", event({"content": [{"text": "A "}, {"text": "cat"}]}, "stop"))
    assert deltas[0] == TextDelta("A cat")


def test_an_error_event_without_a_code_is_still_an_error() -> None:
    reader = StreamReader(model="m", provider="dashscope")
    with pytest.raises(ModelHTTPError, match="went wrong") as caught:
        reader.feed("error", json.dumps({"message": "went wrong"}).encode())
    assert caught.value.status_code == 500
