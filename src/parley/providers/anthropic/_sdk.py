"""The anthropic SDK, imported on first use, and one client per event loop.

Each client sends through the SDK's `DefaultAioHttpClient`: httpx2's interface on aiohttp's
connections (the SDK's own copy of httpx-aiohttp, with its `aiohttp` extra; see
`parley.models._aiohttp`). On httpx2's own transport, reading a stream's body cost about as
much as parley's work on it: a 2,000-event stream took 0.50x the SDK's time, 0.24x on
aiohttp, and a call 0.85x against 0.75x (benchmarks/models_anthropic.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parley.errors import MissingDependencyError
from parley.models._aiohttp import Closer, LoopClients

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["client_pool", "new_client"]


def new_client(*, api_key: str, base_url: str | None, timeout: float) -> AsyncAnthropic:
    """An `AsyncAnthropic` client on aiohttp, the SDK's own retries off (parley's base retries).

    Raises:
        MissingDependencyError: The `anthropic` package (or `aiohttp`) is not installed.
    """
    try:
        from anthropic import AsyncAnthropic, DefaultAioHttpClient  # noqa: PLC0415  (~1 s)
    except ImportError as exc:
        raise MissingDependencyError("anthropic", "anthropic") from exc
    try:
        import aiohttp  # noqa: F401, PLC0415  (the SDK's aiohttp client needs it)
    except ImportError as exc:
        raise MissingDependencyError("aiohttp", "anthropic") from exc
    # An explicit `api_key` keeps the SDK from reading credentials from the environment or
    # from profiles on disk: the credential is the one source of truth.
    return AsyncAnthropic(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=0,
        http_client=DefaultAioHttpClient(),
    )


def client_pool(
    *, api_key: str, base_url: str | None, timeout: float
) -> LoopClients[AsyncAnthropic]:
    """One `AsyncAnthropic` per event loop (see `LoopClients`).

    Args:
        api_key: The key to send.
        base_url: The endpoint; None for the SDK's default.
        timeout: Seconds to wait for the server.
    """

    def make() -> tuple[AsyncAnthropic, Closer]:
        client = new_client(api_key=api_key, base_url=base_url, timeout=timeout)
        return client, client.close  # closes the HTTP client it was given too

    return LoopClients(make)
