"""A `ChatStream`'s lifetime: the provider's connection and the pump task end with the stream.

Through the official openai SDK against the local wire-format server, which records when a
client leaves before its answer ended. The answers are long and paced, so that a connection
left open would still be open when the test looks.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from parley import Msg
from parley.models import ChatStream
from parley.models.accumulator import Delta, TextDelta
from parley.providers.openai.server import OpenAIServer, Reply
from tests.providers.openai import fixtures as openai_fixtures

# OpenAI's wire: its `server` and `make_model`, for this module alone.
server = openai_fixtures.server
make_model = openai_fixtures.make_model

ModelFactory = Callable[..., Any]

HI = [Msg.user("Hi")]
LONG = Reply(text="x" * 400, chunk_size=1, chunk_delay=0.01)
"""More chunks than a stream buffers ahead of its reader, paced: the answer outlasts a test."""


async def until(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll `check` until it holds; fail saying `what` was awaited if it never does."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def other_tasks(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """The tasks of this loop, still pending, started since `before` was taken."""
    return asyncio.all_tasks() - before - {asyncio.current_task()}  # type: ignore[misc]


async def test_leaving_async_with_after_a_break_closes_the_connection(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(LONG)
    before = asyncio.all_tasks()
    async with make_model().chat_stream(HI) as stream:
        async for chunk in stream:
            assert chunk.text == "x"
            break
    # Leaving the block waited for the pump: nothing of the stream is left running.
    assert not other_tasks(before)
    assert stream.response is not None
    assert stream.response.finish_reason == "interrupted"
    await until(lambda: server.requests[0].disconnected, "the server to see the client leave")


async def test_a_stream_dropped_without_aclose_closes_the_connection(
    server: OpenAIServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    server.add(LONG)
    before = asyncio.all_tasks()
    stream = make_model().chat_stream(HI)
    async for _ in stream:
        break
    pumps = weakref.WeakSet(other_tasks(before))
    assert len(pumps) == 1
    del stream
    gc.collect()
    await until(lambda: server.requests[0].disconnected, "the server to see the client leave")
    await until(lambda: all(task.done() for task in pumps), "the pump task to end")
    # The pump ended by being cancelled, not by being collected while it was pending.
    assert "Task was destroyed but it is pending" not in caplog.text


async def test_a_stream_dropped_before_its_first_chunk_starts_nothing(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    stream = make_model().chat_stream(HI)
    del stream
    gc.collect()
    assert server.requests == []


async def test_aclose_does_not_swallow_the_callers_cancellation() -> None:
    closing, release, closed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def source() -> AsyncIterator[Delta]:
        try:
            yield TextDelta("a")
            await asyncio.Event().wait()  # a provider that never says more
        finally:
            # A provider whose connection takes a while to close.
            closing.set()
            await release.wait()
            closed.set()

    stream = ChatStream(source)
    assert (await anext(stream)).text == "a"
    closer = asyncio.create_task(stream.aclose())
    await closing.wait()
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    # The stream still ended, with what it had.
    assert stream.response is not None
    assert stream.response.finish_reason == "interrupted"
    assert stream.response.text == "a"
    release.set()
    await asyncio.wait_for(closed.wait(), 5)


async def test_aclose_in_a_task_already_cancelled_raises_the_cancellation() -> None:
    async def source() -> AsyncIterator[Delta]:
        yield TextDelta("a")
        await asyncio.Event().wait()

    stream = ChatStream(source)
    await anext(stream)
    closed_normally = []

    async def close_while_cancelled() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # the cancellation is pending when aclose starts to wait
        await stream.aclose()
        closed_normally.append(True)

    closer = asyncio.create_task(close_while_cancelled())
    with pytest.raises(asyncio.CancelledError):
        await closer
    assert closed_normally == []
    assert stream.response is not None


async def test_aclose_waits_for_the_provider_to_close() -> None:
    closed = asyncio.Event()

    async def source() -> AsyncIterator[Delta]:
        try:
            yield TextDelta("a")
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            closed.set()

    async with ChatStream(source) as stream:
        await anext(stream)
    assert closed.is_set()


async def test_a_stream_read_by_two_tasks_at_once_is_refused() -> None:
    gate = asyncio.Event()

    async def source() -> AsyncIterator[Delta]:
        await gate.wait()
        yield TextDelta("a")

    stream = ChatStream(source)
    first = asyncio.create_task(anext(stream))
    await asyncio.sleep(0.01)  # the first reader waits on the empty channel
    with pytest.raises(RuntimeError, match="two tasks at once"):
        await anext(stream)
    gate.set()
    assert (await asyncio.wait_for(first, 5)).text == "a"
    await stream.aclose()


async def test_a_reader_slower_than_its_provider_gets_every_delta_in_order() -> None:
    # More deltas than the channel holds: the pump waits for the reader, is woken, goes on.
    pieces = [f"{n}," for n in range(1_000)]

    async def source() -> AsyncIterator[Delta]:
        for piece in pieces:
            yield TextDelta(piece)

    texts = []
    async with ChatStream(source) as stream:
        async for chunk in stream:
            if not chunk.is_last:
                texts.append(chunk.text)
                if len(texts) % 100 == 0:
                    await asyncio.sleep(0)  # the pump runs, and fills the channel again
    assert texts == pieces
    assert stream.response is not None
    assert stream.response.text == "".join(pieces)
