"""Sync twins of async entry points, built on the async ones.

Every sync call runs its coroutine on one background event loop thread that parley owns, so
it works from plain scripts and from inside a running loop (a notebook) alike, and clients
bound to a loop (httpx pools in provider SDKs) always meet the same loop.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["iterate_sync", "run_sync"]

T = TypeVar("T")

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
    """Stop the loop at exit, and close it once its thread let go of it.

    A loop left open is reported as "unclosed event loop" if it is collected before the
    interpreter ends.
    """
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=2)
    if not thread.is_alive():
        loop.close()


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code and return its result."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _background_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
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
