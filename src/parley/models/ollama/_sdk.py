"""The `ollama` SDK, imported on first use, one client per event loop, and its HTTP client.

parley keeps the SDK for what it does once per client: the host as `OLLAMA_HOST` writes it,
the headers (its User-Agent, `OLLAMA_API_KEY` as a bearer token), the pooled `httpx`
client, and the typed model listing (`list`, `show`). Chat requests go through that same
`httpx` client, with parley's own JSON body, and the answer is read raw: the SDK's `chat`
validates every message of the request against its pydantic types and builds a pydantic
`ChatResponse` for every streamed line, which is most of its cost per line (measured with
benchmarks/models_ollama.py); its only entry points return those parsed objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    import httpx
    from ollama import AsyncClient

__all__ = ["ClientPool", "Session", "http_client", "new_client"]


def new_client(host: str, *, timeout: float, headers: Mapping[str, str]) -> AsyncClient:
    """An `ollama.AsyncClient` for `host`.

    Raises:
        MissingDependencyError: The `ollama` package is not installed.
    """
    try:
        from ollama import AsyncClient  # noqa: PLC0415  (imported on first use)
    except ImportError as exc:
        raise MissingDependencyError("ollama", "ollama") from exc
    return AsyncClient(host=host, timeout=timeout, headers=dict(headers))


def http_client(client: AsyncClient) -> httpx.AsyncClient:
    """The `httpx.AsyncClient` the SDK made (its base URL, headers and connection pool).

    Raises:
        RuntimeError: The installed SDK keeps its HTTP client elsewhere (a version parley
            does not know).
    """
    found: Any = getattr(client, "_client", None)
    if found is None or not hasattr(found, "stream"):
        raise RuntimeError(
            "this version of the ollama SDK keeps no httpx client where parley reads it "
            "(`AsyncClient._client`); install one parley supports: pip install 'parley[ollama]'"
        )
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


class ClientPool:
    """One `ollama.AsyncClient` per event loop, made on first use there.

    A connection pool belongs to the loop that opened it: a model used from several loops (a
    test's loop, the loop parley's sync twins run on) needs a client on each.

    Args:
        host: The server's base URL.
        timeout: Seconds to wait for the server.
        headers: Extra headers for every request.
    """

    def __init__(self, host: str, *, timeout: float, headers: Mapping[str, str]) -> None:
        self._host = host
        self._timeout = timeout
        self._headers = dict(headers)
        self._sessions: dict[asyncio.AbstractEventLoop, Session] = {}

    def get(self) -> Session:
        """The session for the running loop."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            # Forget the clients of loops that are gone (each `asyncio.run` makes one).
            for closed in [known for known in self._sessions if known.is_closed()]:
                del self._sessions[closed]
            client = new_client(self._host, timeout=self._timeout, headers=self._headers)
            http = http_client(client)
            # The base URL ends in `/` (httpx adds it): the path joins below it.
            session = Session(client, http, http.base_url.join("api/chat"))
            self._sessions[loop] = session
        return session

    async def aclose(self) -> None:
        """Close the running loop's client and its connections."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.client.close()  # type: ignore[no-untyped-call]  # untyped in the SDK
