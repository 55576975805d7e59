"""`ChatStream`: a streamed model answer the caller iterates, cancels, and retries safely.

A background task pumps the provider's deltas into a queue; the caller takes chunks from it.
That split gives three things: `cancel()` ends the stream at once with a final chunk whose
finish reason is `interrupted` (the partial content kept); a failure before the first chunk
was handed out is retried from scratch, after it never; and the provider's connection is
closed whenever the caller stops early.

Stopping early: `async with model.chat_stream(...) as stream` (or `await stream.aclose()`)
closes the connection and waits until it is closed. A stream left without either (a `break`,
then the stream dropped) is closed when it is garbage-collected: the pump task holds the
pump's state, not the stream, so the stream can be collected while the task waits, and it
cancels the task as it goes. Pump tasks are kept referenced until they end, so none is ever
destroyed while pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from parley.models.accumulator import (
    BlockDelta,
    Delta,
    MetaDelta,
    StreamAccumulator,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    made_by,
)
from parley.models.cards import Pricing
from parley.models.response import ChatResponse, ChatUsage, FinishReason
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, logger

if TYPE_CHECKING:
    from parley.tracing import StreamTrace

__all__ = ["ChatStream"]

_END = object()
_CANCEL = object()
_DELTAS: frozenset[type[Any]] = frozenset(
    (TextDelta, ThinkingDelta, ToolCallDelta, MetaDelta, BlockDelta)
)
"""The delta classes, which a stream's items mostly are: told from its markers in one test."""


class _Channel:
    """A bounded queue from the pump task to the one task reading the stream.

    What `asyncio.Queue` did here, for one writer and one reader, in one deque instead of
    its four (one in its `Event`): about 3 KB less per stream, which in 500 concurrent
    streams was all that parley's resident memory exceeded the raw openai SDK's by
    (benchmarks/models.py).

    Args:
        limit: How many items the writer may be ahead of the reader.
    """

    __slots__ = ("_items", "_limit", "_reader", "_writer")

    def __init__(self, limit: int) -> None:
        self._items: deque[Any] = deque()
        self._limit = limit
        self._reader: asyncio.Future[None] | None = None
        self._writer: asyncio.Future[None] | None = None

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: Any) -> None:
        """Add an item past the limit (the cancel marker, after the items are drained)."""
        self._items.append(item)
        _wake(self._reader)

    async def put(self, item: Any) -> None:
        while len(self._items) >= self._limit:
            self._writer = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                # The reader forgets a writer it woke (see `ChatStream.__anext__`).
                if self._writer is waiter:
                    self._writer = None
        self.put_nowait(item)

    async def get(self) -> Any:
        while not self._items:
            if self._reader is not None:
                raise RuntimeError("a ChatStream is being read by two tasks at once")
            self._reader = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                # The writer forgets a reader it woke (see `_Pump._pump_once`): a second
                # reader may be waiting by now, and is kept to be told apart.
                if self._reader is waiter:
                    self._reader = None
        return self.get_nowait()

    def get_nowait(self) -> Any:
        item = self._items.popleft()
        _wake(self._writer)
        return item

    def unget(self, item: Any) -> None:
        """Put an item taken back in front, for the reader's next `get`."""
        self._items.appendleft(item)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


_pumps: set[asyncio.Task[None]] = set()
"""The pump tasks under way. A pump waiting for its reader is referenced only by its own
channel, so without this set it could be collected while pending (and never close its
connection)."""


def _cancel_soon(task: asyncio.Task[None]) -> None:
    """Cancel `task` from any thread: a collected stream's finalizer runs wherever gc runs."""
    loop = task.get_loop()
    if task.done() or loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task.cancel()
        return
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(task.cancel)


