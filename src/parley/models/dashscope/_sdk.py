"""The dashscope SDK, imported on first use, and one `AsyncClient` per event loop.

parley uses the SDK's 2.0 client (`dashscope.AsyncClient`, httpx underneath) rather than the
1.x classes (`Generation.call`, `AioGeneration.call`): it is asynchronous at its core, holds
its base URL, key and workspace per client (the 1.x calls read the process-wide
`dashscope.base_http_api_url` unless each call passes `base_address=`), pools connections,
and hands out the raw HTTP response, which parley reads itself (see `_wire`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.errors import MissingDependencyError

if TYPE_CHECKING:
    import httpx
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


def http_client(*, api_key: str, workspace: str | None, timeout: float) -> httpx.AsyncClient:
    """The HTTP client the SDK sends through: httpx's interface, aiohttp's connections.

    `httpx_aiohttp.HttpxAiohttpClient` is an `httpx.AsyncClient` (proxies from the
    environment, timeouts, limits as httpx takes them) whose transport is aiohttp: a stream's
    body comes in the reads the socket gives, where httpx's own HTTP parser hands on every
    chunk of the chunked body (one per server-sent event) in pure Python. Measured on a
    20,000-event stream (benchmarks/models_dashscope.py): 27 ms to read the body against
    150 ms; 0.35 ms against 0.62 ms per small call. The SDK sets its key and identity headers
    only on a client it makes itself, so they are set here as it sets them.
    """
    import httpx  # noqa: PLC0415
    from dashscope.v2.transport.http import DEFAULT_CONNECT_TIMEOUT, default_user_agent  # noqa: PLC0415
    from httpx_aiohttp import HttpxAiohttpClient  # noqa: PLC0415

    headers = {"Authorization": f"Bearer {api_key}", "User-Agent": default_user_agent()}
    if workspace:
        headers["X-DashScope-WorkSpace"] = workspace
    connect = min(timeout, DEFAULT_CONNECT_TIMEOUT)
    return HttpxAiohttpClient(headers=headers, timeout=httpx.Timeout(timeout, connect=connect))


def new_client(
    *, api_key: str, base_url: str, workspace: str | None, timeout: float
) -> tuple[AsyncClient, httpx.AsyncClient]:
    """A native-protocol `AsyncClient` on `http_client()`, and that client, for the caller to close.

    The SDK's own retries are off: parley's base retries.

    Raises:
        MissingDependencyError: The `dashscope` package (or its HTTP client) is not installed.
    """
    sdk = import_sdk()
    try:
        http = http_client(api_key=api_key, workspace=workspace, timeout=timeout)
    except ImportError as exc:
        raise MissingDependencyError("httpx_aiohttp", "dashscope") from exc
    client: AsyncClient = sdk.AsyncClient(
        api_key=api_key,
        base_url=base_url,
        workspace=workspace,
        protocol="native",
        timeout=timeout,
        max_retries=0,
        http_client=http,
    )
    return client, http


@dataclass(eq=False)
class _Clients:
    """A loop's SDK client, its HTTP client, and the parked generator that closes them."""

    client: AsyncClient
    http: httpx.AsyncClient
    loop: asyncio.AbstractEventLoop
    closer: AsyncGenerator[None, None] | None = None

    def park(self) -> None:
        """Close the HTTP client when the loop shuts down, if nobody closed it before.

        aiohttp connections outliving their loop are reported as "Unclosed connector" when
        collected. A generator started here and parked at its `yield` is finalized by the
        loop's `shutdown_asyncgens()` (as `asyncio.run` and pytest-asyncio end every loop),
        which runs its `finally` on the loop, before it closes. The loop holds generators
        weakly: this object keeps it.
        """
        self.closer = _closing(self.http)
        with contextlib.suppress(StopIteration):
            self.closer.asend(None).send(None)  # runs it to its `yield`, without awaiting
        _PARKED.add(self)

    async def aclose(self) -> None:
        """Close both clients now (the SDK's leaves the HTTP client to its owner)."""
        _PARKED.discard(self)
        await self.client.aclose()
        if self.closer is not None:
            await self.closer.aclose()
        await self.http.aclose()


async def _closing(http: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await http.aclose()


_PARKED: weakref.WeakSet[_Clients] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # Loops still running at exit run in other threads (the one parley's sync twins use,
    # stopped by its own exit hook, registered before this one and so run after it).
    for clients in list(_PARKED):
        loop = clients.loop
        if loop.is_running() and not loop.is_closed():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(clients.aclose(), loop).result(timeout=2)


class ClientPool:
    """One `AsyncClient` per event loop, made on first use there.

    An HTTP connection pool belongs to the loop that opened it: a model used from several
    loops (a test's loop, the loop parley's sync twins run on) needs a client on each. Each
    is closed by `aclose()`, else when its loop shuts down (see `_Clients.park`).

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
        self._clients: dict[asyncio.AbstractEventLoop, _Clients] = {}

    def get(self) -> AsyncClient:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        made = self._clients.get(loop)
        if made is None:
            # Forget the clients of loops that are gone (each `asyncio.run` makes one).
            for closed in [known for known in self._clients if known.is_closed()]:
                del self._clients[closed]
            client, http = new_client(**self._options)
            made = _Clients(client, http, loop)
            made.park()
            self._clients[loop] = made
        return made.client

    async def aclose(self) -> None:
        """Close the running loop's client and its connections."""
        made = self._clients.pop(asyncio.get_running_loop(), None)
        if made is not None:
            await made.aclose()
