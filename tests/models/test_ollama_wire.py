"""Ollama's wire: NDJSON lines, objects to deltas, errors, parameters; the double, by the SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.errors import (
    ContextLengthError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeoutError,
    RateLimitError,
)
from parley.models.accumulator import MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage
from parley.providers.ollama import OllamaParameters
from parley.providers.ollama._errors import error_from_status, map_error
from parley.providers.ollama._wire import ChatReader, iter_lines
from parley.providers.ollama.server import OllamaServer, Reply, ServedModel, ToolCall
from tests._requires import require_module

ollama = require_module("ollama", "ollama")
import httpx  # noqa: E402  (the SDK's transport: there when the SDK is)

aiohttp = require_module("aiohttp", "ollama")

HOST = "http://127.0.0.1:11434"


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def lines(*parts: bytes) -> list[bytes]:
    return [line async for line in iter_lines(chunks(*parts))]


def read(reader: ChatReader, obj: dict[str, Any]) -> list[Any]:
    return reader.read_line(json.dumps(obj).encode())


# -- NDJSON ---------------------------------------------------------------------------------


async def test_lines_split_across_chunks_and_blank_lines_skipped() -> None:
    assert await lines(b'{"a"', b": 1}\n\n{", b'"b": 2}\r\n  \n{"c": 3}') == [
        b'{"a": 1}',
        b'{"b": 2}\r',
        b'{"c": 3}',
    ]


async def test_a_last_line_cut_in_half_is_kept_to_fail_as_json() -> None:
    assert await lines(b'{"a": 1}\n{"cu') == [b'{"a": 1}', b'{"cu']


# -- objects to deltas ----------------------------------------------------------------------


def test_stream_lines_to_deltas() -> None:
    reader = ChatReader(model="m", host=HOST)
    first = {"model": "qwen3", "message": {"role": "assistant", "content": "", "thinking": "hm"}}
    assert read(reader, {**first, "done": False}) == [ThinkingDelta("hm"), MetaDelta(model="qwen3")]
    text = {"model": "qwen3", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    assert read(reader, text) == [TextDelta("Hi")]
    assert not reader.done
    end = {
        "model": "qwen3",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "length",
        "total_duration": 2_000_000_000,
        "prompt_eval_count": 5,
        "eval_count": 7,
    }
    assert read(reader, end) == [
        MetaDelta(
            usage=ChatUsage(input_tokens=5, output_tokens=7),
            finish_reason="length",
            metadata={"done_reason": "length", "durations": {"total": 2.0}},
        )
    ]
    assert reader.done


def test_tool_calls_each_get_a_key_and_keep_a_sent_id() -> None:
    reader = ChatReader(model="m", host=HOST)
    calls = [
        {"function": {"name": "a", "arguments": {"x": 1}}},
        {"id": "call_9", "function": {"index": 0, "name": "b", "arguments": {}}},
    ]
    deltas = read(reader, {"message": {"tool_calls": calls}, "done": False})
    assert deltas[:2] == [
        ToolCallDelta(0, None, "a", '{"x": 1}'),
        ToolCallDelta(1, "call_9", "b", "{}"),
    ]
    more = read(reader, {"message": {"tool_calls": calls[:1]}, "done": True, "done_reason": "stop"})
    assert more[0] == ToolCallDelta(2, None, "a", '{"x": 1}')
    assert more[1].finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("load", "stop"),
        ("unload", "stop"),
        ("", None),  # unknown: inferred from the content at the end
        ("connection closed", None),
    ],
)
def test_done_reasons(reason: str, finish: str | None) -> None:
    reader = ChatReader(model="m", host=HOST)
    deltas = read(reader, {"done": True, "done_reason": reason})
    assert deltas[-1].finish_reason == finish
    assert reader.done


def test_malformed_lines_and_error_lines() -> None:
    reader = ChatReader(model="m", host=HOST)
    with pytest.raises(ModelOutputError, match="malformed"):
        reader.read_line(b'{"message": ')
    with pytest.raises(ModelOutputError, match="not an object"):
        reader.read_line(b"[1]")
    with pytest.raises(ModelHTTPError, match="boom") as caught:
        reader.read_line(b'{"error": "boom"}')
    assert caught.value.status_code == 500


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, {"error": "the input length exceeds the context length"}, ContextLengthError),
        (500, {"error": "the prompt is longer than the context length"}, ContextLengthError),
        (429, {"error": "too many requests"}, RateLimitError),
        (404, {"error": "model 'x' not found"}, ModelHTTPError),
        (502, "Bad Gateway", ModelHTTPError),
        (400, {"error": {"message": "openai-shaped", "type": "x"}}, ModelHTTPError),
    ],
)
def test_error_from_status(status: int, body: Any, error: type[Exception]) -> None:
    mapped = error_from_status(status, body, {"retry-after": "2"}, model="x", host=HOST)
    assert type(mapped) is error
    assert (mapped.model, mapped.provider) == ("x", "ollama")
    if isinstance(mapped, ModelHTTPError):
        assert mapped.retry_after == 2


def test_sdk_and_transport_errors() -> None:
    def mapped(exc: BaseException) -> Any:
        return map_error(exc, model="m", host=HOST)

    assert isinstance(mapped(ollama.ResponseError('{"error": "nope"}', 404)), ModelHTTPError)
    assert mapped(ollama.ResponseError("boom")).status_code == 500  # a stream's error line
    assert isinstance(mapped(ConnectionError("Failed to connect")), ModelConnectionError)
    assert isinstance(mapped(httpx.ReadTimeout("slow")), ModelTimeoutError)
    cut = mapped(httpx.RemoteProtocolError("incomplete chunked read"))
    assert isinstance(cut, ModelConnectionError)
    assert "incomplete chunked read" in str(cut)
    assert mapped(ValueError("not ours")) is None


def test_aiohttp_failures_under_httpx_errors() -> None:
    # httpx-aiohttp raises `httpx.ConnectTimeout` for a refused or dropped connection: the
    # aiohttp error under it says which, and that it was no timeout.
    def mapped(cause: BaseException, raised: type[Exception]) -> Any:
        exc = raised(str(cause))
        exc.__cause__ = cause
        return map_error(exc, model="m", host=HOST)

    # (A refused connection, aiohttp's `ClientConnectorError`, is test_ollama's unreachable
    # server.)
    dropped = mapped(aiohttp.ServerDisconnectedError(), httpx.ConnectTimeout)
    assert isinstance(dropped, ModelConnectionError)
    assert "connection to ollama at" in str(dropped)
    cut = mapped(aiohttp.ClientPayloadError("not complete"), httpx.ReadError)
    assert isinstance(cut, ModelConnectionError)
    assert isinstance(mapped(aiohttp.SocketTimeoutError(), httpx.ReadTimeout), ModelTimeoutError)


# -- parameters -----------------------------------------------------------------------------


def test_parameters_split_into_request_fields_and_options() -> None:
    parameters = OllamaParameters(
        think="low",
        keep_alive=-1,
        max_tokens=64,
        temperature=0.1,
        parallel_tool_calls=True,
        use_mmap=False,
        options={"num_gpu": 0},
    )
    assert parameters.wire_fields() == {
        "think": "low",
        "keep_alive": -1,
        "options": {"num_gpu": 0, "num_predict": 64, "temperature": 0.1, "use_mmap": False},
    }
    assert OllamaParameters().wire_fields() == {}
    assert "parallel_tool_calls" not in OllamaParameters.model_json_schema()["properties"]


# -- the double, read by the official SDK ---------------------------------------------------


@pytest.fixture
async def sdk() -> AsyncIterator[tuple[OllamaServer, ollama.AsyncClient]]:
    with OllamaServer(models=[ServedModel("qwen3:8b", ["completion", "thinking"], 40960)]) as srv:
        client = ollama.AsyncClient(host=srv.url)
        yield srv, client
        await client.close()  # type: ignore[no-untyped-call]


MESSAGES = [{"role": "user", "content": "Hi"}]


async def test_sdk_parses_a_whole_answer(sdk: tuple[OllamaServer, ollama.AsyncClient]) -> None:
    server, client = sdk
    server.add(Reply(text="Hello", thinking="r", tool_calls=[ToolCall("f", {"a": 1}, "c1")]))
    response = await client.chat(model="qwen3", messages=MESSAGES)
    assert (response.message.content, response.message.thinking) == ("Hello", "r")
    assert response.message.tool_calls is not None
    call = response.message.tool_calls[0]
    assert (call.function.name, dict(call.function.arguments)) == ("f", {"a": 1})
    assert (response.done, response.done_reason) == (True, "stop")
    assert (response.prompt_eval_count, response.eval_count) == (10, 4)
    assert response.total_duration == 250_000_000


async def test_sdk_parses_a_stream(sdk: tuple[OllamaServer, ollama.AsyncClient]) -> None:
    server, client = sdk
    server.add(Reply(text="Hello world", thinking="hm", chunk_size=3))
    parts = [
        part async for part in await client.chat(model="qwen3", messages=MESSAGES, stream=True)
    ]
    assert "".join(p.message.thinking or "" for p in parts) == "hm"
    assert "".join(p.message.content or "" for p in parts) == "Hello world"
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].eval_count == 6  # 4 text pieces, 1 of thinking, and the end


async def test_sdk_sees_errors_as_ollama_sends_them(
    sdk: tuple[OllamaServer, ollama.AsyncClient],
) -> None:
    server, client = sdk
    server.add(Reply(text="abcd", chunk_size=2, error_at=1, error="runner died"))
    with pytest.raises(ollama.ResponseError, match="runner died"):
        async for _ in await client.chat(model="qwen3", messages=MESSAGES, stream=True):
            pass
    with pytest.raises(ollama.ResponseError, match="model 'nope' not found") as caught:
        await client.show("nope")
    assert caught.value.status_code == 404


async def test_sdk_lists_and_shows_models(sdk: tuple[OllamaServer, ollama.AsyncClient]) -> None:
    _, client = sdk
    listing = await client.list()
    assert [m.model for m in listing.models] == ["qwen3:8b"]
    assert listing.models[0].details is not None
    shown = await client.show("qwen3:8b")
    assert shown.capabilities == ["completion", "thinking"]
    assert shown.modelinfo == {"general.architecture": "llama", "llama.context_length": 40960}
