"""The `ollama` SDK, imported on first use, one client per event loop, and its HTTP client.

parley keeps the SDK for what it does once per client: the host as `OLLAMA_HOST` writes it,
the headers (its User-Agent, `OLLAMA_API_KEY` as a bearer token), the pooled `httpx`
client, and the typed model listing (`list`, `show`). Chat requests go through that same
`httpx` client, with parley's own JSON body, and the answer is read raw: the SDK's `chat`
validates every message of the request against its pydantic types and builds a pydantic
`ChatResponse` for every streamed line, which is most of its cost per line (measured with
benchmarks/models_ollama.py); its only entry points return those parsed objects.

The SDK's `httpx` client is httpx-aiohttp's `HttpxAiohttpClient` (an `httpx.AsyncClient` on
aiohttp's connections, see `parley.models._aiohttp`): with httpx's own transport, reading
the NDJSON body cost ~6 µs a line, more than parley's parsing of it, and a 20,000-line
stream took 0.87x the SDK's time, against 0.36x on aiohttp (benchmarks/models_ollama.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.errors import MissingDependencyError
from parley.models._aiohttp import Closer, LoopClients, PooledConnections, httpx_client_class

if TYPE_CHECKING:
    import httpx
    from ollama import AsyncClient

__all__ = ["OllamaClients", "Session", "client_pool", "http_client", "new_client"]

_UNKNOWN_SDK = (
    "this version of the ollama SDK has no `{}`, which parley relies on; install one "
    "parley supports: pip install 'parley[ollama]'"
)


def new_client(host: str, *, timeout: float, headers: Mapping[str, str]) -> AsyncClient:
    """An `ollama.AsyncClient` for `host`, its `httpx` client on aiohttp.

    `AsyncClient.__init__` only hands `httpx.AsyncClient` on to the SDK's `BaseClient`, which
    builds it from the host (as `OLLAMA_HOST` writes it), the headers and the options; here
    `BaseClient` builds httpx-aiohttp's subclass of it instead. (Passing `transport=` would
    keep httpx's class but turn off the proxies it reads from the environment.)

    Raises:
        MissingDependencyError: The `ollama` or `httpx-aiohttp` package is not installed.
        RuntimeError: The installed SDK has no `BaseClient` (a version parley does not know).
    """
    try:
        from ollama import AsyncClient  # noqa: PLC0415  (imported on first use)
    except ImportError as exc:
        raise MissingDependencyError("ollama", "ollama") from exc
    try:
        from ollama._client import BaseClient  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError(_UNKNOWN_SDK.format("ollama._client.BaseClient")) from exc
    http_class = httpx_client_class("ollama")
    client = AsyncClient.__new__(AsyncClient)
    BaseClient.__init__(client, http_class, host, timeout=timeout, headers=dict(headers))
    return client


def http_client(client: AsyncClient) -> httpx.AsyncClient:
    """The `httpx.AsyncClient` the SDK made (its base URL, headers and connection pool).

    Raises:
        RuntimeError: The installed SDK keeps its HTTP client elsewhere (a version parley
            does not know).
    """
    found: Any = getattr(client, "_client", None)
    if found is None or not hasattr(found, "stream"):
        raise RuntimeError(_UNKNOWN_SDK.format("AsyncClient._client"))
    http: httpx.AsyncClient = found
    return http


@dataclass(frozen=True, slots=True)
class Session:
    """An SDK client, its `httpx` client, and the chat endpoint's whole URL."""

    client: AsyncClient
    http: httpx.AsyncClient
    chat_url: httpx.URL
    """Given whole: `httpx` joins a relative path to its base URL on every request, which
    cost 30 µs of a call's ~900 (measured with benchmarks/models_ollama.py)."""


def client_pool(host: str, *, timeout: float, headers: Mapping[str, str]) -> LoopClients[Session]:
    """One session per event loop (see `LoopClients`), each on a client of its own.

    Args:
        host: The server's base URL.
        timeout: Seconds to wait for the server.
        headers: Extra headers for every request.
    """
    headers = dict(headers)

    def make() -> tuple[Session, Closer]:
        client = new_client(host, timeout=timeout, headers=headers)
        http = http_client(client)
        # The base URL ends in `/` (httpx adds it): the path joins below it.
        session = Session(client, http, http.base_url.join("api/chat"))
        return session, http.aclose  # the SDK's `close()` is just that, untyped

    return LoopClients(make)


class OllamaClients(PooledConnections):
    """The connections of an Ollama model, chat or embedding.

    The host, read once, and one SDK session per event loop; mixed into `OllamaChatModel`
    and `OllamaEmbeddingModel`.
    """

    credential: Any
    timeout: float
    _pool: LoopClients[Session] | None = None
    _host: str | None = None

    def endpoint(self) -> str:
        """The server's base URL (read once: `OLLAMA_HOST` when the credential names none).

        Raises:
            ConfigurationError: The host is not a host or URL.
        """
        if self._host is None:
            self._host = self.credential.endpoint()  # an OllamaCredential, checked at build
        return self._host

    def client(self) -> AsyncClient:
        """The SDK client for the running event loop (made on first use).

        Raises:
            MissingDependencyError: The `ollama` package is not installed.
        """
        return self._session().client

    def _session(self) -> Session:
        if self._pool is None:
            self._pool = client_pool(
                self.endpoint(), timeout=self.timeout, headers=self.credential.header_values()
            )
        return self._pool.get()
