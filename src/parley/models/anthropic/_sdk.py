"""The anthropic SDK, imported on first use, and one client per event loop."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["ClientPool", "new_client"]


def new_client(*, api_key: str, base_url: str | None, timeout: float) -> AsyncAnthropic:
    """An `AsyncAnthropic` client with the SDK's own retries off (parley's base retries).

    Raises:
        MissingDependencyError: The `anthropic` package is not installed.
    """
    try:
        from anthropic import AsyncAnthropic  # noqa: PLC0415  (`import anthropic` takes ~1 s)
    except ImportError as exc:
        raise MissingDependencyError("anthropic", "anthropic") from exc
    # An explicit `api_key` keeps the SDK from reading credentials from the environment or
    # from profiles on disk: the credential is the one source of truth.
    return AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


class ClientPool:
    """One `AsyncAnthropic` per event loop, made on first use there.

    An HTTP connection pool belongs to the loop that opened it: a model used from several
    loops (a test's loop, the loop parley's sync twins run on) needs a client on each.

    Args:
        api_key: The key to send.
        base_url: The endpoint; None for the SDK's default.
        timeout: Seconds to wait for the server.
    """

    def __init__(self, *, api_key: str, base_url: str | None, timeout: float) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._clients: dict[asyncio.AbstractEventLoop, AsyncAnthropic] = {}

    def get(self) -> AsyncAnthropic:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Forget the clients of loops that are gone (each `asyncio.run` makes one). Not a
            # weak mapping: a client's connections refer to their loop, which would keep it.
            for closed in [known for known in self._clients if known.is_closed()]:
                del self._clients[closed]
            client = new_client(
                api_key=self._api_key, base_url=self._base_url, timeout=self._timeout
            )
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the running loop's client and its connections."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
