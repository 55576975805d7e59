"""`EventSplitter` and `StreamReader.read`: DashScope's stream read a network read at a time.

It must read every body exactly as the shared line-by-line reader (`iter_events`) does,
wherever the reads cut it: checked on DashScope's own framing and on the SSE format's
other shapes (several data lines, comments, CRLF line ends, events without a name, a body
that ends mid-event).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from parley.errors import ModelError, ModelOutputError
from parley.models._wire import iter_events
from parley.models.accumulator import Delta, TextDelta
from parley.providers.dashscope._wire import EventSplitter, StreamReader

DASHSCOPE = (
    b'id:1\nevent:result\n:HTTP_STATUS/200\ndata:{"output":{"text":"a"}}\n\n'
    b'id:2\nevent:result\n:HTTP_STATUS/200\ndata:{"output":{"text":"data: b\\n"}}\n\n'
    b'id:3\nevent:error\n:HTTP_STATUS/400\ndata:{"code":"InvalidParameter"}\n\n'
)


def split(body: bytes, cuts: list[int]) -> list[tuple[str, bytes]]:
    """The events `EventSplitter` reads from `body` cut at `cuts`."""
    splitter = EventSplitter()
    events = []
    start = 0
    for cut in [*sorted(cuts), len(body)]:
        events += splitter.feed(body[start:cut])
        start = cut
    return events + splitter.end()


def reference(body: bytes) -> list[tuple[str, bytes]]:
    async def read() -> list[tuple[str, bytes]]:
        async def one() -> AsyncIterator[bytes]:
            yield body

        return [event async for event in iter_events(one())]

    return asyncio.run(read())


def test_dashscope_s_events_are_read_whole_wherever_the_reads_cut_them() -> None:
    expected = [
        ("result", b'{"output":{"text":"a"}}'),
        ("result", b'{"output":{"text":"data: b\\n"}}'),
        ("error", b'{"code":"InvalidParameter"}'),
    ]
    assert reference(DASHSCOPE) == expected
    for cut in range(len(DASHSCOPE) + 1):
        assert split(DASHSCOPE, [cut]) == expected, cut
    assert split(DASHSCOPE, list(range(len(DASHSCOPE)))) == expected  # a byte at a time
    assert split(DASHSCOPE.replace(b"\n", b"\r\n"), [7, 70, 71]) == expected


LINES = st.sampled_from(
    [
        b"data:{}",
        b"data: x",
        b"data:  two spaces",
        b"data",
        b"data:",
        b"event:result",
        b"event: error",
        b"event",
        b"id:7",
        b":HTTP_STATUS/200",
        b": keep-alive",
        b"retry:100",
        b"other:field",
        b"",
    ]
)


@settings(max_examples=300, deadline=None)
@example(  # a bare `event` line after DashScope's: the event has no name
    lines=[b"id:1", b"event:result", b"event", b"data:{}", b""], crlf=False, tail=b"", cuts=[]
)
@example(  # the name given twice: the last counts
    lines=[b"id:1", b"event:result", b"event: error", b"data:{}", b""],
    crlf=False,
    tail=b"",
    cuts=[],
)
@given(
    lines=st.lists(LINES, max_size=14)
    | st.lists(LINES, max_size=10).map(lambda ls: [b"id:1", b"event:result", *ls]),
    crlf=st.booleans(),
    tail=st.sampled_from([b"", b"\n", b"data: cut"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_any_body_is_read_as_the_line_by_line_reader_reads_it(
    lines: list[bytes], crlf: bool, tail: bytes, cuts: list[int]
) -> None:
    end = b"\r\n" if crlf else b"\n"
    body = b"".join(line + end for line in lines) + tail
    assert split(body, [min(cut, len(body)) for cut in cuts]) == reference(body)


# -- the reader, a read at a time -----------------------------------------------------------------


def framed(number: int, data: bytes, name: str = "result", status: int = 200) -> bytes:
    """An event as DashScope frames it."""
    return b"id:%d\nevent:%s\n:HTTP_STATUS/%d\ndata:%s\n\n" % (number, name.encode(), status, data)


def answer(text: str, finish: str = "null") -> bytes:
    message = {"content": text, "role": "assistant"}
    body = {
        "output": {"choices": [{"message": message, "finish_reason": finish}]},
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "request_id": "r1",
    }
    return json.dumps(body).encode()


STREAM = (
    framed(1, answer("Hel"))
    + framed(2, answer("lo"))
    + framed(3, json.dumps({"output": {"text": " there", "finish_reason": "null"}}).encode())
    + framed(4, answer("", "stop"))
)


def event_by_event(body: bytes) -> list[Delta]:
    reader = StreamReader(model="m", provider="dashscope")
    return [delta for name, data in reference(body) for delta in reader.feed(name, data)]


def test_reads_give_the_deltas_of_their_events_wherever_they_cut_the_body() -> None:
    expected = event_by_event(STREAM)
    assert [d for d in expected if isinstance(d, TextDelta)] == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(" there"),
    ]
    for cut in range(0, len(STREAM) + 1, 7):
        reader = StreamReader(model="m", provider="dashscope")
        deltas = reader.read(STREAM[:cut]) + reader.read(STREAM[cut:]) + reader.end()
        assert deltas == expected, cut
        assert reader.complete
        assert reader.failure is None


def test_an_error_event_comes_after_the_deltas_read_before_it() -> None:
    error = json.dumps({"code": "DataInspectionFailed", "message": "bad"}).encode()
    reader = StreamReader(model="m", provider="dashscope")
    deltas = reader.read(framed(1, answer("Hel")) + framed(2, error, "error", 400))
    assert TextDelta("Hel") in deltas
    assert isinstance(reader.failure, ModelError)
    assert "DataInspectionFailed" in str(reader.failure)
    alone = StreamReader(model="m", provider="dashscope")
    with pytest.raises(ModelError, match="DataInspectionFailed"):
        alone.read(framed(1, error, "error", 400))


def test_malformed_data_is_an_output_error() -> None:
    reader = StreamReader(model="m", provider="dashscope")
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        reader.read(framed(1, b"{not json"))
