"""`parley.models._aiohttp`: aiohttp's failures told apart, one client per loop, closed with it."""

from __future__ import annotations

import asyncio
import gc
import socket
import subprocess
import sys
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from parley._sync import run_sync
from parley.errors import MissingDependencyError
from parley.models._aiohttp import LoopClients, connection_failure, httpx_client_class
from tests._requires import require_module

require_module("httpx_aiohttp", "dashscope")
import httpx  # noqa: E402  (httpx-aiohttp's interface: there when it is)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A server on 127.0.0.1 answering each connection with `handler`; its URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/"


async def get(url: str, *, timeout: float = 5.0) -> BaseException:
    """What a GET of `url` raised, through httpx-aiohttp's client."""
    async with httpx_client_class("dashscope")(timeout=timeout) as client:
        try:
            await client.get(url)
        except Exception as exc:
            return exc
    raise AssertionError(f"GET {url} succeeded")


# -- failures -------------------------------------------------------------------------------


async def test_a_refused_connection_is_unreachable() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    raised = await get(f"http://127.0.0.1:{port}/")
    # Why the cause is read: httpx-aiohttp calls this a connect *timeout*.
    assert isinstance(raised, httpx.TimeoutException)
    failure = connection_failure(raised)
    assert failure is not None
    assert failure.unreachable
    assert "Cannot connect to host" in failure.describe()


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, then close the connection without an answer."""
    await reader.readuntil(b"\r\n\r\n")
    writer.close()


async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, then answer with a body shorter than its `Content-Length`."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
    await writer.drain()
    writer.close()


@pytest.mark.parametrize(
    ("handler", "said"),
    [(hang_up, "Disconnected"), (cut_short, "")],
    ids=["dropped-before-the-answer", "body-cut-short"],
)
async def test_a_connection_failing_after_it_was_made_is_a_failure(
    handler: Handler, said: str
) -> None:
    async with serving(handler) as url:
        raised = await get(url)
    failure = connection_failure(raised)
    assert failure is not None
    assert not failure.unreachable
    assert said in failure.describe()


async def test_a_server_that_never_answers_is_a_timeout_not_a_failure() -> None:
    answered = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answered.wait()
        writer.close()

    async with serving(silent) as url:
        raised = await get(url, timeout=0.2)
        answered.set()
    assert isinstance(raised, httpx.TimeoutException)
    assert connection_failure(raised) is None


def test_errors_without_aiohttp_under_them_are_not_failures() -> None:
    assert connection_failure(ValueError("foreign")) is None
    assert connection_failure(httpx.ConnectError("httpx's own transport")) is None


def test_missing_httpx_aiohttp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx_aiohttp", None)
    with pytest.raises(MissingDependencyError, match=r"parley\[ollama\]"):
        httpx_client_class("ollama")


# -- one client per loop --------------------------------------------------------------------


class Client:
    """A client, as far as `LoopClients` is concerned."""


@dataclass
class Made:
    """Clients a `LoopClients` made, and the loops each was closed on."""

    clients: list[Client] = field(default_factory=list)
    closed: list[tuple[Client, asyncio.AbstractEventLoop]] = field(default_factory=list)

    def make(self) -> tuple[Client, Callable[[], Awaitable[None]]]:
        client = Client()
        self.clients.append(client)

        async def close() -> None:
            self.closed.append((client, asyncio.get_running_loop()))

        return client, close


def test_one_client_per_loop_closed_when_the_loop_ends() -> None:
    made = Made()
    pool = LoopClients(made.make)

    async def use() -> tuple[Client, asyncio.AbstractEventLoop]:
        first = pool.get()
        assert pool.get() is first
        return first, asyncio.get_running_loop()

    first = asyncio.run(use())
    second = asyncio.run(use())
    assert first[0] is not second[0]
    # Nobody called `aclose()`: each loop closed its own client, on itself, as it ended.
    assert made.closed == [first, second]


def test_aclose_closes_once() -> None:
    made = Made()
    pool = LoopClients(made.make)

    async def use() -> None:
        client = pool.get()
        await pool.aclose()
        assert made.closed == [(client, asyncio.get_running_loop())]
        await pool.aclose()  # nothing left on this loop

    asyncio.run(use())
    assert len(made.closed) == 1  # not again when the loop ended


def test_clients_of_ended_loops_are_let_go() -> None:
    made = Made()
    pool = LoopClients(made.make)

    async def use() -> None:
        pool.get()

    asyncio.run(use())
    gone = weakref.ref(made.clients.pop())
    asyncio.run(use())  # a new loop: the ended one's client is dropped
    made.closed.clear()
    gc.collect()
    assert gone() is None


def test_a_client_on_a_loop_running_at_exit_is_closed_at_exit() -> None:
    # parley's sync twins run on a loop of their own, in a thread, which outlives the
    # program: its clients are closed at exit, before that loop stops.
    script = """
import asyncio
from parley._sync import run_sync
from parley.models._aiohttp import LoopClients

loops = []

def make():
    async def close():
        await asyncio.sleep(0)
        print("closed on", loops.index(asyncio.get_running_loop()), flush=True)
    return "client", close

pool = LoopClients(make)

async def use():
    loops.append(asyncio.get_running_loop())
    return pool.get()

print(asyncio.run(use()))  # made before the sync twins' loop
print(run_sync(use()))
"""
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["closed on 0", "client", "client", "closed on 1"]


def test_aclose_closes_every_loops_client_each_on_its_loop() -> None:
    made = Made()
    pool = LoopClients(made.make)

    async def use() -> tuple[Client, asyncio.AbstractEventLoop]:
        return pool.get(), asyncio.get_running_loop()

    elsewhere = run_sync(use())  # the sync twins' loop, running on in its thread

    async def close_here() -> tuple[Client, asyncio.AbstractEventLoop]:
        here = await use()
        await pool.aclose()
        assert set(made.closed) == {here, elsewhere}
        return here

    asyncio.run(close_here())
    assert len(made.closed) == 2  # neither closed again as its loop ended
    assert run_sync(use())[0] is not elsewhere[0]  # a closed client is not handed out again
