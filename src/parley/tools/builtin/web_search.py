"""`web_search`: search the web through a pluggable backend.

A backend is anything with `async search(query, max_results) -> list[SearchResult]`;
`parley.tools.builtin.search_backends` has Brave Search, Serper (Qwen-Agent's) and SearXNG.
Without a backend in the configuration, the tool picks one from the environment
(`BRAVE_API_KEY`, then `SERPER_API_KEY`, then `SEARXNG_URL`) when it is first called.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from parley._sync import run_sync
from parley.errors import ConfigurationError
from parley.tools.base import Tool
from parley.tools.builtin._search import SearchBackend, SearchResult
from parley.tools.registry import register_tool

__all__ = ["SearchBackend", "SearchResult", "WebSearch", "backend_from_config", "format_results"]

_MAX_RESULTS = 20
# The environment variables that choose a backend when none is configured, in this order.
_FROM_ENV = (("BRAVE_API_KEY", "brave"), ("SERPER_API_KEY", "serper"), ("SEARXNG_URL", "searxng"))


def format_results(query: str, results: list[SearchResult]) -> str:
    """Results as the model reads them: numbered, each with its URL and snippet."""
    if not results:
        return f"No results for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for number, result in enumerate(results, 1):
        lines.append(f"\n[{number}] {result.title or result.url}\n{result.url}")
        if result.snippet:
            lines.append(result.snippet)
    return "\n".join(lines)


def backend_from_config(cfg: dict[str, Any]) -> SearchBackend:
    """The backend a configuration names, else the first the environment has a key for.

    The configuration's keys are `provider`, `api_key`, `base_url` and `timeout`.

    Raises:
        ConfigurationError: The provider is unknown, or nothing is configured.
    """
    # Imported when first asked: the backends pull in the HTTP clients and credentials.
    from parley.tools.builtin import search_backends as sb  # noqa: PLC0415

    provider = cfg.get("provider")
    if provider is None:
        provider = next((name for env, name in _FROM_ENV if os.environ.get(env)), None)
    timeout = float(cfg.get("timeout", 15.0))
    key, url = cfg.get("api_key"), cfg.get("base_url")
    if provider == "brave":
        return sb.BraveSearch(sb.BraveSearchCredential(api_key=key, base_url=url), timeout=timeout)
    if provider == "serper":
        url = url or os.environ.get("SERPER_URL", "").removesuffix("/search") or None
        return sb.SerperSearch(sb.SerperCredential(api_key=key, base_url=url), timeout=timeout)
    if provider == "searxng":
        return sb.SearXNGSearch(url, timeout=timeout)
    if provider is None:
        raise ConfigurationError(
            "web_search has no search backend: set BRAVE_API_KEY, SERPER_API_KEY or "
            "SEARXNG_URL, or configure {'provider': ..., 'api_key': ...} or {'backend': ...}"
        )
    raise ConfigurationError(f"unknown web_search provider {provider!r}: brave, serper, searxng")


@register_tool("web_search")
class WebSearch(Tool):
    """Searches the web and lists the results for the model.

    Args:
        cfg: `backend` (a `SearchBackend`), or `provider` (`brave`, `serper`, `searxng`)
            with `api_key`, `base_url` and `timeout`; `max_results` (default 5).
    """

    description = "Search for information from the internet."
    idempotent: ClassVar[bool] = True  # a search changes nothing: safe to run again
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for."},
            "max_results": {
                "type": "integer",
                "description": "How many results to return (1 to 20).",
                "minimum": 1,
                "maximum": _MAX_RESULTS,
            },
        },
        "required": ["query"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        backend = self.cfg.get("backend")
        if backend is not None and not isinstance(backend, SearchBackend):
            raise ConfigurationError(f"web_search: {backend!r} has no async search method")
        self._backend: SearchBackend | None = backend

    @property
    def backend(self) -> SearchBackend:
        """The backend in use (built from the configuration on first use)."""
        if self._backend is None:
            self._backend = backend_from_config(self.cfg)
        return self._backend

    async def search(self, query: str, max_results: int | None = None) -> list[SearchResult]:
        """The backend's results for `query`."""
        count = max_results or int(self.cfg.get("max_results", 5))
        results = await self.backend.search(query, max(1, min(count, _MAX_RESULTS)))
        return list(results)

    def search_sync(self, query: str, max_results: int | None = None) -> list[SearchResult]:
        """The sync twin of `search`."""
        return run_sync(self.search(query, max_results))

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> str:
        """Search and format the results for the model."""
        query = str(params["query"])
        return format_results(query, await self.search(query, params.get("max_results")))

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """Search (Qwen-Agent style, sync)."""
        return run_sync(self.acall(self._verify_json_format_args(params), **kwargs))
