"""Every provider's SDK clients, one per event loop, closed with their loop or their model.

The official SDKs against the local wire servers, for the models whose clients `LoopClients`
(`parley.models._aiohttp`) pools: OpenAI's chat, embeddings and speech (on aiohttp), Gemini's
chat and embeddings. What a pool may not do: hand a loop's client to another loop, keep a
shut-down loop's connections open (collected later, they say "unclosed transport" or
"Unclosed client session", errors under `filterwarnings = error`), or leave a client open
after its model was closed. Connections are counted from the kernel's table of this process's
sockets, not from the SDKs' own state.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from parley.providers._server.embeddings import Embeddings
from tests._requires import require_module
from tests.providers._chat import HI


@dataclass(frozen=True)
class Case:
    """A model on a server: how to script one answer, and one call that uses it."""

    server: Callable[[], Any]
    model: Callable[[Any], Any]
    answer: Callable[[], Any]
    call: Callable[[Any], Awaitable[Any]]
    call_sync: Callable[[Any], Any]
    requires: tuple[str, str] | None = None


def openai_chat() -> Case:
    from parley.providers.openai.chat import OpenAIChatModel  # noqa: PLC0415
    from parley.providers.openai.server import OpenAIServer, Reply  # noqa: PLC0415

    return Case(
        OpenAIServer,
        lambda server: OpenAIChatModel(server.credential(), "gpt-4o-mini"),
        lambda: Reply(text="Hello!"),
        lambda model: model.chat(HI),
        lambda model: model.chat_sync(HI),
    )


def openai_embeddings() -> Case:
    from parley.providers.openai.embeddings import OpenAIEmbeddingModel  # noqa: PLC0415
    from parley.providers.openai.server import OpenAIServer  # noqa: PLC0415

    return Case(
        OpenAIServer,
        lambda server: OpenAIEmbeddingModel(server.credential(), "text-embedding-3-small"),
        Embeddings,
        lambda model: model(["a"]),
        lambda model: model.call_sync(["a"]),
    )


def openai_speech() -> Case:
    from parley.providers.openai.server import OpenAIServer, Speech  # noqa: PLC0415
    from parley.providers.openai.speech import OpenAITTSModel  # noqa: PLC0415

    return Case(
        OpenAIServer,
        lambda server: OpenAITTSModel(server.credential(), "tts-1", {"voice": "alloy"}),
        Speech,
        lambda model: model.synthesize("Hi"),
        lambda model: model.synthesize_sync("Hi"),
    )


def gemini_chat() -> Case:
    from parley.providers.gemini import GeminiChatModel  # noqa: PLC0415
    from parley.providers.gemini.server import GeminiServer, Reply  # noqa: PLC0415

    return Case(
        GeminiServer,
        lambda server: GeminiChatModel(server.credential(), "gemini-2.5-flash"),
        lambda: Reply(text="Hello!"),
        lambda model: model.chat(HI),
        lambda model: model.chat_sync(HI),
        ("google.genai", "gemini"),
    )


def gemini_embeddings() -> Case:
    from parley.providers.gemini.embeddings import GeminiEmbeddingModel  # noqa: PLC0415
    from parley.providers.gemini.server import GeminiServer  # noqa: PLC0415

    return Case(
        GeminiServer,
        lambda server: GeminiEmbeddingModel(server.credential(), "gemini-embedding-001"),
        Embeddings,
        lambda model: model(["a"]),
        lambda model: model.call_sync(["a"]),
        ("google.genai", "gemini"),
    )


CASES = {
    "openai-chat": openai_chat,
    "openai-embeddings": openai_embeddings,
    "openai-speech": openai_speech,
    "gemini-chat": gemini_chat,
    "gemini-embeddings": gemini_embeddings,
}


@dataclass
class Bound:
    """A model of one case, its server, and the connections open to that server."""

    case: Case
    server: Any
    model: Any

    def connections(self) -> int:
        """Sockets this process holds connected to the server (client ends only)."""
        port = urlsplit(self.server.url).port
        assert port is not None
        mine = set()
        for fd in os.listdir("/proc/self/fd"):
            with_target = _readlink(f"/proc/self/fd/{fd}")
            if with_target.startswith("socket:["):
                mine.add(with_target[len("socket:[") : -1])
        count = 0
        with open("/proc/self/net/tcp") as table:
            next(table)  # the header
            for line in table:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                count += remote_port == port and fields[9] in mine
        return count

    async def use(self) -> Any:
        """One call on the running loop; the client it went through."""
        self.server.add(self.case.answer())
        await self.case.call(self.model)
        return self.model.client()

    def use_sync(self) -> None:
        """One call through the model's sync twin (on parley's background loop)."""
        self.server.add(self.case.answer())
        self.case.call_sync(self.model)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # an fd closed since it was listed (the listing's own, above all)
        return ""


@pytest.fixture(params=list(CASES))
def bound(request: pytest.FixtureRequest) -> Iterator[Bound]:
    case: Case = CASES[request.param]()
    if case.requires is not None:
        require_module(*case.requires)
    with case.server() as server:
        yield Bound(case, server, case.model(server))


@contextmanager
def collected() -> Iterator[None]:
    """Collect garbage at the end: a connection left open warns then (an error here)."""
    try:
        yield
    finally:
        gc.collect()


def test_each_loop_gets_a_client_closed_when_the_loop_shuts_down(bound: Bound) -> None:
    async def on_a_loop() -> tuple[Any, int]:
        client = await bound.use()
        assert bound.model.client() is client  # the same client all along this loop
        return client, bound.connections()

    with collected():
        first, open_then = asyncio.run(on_a_loop())
        assert open_then == 1  # kept alive for the next call on that loop
        assert bound.connections() == 0  # closed as its loop shut down
        second, _ = asyncio.run(on_a_loop())
        assert second is not first  # the shut-down loop's client is not reused
        assert bound.connections() == 0
        bound.server.assert_consumed()


def test_closing_the_model_closes_every_loops_client(bound: Bound) -> None:
    async def on_a_loop() -> tuple[int, int]:
        await bound.use()
        before = bound.connections()
        await bound.model.aclose()
        return before, bound.connections()

    with collected():
        bound.use_sync()  # a client on the sync twins' loop, which runs on
        assert bound.connections() == 1
        assert asyncio.run(on_a_loop()) == (2, 0)
        bound.use_sync()  # a new client there
        bound.model.close_sync()
        assert bound.connections() == 0
        bound.server.assert_consumed()
