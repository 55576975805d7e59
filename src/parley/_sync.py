"""Sync twins of async entry points, built on the async ones.

Every sync call runs its coroutine on one background event loop thread that parley owns, so
it works from plain scripts and from inside a running loop (a notebook) alike, and clients
bound to a loop (httpx pools in provider SDKs) always meet the same loop. At exit the loop
gets a moment to finish what is left on it (the closing of connections, mostly), then it is
stopped and closed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")

_WIND_DOWN = 1.0
"""Seconds the loop's leftover tasks get to finish at exit."""

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop  # noqa: PLW0603  (one loop per process, made on first use)
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="parley-sync", daemon=True)
            thread.start()
            atexit.register(_stop, loop, thread)
            _loop = loop
        return _loop


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """At exit: let the loop finish what is left, stop it, and close it once its thread let go.

    What is left is mostly closing: connections of clients collected just before (their
    closing runs as a task). A loop left open is reported as "unclosed event loop", and a
    task cut short as "destroyed but it is pending", when collected.
    """
    with contextlib.suppress(Exception):  # a loop already stopped, or a wind-down stuck
        asyncio.run_coroutine_threadsafe(_wind_down(), loop).result(timeout=_WIND_DOWN + 1)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=1)
    if not thread.is_alive():
        loop.close()


async def _wind_down() -> None:
    # As `asyncio.run` ends a loop, except that tasks get a moment to finish, not cancelled:
    # the closing of connections is what they are, here.
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=_WIND_DOWN)
    await asyncio.get_running_loop().shutdown_asyncgens()


class _Started:
    """Where a coroutine run on the background loop is, for cancelling it from this thread.

    A Ctrl+C may land while `run_coroutine_threadsafe` is still scheduling, after the
    coroutine was queued but before its future is handed back: the task is then cancelled
    through this record (or never starts), instead of running on unseen.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.task: asyncio.Task[Any] | None = None
        self.cancelled = False

    async def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        with self.lock:
            if self.cancelled:
                coroutine.close()
                raise asyncio.CancelledError
            self.task = asyncio.current_task()
        return await coroutine

    def cancel(self, loop: asyncio.AbstractEventLoop) -> None:
        with self.lock:
            self.cancelled = True
            if self.task is not None:
                loop.call_soon_threadsafe(self.task.cancel)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code and return its result."""
    loop = _background_loop()
    started = _Started()
    try:
        future = asyncio.run_coroutine_threadsafe(started.run(coroutine), loop)
        return future.result()
    except BaseException:
        started.cancel(loop)  # Ctrl+C (or any error here) cancels the work in flight
        raise


def iterate_sync(iterator: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code; closing this closes that."""
    loop = _background_loop()
    try:
        while True:
            future = asyncio.run_coroutine_threadsafe(_next(iterator), loop)
            done, item = future.result()
            if done:
                return
            yield item
    finally:
        closer = getattr(iterator, "aclose", None)
        if closer is not None:
            asyncio.run_coroutine_threadsafe(closer(), loop).result()


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, Any]:
    try:
        return False, await anext(iterator)
    except StopAsyncIteration:
        return True, None
