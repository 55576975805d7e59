"""The dashscope SDK, imported on first use, and one `AsyncClient` per event loop.

parley uses the SDK's 2.0 client (`dashscope.AsyncClient`, httpx underneath) rather than the
1.x classes (`Generation.call`, `AioGeneration.call`): it is asynchronous at its core, holds
its base URL, key and workspace per client (the 1.x calls read the process-wide
`dashscope.base_http_api_url` unless each call passes `base_address=`), pools connections,
and hands out the raw HTTP response, which parley reads itself (see `_wire`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from parley.errors import ConfigurationError, MissingDependencyError
from parley.models._aiohttp import Closer, LoopClients, PooledClients, httpx_client_class

if TYPE_CHECKING:
    import httpx
    from dashscope import AsyncClient

    from parley.providers.dashscope.credentials import DashScopeCredential

__all__ = ["DashScopeClients", "client_pool", "http_client", "import_sdk", "new_client"]


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
    150 ms; 0.35 ms against 0.62 ms per small call (see `parley.models._aiohttp`). The SDK
    sets its key and identity headers only on a client it makes itself, so they are set here
    as it sets them.

    Raises:
        MissingDependencyError: `httpx-aiohttp` is not installed.
    """
    import httpx  # noqa: PLC0415
    from dashscope.v2.transport.http import DEFAULT_CONNECT_TIMEOUT, default_user_agent  # noqa: PLC0415

    client_class = httpx_client_class("dashscope")
    headers = {"Authorization": f"Bearer {api_key}", "User-Agent": default_user_agent()}
    if workspace:
        headers["X-DashScope-WorkSpace"] = workspace
    connect = min(timeout, DEFAULT_CONNECT_TIMEOUT)
    return client_class(headers=headers, timeout=httpx.Timeout(timeout, connect=connect))


def new_client(
    *, api_key: str, base_url: str, workspace: str | None, timeout: float
) -> tuple[AsyncClient, httpx.AsyncClient]:
    """A native-protocol `AsyncClient` on `http_client()`, and that client, for the caller to close.

    The SDK's own retries are off: parley's base retries.

    Raises:
        MissingDependencyError: The `dashscope` package (or its HTTP client) is not installed.
    """
    sdk = import_sdk()
    http = http_client(api_key=api_key, workspace=workspace, timeout=timeout)
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


async def _close(client: AsyncClient, http: httpx.AsyncClient) -> None:
    await client.aclose()
    await http.aclose()  # the SDK's client leaves the HTTP client to its owner


def client_pool(
    *, api_key: str, base_url: str, workspace: str | None, timeout: float
) -> LoopClients[AsyncClient]:
    """One `AsyncClient` per event loop (see `LoopClients`), each on `http_client()`.

    Args:
        api_key: The key to send.
        base_url: The native API's root (`.../api/v1`).
        workspace: The workspace header's value, if any.
        timeout: Seconds to wait for the server.
    """

    def make() -> tuple[AsyncClient, Closer]:
        client, http = new_client(
            api_key=api_key, base_url=base_url, workspace=workspace, timeout=timeout
        )
        return client, functools.partial(_close, client, http)

    return LoopClients(make)


class DashScopeClients(PooledClients["AsyncClient"]):
    """The connections of a DashScope model, chat or embedding.

    The typed credential, the endpoint, the API key (a clear error without one) and one SDK
    client per event loop; mixed into `DashScopeChatModel` and `DashScopeEmbeddingModel`.
    """

    credential: Any
    timeout: float
    _pool: LoopClients[AsyncClient] | None = None

    @property
    def dashscope_credential(self) -> DashScopeCredential:
        """The credential, typed."""
        from parley.providers.dashscope.credentials import DashScopeCredential  # noqa: PLC0415

        credential = self.credential
        assert isinstance(credential, DashScopeCredential)  # checked when the model was built
        return credential

    def endpoint(self) -> str:
        """The native API's base URL requests go to."""
        return self.dashscope_credential.endpoint() or ""

    def new_pool(self) -> LoopClients[AsyncClient]:
        """One SDK client per event loop (`ConfigurationError` without an API key)."""
        return client_pool(
            api_key=self._api_key(),
            base_url=self.endpoint(),
            workspace=self.dashscope_credential.workspace,
            timeout=self.timeout,
        )

    def _api_key(self) -> str:
        key = self.dashscope_credential.key()
        if not key:
            raise ConfigurationError(
                f"{type(self).__name__} has no API key: pass one in the credential or set "
                "DASHSCOPE_API_KEY"
            )
        return key