class _Pump:
    """The task side of a stream: opens the provider's stream (again, to retry), feeds the channel.

    It holds nothing of the `ChatStream`, which may so be collected while the task runs.
    """

    __slots__ = ("_open_source", "_policy", "_retry_on", "channel", "sent_visible")

    def __init__(
        self,
        open_source: Callable[[], AsyncIterator[Delta]],
        policy: RetryPolicy,
        retry_on: Retryable,
    ) -> None:
        self._open_source = open_source
        self._policy = policy
        self._retry_on = retry_on
        self.channel = _Channel(256)
        self.sent_visible = False

    async def run(self) -> None:
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._pump_once()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if self._can_retry(attempt, error):
                    wait = self._policy.delay(attempt, error)
                    logger.warning("stream failed before its first chunk (%s); retrying", error)
                    await asyncio.sleep(wait)
                    continue
                await self.channel.put(error)
            else:
                await self.channel.put(_END)
            return

    def _can_retry(self, attempt: int, error: Exception) -> bool:
        return (
            not self.sent_visible
            and attempt <= self._policy.max_retries
            and self._policy.retryable(error, self._retry_on)
        )

    async def _pump_once(self) -> None:
        source = self._open_source()
        channel = self.channel
        items, limit = channel._items, channel._limit
        try:
            async for delta in source:
                if not self.sent_visible and not isinstance(delta, MetaDelta):
                    self.sent_visible = True
                # The channel's `put` inlined while there is room (a call and a coroutine
                # less per delta: a stream's hot path); full, it waits for the reader.
                if len(items) < limit:
                    items.append(delta)
                    if channel._reader is not None:
                        _wake(channel._reader)
                        channel._reader = None  # woken once: its later items need no call
                else:
                    await channel.put(delta)
        finally:
            closer = getattr(source, "aclose", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    await closer()


class ChatStream:
    """An async iterator of delta `ChatResponse`s ending in one `is_last=True` chunk.

    Use it as an async context manager (`async with model.chat_stream(...) as stream`) to
    close the provider's connection however the iteration ends.

    Args:
        open_source: Starts the provider's stream of deltas (called again to retry).
        policy: When to retry a failure that comes before the first chunk.
        retry_on: The exception classes retried (the model's `_get_retryable_exceptions()`).
        model: The model name for the chunks.
        on_final: Called with the final chunk of a stream that ended normally.
        pricing: The model's prices: the final chunk's usage then carries its `cost`.
        trace: Its tracing span (`parley.tracing`), ended with the stream.
        provider: The model's provider, recorded on the final chunk's thinking blocks.
    """

    def __init__(
        self,
        open_source: Callable[[], AsyncIterator[Delta]],
        *,
        policy: RetryPolicy | None = None,
        retry_on: Retryable = DEFAULT_RETRYABLE,
        model: str | None = None,
        on_final: Callable[[ChatResponse], None] | None = None,
        pricing: Pricing | None = None,
        trace: StreamTrace | None = None,
        provider: str | None = None,
    ) -> None:
        self._pricing = pricing
        self._provider = provider
        self._trace = trace
        self._pumping = _Pump(open_source, policy or RetryPolicy(max_retries=0), retry_on)
        self._queue = self._pumping.channel
        self._accumulator = StreamAccumulator(model)
        self._on_final = on_final
        self._pump: asyncio.Task[None] | None = None
        self._cancelled = False
        self._started = time.monotonic()
        self.response: ChatResponse | None = None
        """The final chunk, once the stream has ended (normally or interrupted)."""

    def __del__(self) -> None:
        # Abandoned mid-way (a `break`, then dropped without `aclose`): stop the provider,
        # which closes its connection.
        pump = getattr(self, "_pump", None)
        if pump is not None:
            _cancel_soon(pump)

    def __aiter__(self) -> ChatStream:
        return self

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def __anext__(self) -> ChatResponse:
        if self.response is not None:
            raise StopAsyncIteration
        if self._pump is None and not self._cancelled:
            self._start_pump()
        queue, items = self._queue, self._queue._items
        item: Any
        while True:
            if items:  # the channel's `get_nowait` inlined: the hot path of a stream
                item = items.popleft()
                if queue._writer is not None:
                    _wake(queue._writer)
                    queue._writer = None  # woken once: the items after need no call
            else:
                try:
                    item = await queue.get()
                except asyncio.CancelledError:
                    # The caller's task was cancelled: stop the provider, keep the partial
                    # answer.
                    self._stop_pump()
                    self._finish("interrupted")
                    raise
            # A delta (told from the markers in one test), else the end, a cancel, an error.
            chunk = self._accumulator.add(item) if item.__class__ in _DELTAS else self._marker(item)
            if chunk is not None:
                return chunk

    def _start_pump(self) -> None:
        # Traced, the pump runs in the stream's span: the provider's requests nest in it.
        context = self._trace.context if self._trace is not None else None
        loop = asyncio.get_running_loop()
        self._pump = loop.create_task(self._pumping.run(), context=context)
        _pumps.add(self._pump)
        self._pump.add_done_callback(_pumps.discard)

    def _marker(self, item: Any) -> ChatResponse | None:
        """The chunk for an item that is not a delta of parley's own classes, if any.

        Raises:
            BaseException: The pump's failure, `item` itself.
        """
        if item is _END:
            held = self._accumulator.release()
            if held is not None:  # a tool call still waiting for its id: shown first
                self._queue.unget(_END)
                return held
            return self._finish(None)
        if item is _CANCEL:
            return self._finish("interrupted")
        if isinstance(item, BaseException):
            self.response = self._accumulator.final("error")
            if self._trace is not None:
                self._trace.end(self.response, item)
            raise item
        return self._accumulator.add(item)  # a delta of a subclass

    def cancel(self) -> None:
        """End the stream now: the next chunk is the final one, finish reason `interrupted`.

        Deltas that arrived but were not handed out yet are kept in the final content.
        """
        if self.response is not None or self._cancelled:
            return
        self._cancelled = True
        self._stop_pump()
        self._queue.put_nowait(_CANCEL)

    def _stop_pump(self) -> None:
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
        # What the provider sent is part of the answer even if the caller never saw it.
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not (item is _END or item is _CANCEL or isinstance(item, BaseException)):
                self._accumulator.add(item)

    async def aclose(self) -> None:
        """Stop the stream and close the provider's connection; return once it is closed.

        The final chunk (`response`, finish reason `interrupted` unless the stream had ended)
        is set before the wait. A cancellation of the calling task during the wait is raised,
        not swallowed; the connection then still closes, without waiting for it.
        """
        pump = self._pump
        self._stop_pump()
        if self.response is None:
            self._finish("interrupted")
        if pump is not None and not pump.done():
            # `wait` raises only the caller's own cancellation, never the pump's.
            await asyncio.wait((pump,))

    async def collect(self) -> ChatResponse:
        """Consume the stream and return its final chunk."""
        async for _ in self:
            pass
        assert self.response is not None
        return self.response

    def _finish(self, reason: FinishReason | None) -> ChatResponse:
        final = self._accumulator.final(reason)
        if self._provider is not None:
            made_by(final.content, self._provider)
        usage = final.usage.model_copy() if final.usage else ChatUsage()
        usage.elapsed = time.monotonic() - self._started
        if self._pricing is not None:
            usage.cost = self._pricing.usage_cost(usage)
        final.usage = usage
        self.response = final
        if self._trace is not None:
            self._trace.end(final)
        if reason is None and self._on_final is not None:
            self._on_final(final)
        return final
