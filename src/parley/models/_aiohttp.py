"""httpx's interface on aiohttp's connections, for the SDKs built on httpx (or httpx2).

An SDK built on httpx reads a streamed body through httpx's own HTTP/1.1 parser, in pure
Python, which hands on every chunk of a chunked body apart: one per server-sent event or
NDJSON line, which costs as much as parley's own work on that event, or more.
httpx-aiohttp keeps httpx's client (base URL, headers, timeouts, limits, proxies from the
environment) over aiohttp's connections, whose C parser hands on what each read of the
socket gave. Measured with benchmarks/models_<provider>.py, a 20,000-event body is read in
about a sixth of the time, and a small call costs 0.15 to 0.3 ms less; the streams went
from 0.87x the raw SDK's time to 0.36x (ollama), from 0.45x to 0.19x (anthropic). The
SDKs that take it: dashscope (`http_client=`,
httpx-aiohttp's `HttpxAiohttpClient`), ollama (the class its `AsyncClient` builds, see
`ollama._sdk`), anthropic (its own `DefaultAioHttpClient`, a vendored httpx-aiohttp), openai
for speech (the same, from the openai SDK).

What every such client needs, here once:

- `LoopClients`: one client per event loop (a connection pool belongs to the loop that
  opened it), closed by `aclose()`, else when its loop shuts down, else at exit. Every
  provider's SDK clients are pooled by it, httpx's and aiohttp's alike (openai and
  google-genai on httpx too). aiohttp
  reports connections that outlive their loop as "Unclosed connector" when collected.
- `connection_failure`: httpx-aiohttp maps a refused connection and a dropped one to
  `httpx.ConnectTimeout`; the aiohttp error under it says which it was, so that neither
  reads as a timeout.
- `httpx_client_class`: httpx-aiohttp's client, or an install hint naming the extra.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import sys
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Closer",
    "ConnectionFailure",
    "LoopClients",
    "Pool",
    "PooledClients",
    "PooledConnections",
    "connection_failure",
    "httpx_client_class",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Closer = Callable[[], Awaitable[None]]
"""Closes a client and its connections."""


def httpx_client_class(extra: str) -> type[httpx.AsyncClient]:
    """`httpx_aiohttp.HttpxAiohttpClient`: an `httpx.AsyncClient` whose transport is aiohttp.

    Args:
        extra: The parley extra that installs it, for the error.

    Raises:
        MissingDependencyError: `httpx-aiohttp` is not installed.
    """
    try:
        from httpx_aiohttp import HttpxAiohttpClient  # noqa: PLC0415  (imports aiohttp)
    except ImportError as exc:
        raise MissingDependencyError("httpx_aiohttp", extra) from exc
    return HttpxAiohttpClient


# -- errors ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionFailure:
    """A connection that failed without timing out, as aiohttp saw it."""

    cause: BaseException
    """aiohttp's error."""

    @property
    def unreachable(self) -> bool:
        """No connection was made (refused, unknown host, TLS): the server is out of reach."""
        import aiohttp  # noqa: PLC0415  (loaded already: it raised `cause`)

        return isinstance(self.cause, aiohttp.ClientConnectorError)

    def describe(self) -> str:
        """The error's type and text, for a message."""
        text = str(self.cause)
        return f"{type(self.cause).__name__}: {text}" if text else type(self.cause).__name__


def connection_failure(exc: BaseException) -> ConnectionFailure | None:
    """The aiohttp failure under `exc` (itself, or its causes), unless it was a timeout.

    None when no aiohttp error is there (or aiohttp is not even loaded), or when it timed
    out: httpx's timeout above it says that as well as it can be said.
    """
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return None
    found: BaseException | None = exc
    for _ in range(6):
        if found is None:
            return None
        if isinstance(found, aiohttp.ClientError | TimeoutError):
            if isinstance(found, aiohttp.ServerTimeoutError | TimeoutError):
                return None
            return ConnectionFailure(found)
        found = found.__cause__
    return None


# -- one client per event loop --------------------------------------------------------------


