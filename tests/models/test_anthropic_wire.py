"""Reading the Messages API's events and bodies into deltas, event by event."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parley.errors import ContextLengthError, ModelHTTPError, ModelOutputError, RateLimitError
from parley.messages import ThinkingBlock
from parley.models import StreamAccumulator
from parley.models._wire import iter_events as general_events
from parley.providers.anthropic._sse import EventSplitter
from parley.providers.anthropic._wire import MessageStreamReader, message_deltas


def feed(events: list[tuple[str, dict[str, Any]]]) -> tuple[MessageStreamReader, Any]:
    reader = MessageStreamReader(model="m", provider="anthropic")
    accumulator = StreamAccumulator("m")
    for name, data in events:
        for delta in reader.feed(name, json.dumps(data).encode()):
            accumulator.add(delta)
    return reader, accumulator.final()


def start(usage: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    message = {"id": "msg_1", "model": "claude-x", "content": [], "usage": usage}
    return "message_start", {"type": "message_start", "message": message}


def block(index: int, content: dict[str, Any], *deltas: dict[str, Any]) -> list[Any]:
    events: list[Any] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": content},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def end(usage: dict[str, Any], reason: str = "end_turn") -> list[Any]:
    delta = {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}
    return [("message_delta", delta), ("message_stop", {"type": "message_stop"})]


def test_usage_counts_are_cumulative_and_missing_ones_are_kept() -> None:
    first = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 3,
        "output_tokens": 1,
    }
    # A later delta may restate the input side (server tools add to it) or send it as null.
    later = {"output_tokens": 40, "input_tokens": 150, "cache_read_input_tokens": None}
    reader, final = feed([start(first), *end(later)])
    assert final.usage.model_dump(exclude={"elapsed"}) == {
        "input_tokens": 173,
        "output_tokens": 40,
        "cached_tokens": 3,
        "cache_write_tokens": 20,
    }
    assert (final.id, final.model, reader.complete) == ("msg_1", "claude-x", True)


def test_unknown_events_and_deltas_are_read_past() -> None:
    citation = {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}
    events = [
        start({"input_tokens": 1, "output_tokens": 1}),
        ("brand_new_event", {"type": "brand_new_event"}),
        *block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Hi"}, citation),
        *end({"output_tokens": 2}),
    ]
    _, final = feed(events)
    assert final.text == "Hi"


def test_events_without_a_name_go_by_their_type() -> None:
    events = [
        start({"input_tokens": 1, "output_tokens": 1}),
        *block(0, {"type": "text", "text": "Hello"}),
        *end({"output_tokens": 2}),
    ]
    _, final = feed([("", data) for _, data in events])
    assert final.text == "Hello"


def test_ping_is_not_parsed() -> None:
    reader = MessageStreamReader(model="m", provider="anthropic")
    assert reader.feed("ping", b"not json at all") == []


def test_a_tool_input_sent_whole_in_its_start_event() -> None:
    whole = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}
    _, final = feed([*block(0, whole), *end({"output_tokens": 2}, "tool_use")])
    assert [(c.id, c.name, c.input) for c in final.tool_calls] == [("toolu_1", "f", {"a": 1})]


def test_a_server_tool_input_is_assembled_from_its_pieces() -> None:
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    pieces = [{"type": "input_json_delta", "partial_json": p} for p in ('{"query"', ': "x"}')]
    _, final = feed([*block(0, use, *pieces), *end({"output_tokens": 2})])
    (kept,) = final.content
    assert isinstance(kept, ThinkingBlock)
    assert kept.extra == {"anthropic_block": {**use, "input": {"query": "x"}}}
    assert final.tool_calls == []


def test_a_stream_without_its_stop_is_not_complete() -> None:
    reader, _ = feed([start({"input_tokens": 1, "output_tokens": 1})])
    assert not reader.complete


@pytest.mark.parametrize(
    ("error", "cls", "status"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, ModelHTTPError, 529),
        ({"type": "rate_limit_error", "message": "slow down"}, RateLimitError, 429),
        ({"type": "api_error", "message": "Internal"}, ModelHTTPError, 500),
        ({"type": "something_new", "message": "?"}, ModelHTTPError, 500),
        ({"type": "invalid_request_error", "message": "bad"}, ModelHTTPError, 400),
    ],
)
def test_error_events_carry_their_types_status(
    error: dict[str, Any], cls: type[ModelHTTPError], status: int
) -> None:
    reader = MessageStreamReader(model="m", provider="anthropic")
    with pytest.raises(cls) as caught:
        reader.feed("error", json.dumps({"type": "error", "error": error}).encode())
    assert type(caught.value) is cls
    assert caught.value.status_code == status
    assert error["message"] in str(caught.value)


def test_an_error_body_and_a_context_overflow() -> None:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"},
    }
    with pytest.raises(ContextLengthError):
        list(message_deltas(body, model="m", provider="anthropic"))


def test_malformed_event_names_the_provider() -> None:
    reader = MessageStreamReader(model="m", provider="anthropic")
    with pytest.raises(ModelOutputError, match="anthropic sent malformed JSON"):
        reader.feed("content_block_delta", b'{"type": "content_block_delta", "delta": ')


# -- splitting the stream into events -----------------------------------------------------------

STREAMS = [
    # The API's own framing.
    b'event: message_start\ndata: {"a": 1}\n\nevent: ping\ndata: {"type": "ping"}\n\n',
    # CRLF line ends, a comment (keep-alive), an id, several data lines, no space after colons.
    b": keep-alive\r\nevent: x\r\nid: 7\r\ndata: one\r\ndata:two\r\n\r\ndata: three\r\n\r\n",
    # The last event without its blank line: kept, its lines being whole.
    b"event: a\ndata: 1\n\nevent: message_stop\ndata: {}\n",
    # Cut in the middle of a line: that line is dropped.
    b'event: a\ndata: 1\n\nevent: b\ndata: {"cut',
    # A data field in an event that is not first.
    b"data: plain\n\nevent: late\nretry: 5\ndata: x\n\n",
]


def split_all(stream: bytes, cuts: list[int]) -> list[tuple[str, bytes]]:
    splitter = EventSplitter()
    events: list[tuple[str, bytes]] = []
    for start, stop in itertools.pairwise([0, *sorted(cuts), len(stream)]):
        events += splitter.feed(stream[start:stop])
    return events + splitter.close()


def general_split(stream: bytes, cuts: list[int]) -> list[tuple[str, bytes]]:
    async def chunks() -> AsyncIterator[bytes]:
        for start, stop in itertools.pairwise([0, *sorted(cuts), len(stream)]):
            yield stream[start:stop]

    async def collect() -> list[tuple[str, bytes]]:
        return [event async for event in general_events(chunks())]

    return asyncio.run(collect())


@pytest.mark.parametrize("stream", STREAMS)
@given(data=st.data())
def test_the_splitter_matches_the_general_sse_reader(stream: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    assert split_all(stream, cuts) == general_split(stream, cuts)


def test_the_splitter_reads_the_apis_framing() -> None:
    assert split_all(STREAMS[0], []) == [
        ("message_start", b'{"a": 1}'),
        ("ping", b'{"type": "ping"}'),
    ]
    assert split_all(STREAMS[1], [3, 20]) == [("x", b"one\ntwo"), ("", b"three")]
