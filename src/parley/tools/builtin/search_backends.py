"""Search backends for `web_search`: Brave Search, Serper (Qwen-Agent's) and SearXNG.

Each speaks its provider's documented JSON API over httpx, with a bounded timeout. Keys live
in credentials (`SecretStr`, from the credential or the provider's environment variable);
the base URL is configurable, which is also how the tests point them at a local server.
"""

from __future__ import annotations

import html
import os
import re
from typing import Any, ClassVar, Literal

from parley.errors import ConfigurationError, ToolExecutionError
from parley.models.base import ChatModel
from parley.models.credentials import APIKeyCredential
from parley.tools.builtin._common import optional_import
from parley.tools.builtin._search import SearchResult

__all__ = [
    "BraveSearch",
    "BraveSearchCredential",
    "SearXNGSearch",
    "SerperCredential",
    "SerperSearch",
]

_TAGS = re.compile(r"<[^>]+>")


def _plain(text: Any) -> str:
    """Snippets come with highlighting tags and entities; the model wants the words."""
    return html.unescape(_TAGS.sub("", str(text or ""))).strip()


class BraveSearchCredential(APIKeyCredential):
    """A Brave Search API key (else `BRAVE_API_KEY`) and endpoint."""

    env_key: ClassVar[str | None] = "BRAVE_API_KEY"
    default_base_url: ClassVar[str | None] = "https://api.search.brave.com/res/v1"

    type: Literal["brave_search"] = "brave_search"


class SerperCredential(APIKeyCredential):
    """A Serper key (else `SERPER_API_KEY`, as Qwen-Agent reads) and endpoint."""

    env_key: ClassVar[str | None] = "SERPER_API_KEY"
    default_base_url: ClassVar[str | None] = "https://google.serper.dev"

    type: Literal["serper"] = "serper"


async def _request(
    method: str, url: str, timeout: float, provider: str, **kwargs: Any
) -> dict[str, Any]:
    """One JSON request; every failure becomes a ToolExecutionError naming the provider."""
    ChatModel.check_allowed(url)
    httpx = optional_import("httpx")
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise ToolExecutionError(
            f"{provider} search failed: {type(exc).__name__}: {exc}", tool_name="web_search"
        ) from exc
    if response.status_code in (401, 403):
        raise ToolExecutionError(
            f"{provider} refused the API key ({response.status_code})", tool_name="web_search"
        )
    if response.status_code == 429:
        raise ToolExecutionError(f"{provider} is rate limiting (429)", tool_name="web_search")
    if response.status_code >= 400:
        raise ToolExecutionError(
            f"{provider} answered {response.status_code}: {response.text[:300]}",
            tool_name="web_search",
        )
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        raise ToolExecutionError(
            f"{provider} answered with something that is not JSON", tool_name="web_search"
        ) from None
    return body


def _key(credential: APIKeyCredential, provider: str) -> str:
    key = credential.key()
    if not key:
        raise ConfigurationError(
            f"{provider} search needs an API key: pass a credential or set {credential.env_key}"
        )
    return key


class BraveSearch:
    """Brave's Web Search API (`GET /web/search`, key in `X-Subscription-Token`).

    Args:
        credential: The key and endpoint (default: `BRAVE_API_KEY`, Brave's endpoint).
        timeout: Seconds a request may take.
    """

    name = "brave"

    def __init__(
        self, credential: BraveSearchCredential | None = None, *, timeout: float = 15.0
    ) -> None:
        self.credential = credential or BraveSearchCredential()
        self.timeout = timeout

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Search the web; at most 20 results per request, as Brave allows."""
        headers = {
            "Accept": "application/json",
            "X-Subscription-Token": _key(self.credential, "Brave"),
        }
        body = await _request(
            "GET",
            f"{str(self.credential.endpoint()).rstrip('/')}/web/search",
            self.timeout,
            "Brave",
            params={"q": query, "count": min(max_results, 20)},
            headers=headers,
        )
        found = (body.get("web") or {}).get("results") or []
        return [
            SearchResult(
                _plain(r.get("title")), str(r.get("url", "")), _plain(r.get("description"))
            )
            for r in found[:max_results]
        ]


class SerperSearch:
    """Serper's Google search API (`POST /search`, key in `X-API-KEY`), Qwen-Agent's backend.

    Args:
        credential: The key and endpoint (default: `SERPER_API_KEY`, Serper's endpoint).
        timeout: Seconds a request may take.
    """

    name = "serper"

    def __init__(
        self, credential: SerperCredential | None = None, *, timeout: float = 15.0
    ) -> None:
        self.credential = credential or SerperCredential()
        self.timeout = timeout

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Search the web (Serper's `organic` results)."""
        body = await _request(
            "POST",
            f"{str(self.credential.endpoint()).rstrip('/')}/search",
            self.timeout,
            "Serper",
            json={"q": query, "num": max_results},
            headers={"X-API-KEY": _key(self.credential, "Serper")},
        )
        return [
            SearchResult(_plain(r.get("title")), str(r.get("link", "")), _plain(r.get("snippet")))
            for r in (body.get("organic") or [])[:max_results]
        ]


class SearXNGSearch:
    """A SearXNG instance's JSON API (`GET /search?format=json`); no key.

    The instance must have `json` among its `search.formats`.

    Args:
        base_url: The instance's URL (default: `$SEARXNG_URL`).
        timeout: Seconds a request may take.
    """

    name = "searxng"

    def __init__(self, base_url: str | None = None, *, timeout: float = 15.0) -> None:
        url = base_url or os.environ.get("SEARXNG_URL")
        if not url:
            raise ConfigurationError("SearXNG search needs base_url (or SEARXNG_URL)")
        self.base_url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """Search through the instance."""
        body = await _request(
            "GET",
            f"{self.base_url}/search",
            self.timeout,
            "SearXNG",
            params={"q": query, "format": "json"},
        )
        return [
            SearchResult(_plain(r.get("title")), str(r.get("url", "")), _plain(r.get("content")))
            for r in (body.get("results") or [])[:max_results]
        ]