class LoopClients(Generic[T]):
    """One client per event loop, made on first use there, closed with its loop.

    An HTTP connection pool belongs to the loop that opened it: a model used from several
    loops (a test's loop, the loop parley's sync twins run on) needs a client on each. Each
    is closed by `aclose()` on its loop, else when its loop shuts down (see `_Parked.park`),
    else at exit if its loop still runs then (in another thread).

    Args:
        make: Makes a client on the running loop; returns it and what closes it.
    """

    def __init__(self, make: Callable[[], tuple[T, Closer]]) -> None:
        self._make = make
        self._made: dict[asyncio.AbstractEventLoop, _Parked[T]] = {}

    def get(self) -> T:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        made = self._made.get(loop)
        if made is None:
            # Forget the clients of loops that are gone (each `asyncio.run` makes one). Not a
            # weak mapping: a client's connections refer to their loop, which would keep it.
            for closed in [known for known in self._made if known.is_closed()]:
                del self._made[closed]
            client, close = self._make()
            made = _Parked(client, close, loop)
            made.park()
            self._made[loop] = made
        return made.client

    async def aclose(self) -> None:
        """Close every client this pool made, and its connections, each on its own loop.

        The running loop's client is closed here; those of loops running in other threads
        (the sync twins' loop, above all) on their loops, waited for up to `_ELSEWHERE`
        seconds. A client on a loop that runs nothing now is closed when that loop shuts
        down, as if `aclose` had not been called.
        """
        mine = self._made.pop(asyncio.get_running_loop(), None)
        closing: list[asyncio.Future[None]] = []
        for loop, made in list(self._made.items()):
            if loop.is_closed():  # its client was closed as it shut down
                del self._made[loop]
            elif loop.is_running():  # in another thread, as this one runs the running loop
                del self._made[loop]
                elsewhere = asyncio.run_coroutine_threadsafe(made.aclose(), loop)
                closing.append(asyncio.wrap_future(elsewhere))
        if mine is not None:
            await mine.aclose()
        if closing:
            await asyncio.wait(closing, timeout=_ELSEWHERE)


_ELSEWHERE = 2.0
"""Seconds `LoopClients.aclose` waits for the clients it closes on other threads' loops."""


@dataclass(eq=False)
class _Parked(Generic[T]):
    """A loop's client, and the parked generator that closes it."""

    client: T
    close: Closer
    loop: asyncio.AbstractEventLoop
    closer: AsyncGenerator[None, None] | None = None

    def park(self) -> None:
        """Close the client when the loop shuts down, if nobody closed it before.

        A generator started here and parked at its `yield` is finalized by the loop's
        `shutdown_asyncgens()` (as `asyncio.run` and pytest-asyncio end every loop), which
        runs its `finally` on the loop, before it closes; or, if it is collected first, on
        the loop too (its finalizer hook). The loop holds generators weakly: this object
        keeps it.
        """
        self.closer = _closing(self.close)
        with contextlib.suppress(StopIteration):
            self.closer.asend(None).send(None)  # runs it to its `yield`, without awaiting
        _PARKED.add(self)
        _close_at_exit_first()

    async def aclose(self) -> None:
        """Close the client now (the generator's `finally`, run once whoever runs it)."""
        _PARKED.discard(self)
        if self.closer is not None:
            await self.closer.aclose()


async def _closing(close: Closer) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await close()


_PARKED: weakref.WeakSet[_Parked[Any]] = weakref.WeakSet()


def _close_at_exit() -> None:
    """Close the clients whose loops outlive the main program.

    They are loops running in other threads: the one parley's sync twins run on, above all.
    A loop nobody runs any more (stopped, not closed) runs the closing here.
    """
    for parked in list(_PARKED):
        loop = parked.loop
        if loop.is_closed():
            continue
        with contextlib.suppress(Exception):
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(parked.aclose(), loop).result(timeout=2)
            else:
                loop.run_until_complete(parked.aclose())


def _close_at_exit_first() -> None:
    # Exit hooks run last registered first: registered again after every client is made,
    # this one runs before the hook that stops the sync twins' loop (registered when that
    # loop was made, before any client on it), while the loop still runs the closing.
    atexit.unregister(_close_at_exit)
    atexit.register(_close_at_exit)


class PooledConnections:
    """`aclose` and `close_sync` for a model whose connections are in `self._pool`.

    `_pool` is a `LoopClients` (or a pool wrapping one), made on first use; closing a model
    that never connected does nothing. Put it before the model's base class, whose no-op
    `aclose` it overrides.
    """

    _pool: Any = None

    async def aclose(self) -> None:
        """Close this model's clients and connections (every loop's: `LoopClients.aclose`)."""
        if self._pool is not None:
            await self._pool.aclose()

    def close_sync(self) -> None:
        """`aclose` from synchronous code (run on the sync twins' loop, whose client it closes)."""
        if self._pool is not None:
            from parley._sync import run_sync  # noqa: PLC0415

            run_sync(self._pool.aclose())


class Pool(Protocol[T_co]):
    """One client per event loop: a `LoopClients`, or a pool like it."""

    def get(self) -> T_co:
        """The client for the running loop."""
        ...

    async def aclose(self) -> None:
        """Close every client of the pool (see `LoopClients.aclose`)."""
        ...


class PooledClients(PooledConnections, Generic[T]):
    """A model's SDK clients, one per event loop, from the pool `new_pool` makes on first use."""

    def client(self) -> T:
        """The SDK client for the running event loop (made on first use).

        Raises:
            ConfigurationError: The credential lacks what the provider needs (a key).
            MissingDependencyError: The provider's SDK is not installed.
        """
        pool: Pool[T] = self._pool if self._pool is not None else self.new_pool()
        self._pool = pool
        return pool.get()

    def new_pool(self) -> Pool[T]:
        """The pool of this model's clients (its settings read now, a client per loop later)."""
        raise NotImplementedError
