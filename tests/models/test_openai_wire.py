"""The wire-level pieces: SSE reading, error mapping, chunk and usage parsing."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from email.utils import formatdate
from typing import Any

import pytest

from parley.errors import (
    ContentFilterError,
    ContextLengthError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeoutError,
    RateLimitError,
)
from parley.models._wire import iter_events, retry_after
from parley.models.accumulator import MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.providers.openai._chat_wire import ChatStreamReader, chat_usage, completion_deltas
from parley.providers.openai._errors import (
    error_from_payload,
    error_from_status,
    map_error,
)

try:  # the transport of the installed SDK: httpx2 in openai 3, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover
    import httpx as http  # type: ignore[no-redef]


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def events(*parts: bytes) -> list[tuple[str, bytes]]:
    return [event async for event in iter_events(chunks(*parts))]


# -- server-sent events -----------------------------------------------------------------------


async def test_sse_lines_split_across_chunks() -> None:
    assert await events(b'data: {"a"', b": 1}\n\nda", b"ta: [DONE]\n\n") == [
        ("", b'{"a": 1}'),
        ("", b"[DONE]"),
    ]


async def test_sse_names_comments_crlf_and_multiline_data() -> None:
    stream = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        b"event: response.created\r\ndata: one\r\ndata: two\r\nid: 7\r\n\r\n"
        b"data:no-space\n\n"
    )
    assert await events(stream) == [("response.created", b"one\ntwo"), ("", b"no-space")]


async def test_sse_last_event_without_blank_line_is_kept_but_a_cut_line_is_not() -> None:
    assert await events(b"data: [DONE]\n") == [("", b"[DONE]")]
    assert await events(b'data: 1\n\ndata: {"cut') == [("", b"1")]


# -- errors -----------------------------------------------------------------------------------


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "1.5"}) == 1.5
    in_a_minute = retry_after({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert in_a_minute is not None
    assert 55 < in_a_minute <= 60
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, {"error": {"code": "context_length_exceeded"}}, ContextLengthError),
        (
            400,
            {"error": {"message": "the request exceeds the available context size"}},
            ContextLengthError,
        ),
        (
            400,
            {
                "code": "data_inspection_failed",
                "message": "Input data may contain inappropriate content.",
            },
            ContentFilterError,
        ),
        (429, {"error": {"code": "insufficient_quota"}}, RateLimitError),
        (503, "upstream down", ModelHTTPError),
    ],
)
def test_error_from_status(status: int, body: Any, error: type[Exception]) -> None:
    mapped = error_from_status(status, body, {"retry-after": "2"}, model="m", provider="p")
    assert type(mapped) is error
    assert mapped.model == "m"
    assert mapped.provider == "p"


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"code": 502, "message": "Provider returned error"}, 502),  # OpenRouter
        ({"code": "rate_limit_exceeded", "message": "slow"}, 429),
        ({"message": "boom", "type": "server_error"}, 500),
    ],
)
def test_error_from_payload(payload: dict[str, Any], status: int) -> None:
    mapped = error_from_payload(payload)
    assert isinstance(mapped, ModelHTTPError)
    assert mapped.status_code == status


def test_transport_errors_mid_stream() -> None:
    timeout = map_error(http.ReadTimeout("slow"), model="m", provider="p")
    cut = map_error(http.RemoteProtocolError("incomplete chunked read"), model="m", provider="p")
    assert isinstance(timeout, ModelTimeoutError)
    assert isinstance(cut, ModelConnectionError)
    assert "incomplete chunked read" in str(cut)
    assert map_error(ValueError("not ours"), model="m", provider="p") is None


# -- Chat Completions chunks -------------------------------------------------------------------


def read(reader: ChatStreamReader, chunk: dict[str, Any]) -> list[Any]:
    return reader.read(json.dumps(chunk).encode())


def test_first_chunk_carries_the_id_and_model() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    first = read(
        reader, {"id": "x1", "model": "gpt", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    )
    assert first == [TextDelta("Hi"), MetaDelta(response_id="x1", model="gpt")]
    later = read(reader, {"id": "x1", "choices": [{"index": 0, "delta": {"content": "!"}}]})
    assert later == [TextDelta("!")]


def test_reasoning_fields_and_one_of_duplicates() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    delta = {"reasoning_content": "why", "reasoning": "why"}  # servers in transition send both
    deltas = read(reader, {"choices": [{"index": 0, "delta": delta}]})
    assert deltas[0] == ThinkingDelta("why")
    assert sum(isinstance(d, ThinkingDelta) for d in deltas) == 1


def test_repeated_tool_names_are_not_doubled() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    first = {"index": 0, "id": "c1", "function": {"name": "weather", "arguments": ""}}
    again = {"index": 0, "id": "c1", "function": {"name": "weather", "arguments": '{"a":1}'}}
    read(reader, {"choices": [{"index": 0, "delta": {"tool_calls": [first]}}]})
    deltas = read(reader, {"choices": [{"index": 0, "delta": {"tool_calls": [again]}}]})
    assert deltas == [ToolCallDelta(0, "c1", None, '{"a":1}')]


def test_other_choices_are_ignored_and_finish_is_mapped() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    chunk = {
        "choices": [
            {"index": 1, "delta": {"content": "other"}},
            {"index": 0, "delta": {}, "finish_reason": "insufficient_system_resource"},
        ]
    }
    assert read(reader, chunk) == [MetaDelta(finish_reason="error")]
    assert reader.complete


def test_malformed_and_non_object_chunks() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    with pytest.raises(ModelOutputError, match="malformed"):
        reader.read(b"{oops")
    with pytest.raises(ModelOutputError, match="not an object"):
        reader.read(b"[1, 2]")


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
        {"prompt_tokens": 9, "completion_tokens": 2, "prompt_cache_hit_tokens": 4},  # DeepSeek
        {"prompt_tokens": 9, "completion_tokens": 2, "cached_tokens": 4},  # Moonshot
    ],
)
def test_cached_tokens_wherever_the_provider_puts_them(usage: dict[str, Any]) -> None:
    parsed = chat_usage(usage)
    assert (parsed.input_tokens, parsed.output_tokens, parsed.cached_tokens) == (9, 2, 4)


def test_whole_completion_with_content_parts_and_object_arguments() -> None:
    body = {
        "id": "x",
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"k": 1}}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    deltas = list(completion_deltas(body, model="m", provider="p"))
    assert deltas[:2] == [TextDelta("ab"), ToolCallDelta(0, "c", "f", '{"k": 1}')]
    assert deltas[2] == MetaDelta(finish_reason="tool_calls", response_id="x")


def test_stream_delta_of_typed_parts() -> None:
    reader = ChatStreamReader(model="m", provider="p")
    content = [
        {
            "type": "thinking",
            "thinking": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
        {"type": "thinking", "thinking": "c"},
        {"type": "reference", "reference_ids": [1]},
        {"type": "text", "text": "d"},
        {"type": "text", "text": "e"},
        "not a part",
    ]
    deltas = read(reader, {"choices": [{"index": 0, "delta": {"content": content}}]})
    assert deltas[:2] == [ThinkingDelta("abc"), TextDelta("de")]


def test_whole_completion_with_thinking_parts() -> None:
    message = {
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "why"}]},
            {"type": "text", "text": "because"},
        ]
    }
    body = {"choices": [{"message": message, "finish_reason": "stop"}]}
    deltas = list(completion_deltas(body, model="m", provider="p"))
    assert deltas[:2] == [ThinkingDelta("why"), TextDelta("because")]
