"""The dashscope SDK, imported on first use, and one `AsyncClient` per event loop.

parley uses the SDK's 2.0 client (`dashscope.AsyncClient`, httpx underneath) rather than the
1.x classes (`Generation.call`, `AioGeneration.call`): it is asynchronous at its core, holds
its base URL, key and workspace per client (the 1.x calls read the process-wide
`dashscope.base_http_api_url` unless each call passes `base_address=`), pools connections,
and hands out the raw HTTP response, which parley reads itself (see `_wire`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    from dashscope import AsyncClient

__all__ = ["ClientPool", "import_sdk", "new_client"]


def import_sdk() -> Any:
    """The `dashscope` module.

    Raises:
        MissingDependencyError: The `dashscope` package is not installed.
    """
    try:
        import dashscope  # noqa: PLC0415  (`import dashscope` takes ~0.4 s)
    except ImportError as exc:
        raise MissingDependencyError("dashscope", "dashscope") from exc
    return dashscope


def new_client(
    *, api_key: str, base_url: str, workspace: str | None, timeout: float
) -> AsyncClient:
    """A native-protocol `AsyncClient` with the SDK's own retries off (parley's base retries).

    Raises:
        MissingDependencyError: The `dashscope` package is not installed.
    """
    client: AsyncClient = import_sdk().AsyncClient(
        api_key=api_key,
        base_url=base_url,
        workspace=workspace,
        protocol="native",
        timeout=timeout,
        max_retries=0,
    )
    return client


class ClientPool:
    """One `AsyncClient` per event loop, made on first use there.

    An HTTP connection pool belongs to the loop that opened it: a model used from several
    loops (a test's loop, the loop parley's sync twins run on) needs a client on each.

    Args:
        api_key: The key to send.
        base_url: The native API's root (`.../api/v1`).
        workspace: The workspace header's value, if any.
        timeout: Seconds to wait for the server.
    """

    def __init__(
        self, *, api_key: str, base_url: str, workspace: str | None, timeout: float
    ) -> None:
        self._options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": base_url,
            "workspace": workspace,
            "timeout": timeout,
        }
        self._clients: dict[asyncio.AbstractEventLoop, AsyncClient] = {}

    def get(self) -> AsyncClient:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Forget the clients of loops that are gone (each `asyncio.run` makes one).
            for closed in [known for known in self._clients if known.is_closed()]:
                del self._clients[closed]
            client = new_client(**self._options)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the running loop's client and its connections."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
