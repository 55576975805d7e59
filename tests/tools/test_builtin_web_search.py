"""web_search and its backends, against a local server speaking each provider's JSON API."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from parley.errors import ConfigurationError, ToolExecutionError, UserError
from parley.messages import ToolCallBlock
from parley.tools import TOOL_REGISTRY, Toolkit
from parley.tools.builtin import (
    BraveSearch,
    BraveSearchCredential,
    SearchResult,
    SearXNGSearch,
    SerperCredential,
    SerperSearch,
    WebSearch,
    format_results,
)
from tests._http import serving
from tests._requires import require_module

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_search_env")]

require_module("httpx", "tools")

BRAVE = {
    "type": "search",
    "query": {"original": "parley"},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "Parley &amp; agents",
                "url": "https://example.org/parley",
                "description": "A <strong>parley</strong> framework.",
                "age": "2 days ago",
            },
            {"title": "Second", "url": "https://example.org/2", "description": "More."},
            {"title": "Third", "url": "https://example.org/3", "description": ""},
        ],
    },
}
SERPER = {"organic": [{"title": "From Serper", "link": "https://s.example/1", "snippet": "Hi"}]}
SEARXNG = {"results": [{"title": "From SearXNG", "url": "https://x.example/1", "content": "Yo"}]}


@dataclass
class Seen:
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    body: bytes | None = None
    # While set, answers wait for `release` (a minute at most): the timeout test's provider
    # answers only after the client has given up.
    holding: bool = False
    release: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    seen: Seen

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, payload: Any) -> None:
        seen = self.server.seen  # type: ignore[attr-defined]
        if seen.holding:
            seen.release.wait(60)
        body = seen.body if seen.body is not None else json.dumps(payload).encode()
        try:
            self.send_response(seen.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (the timeout test)
            pass

    def _record(self, body: Any = None) -> dict[str, Any]:
        parts = urlsplit(self.path)
        record = {
            "method": self.command,
            "path": parts.path,
            "query": {k: v[0] for k, v in parse_qs(parts.query).items()},
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "json": body,
        }
        self.server.seen.requests.append(record)  # type: ignore[attr-defined]
        return record

    def do_GET(self) -> None:
        record = self._record()
        if record["path"] == "/res/v1/web/search":
            if record["headers"].get("x-subscription-token") != "brave-key":
                self.send_error(401)
                return
            self._answer(BRAVE)
        elif record["path"] == "/searx/search":
            self._answer(SEARXNG)
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        record = self._record(json.loads(self.rfile.read(length) or b"null"))
        if record["path"] == "/search" and record["headers"].get("x-api-key") == "serper-key":
            self._answer(SERPER)
        else:
            self.send_error(401)


@pytest.fixture
def server() -> Iterator[tuple[str, Seen]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.seen = Seen()  # type: ignore[attr-defined]
    httpd.daemon_threads = True
    with serving(httpd) as url:
        yield url, httpd.seen  # type: ignore[attr-defined]


@pytest.fixture
def no_search_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BRAVE_API_KEY", "SERPER_API_KEY", "SERPER_URL", "SEARXNG_URL"):
        monkeypatch.delenv(name, raising=False)


def brave(base: str, key: str = "brave-key", timeout: float = 5.0) -> BraveSearch:
    credential = BraveSearchCredential(api_key=key, base_url=f"{base}/res/v1")
    return BraveSearch(credential, timeout=timeout)


# -- backends --------------------------------------------------------------------------------


async def test_brave_request_and_results(server: tuple[str, Seen]) -> None:
    base, seen = server
    results = await brave(base).search("parley agents", 2)
    assert results == [
        SearchResult("Parley & agents", "https://example.org/parley", "A parley framework."),
        SearchResult("Second", "https://example.org/2", "More."),
    ]
    (request,) = seen.requests
    assert request["method"] == "GET"
    assert request["query"] == {"q": "parley agents", "count": "2"}
    assert request["headers"]["x-subscription-token"] == "brave-key"
    assert request["headers"]["accept"] == "application/json"


async def test_brave_caps_the_count_at_twenty(server: tuple[str, Seen]) -> None:
    base, seen = server
    await brave(base).search("q", 50)
    assert seen.requests[0]["query"]["count"] == "20"


async def test_serper_request_and_results(server: tuple[str, Seen]) -> None:
    base, seen = server
    backend = SerperSearch(SerperCredential(api_key="serper-key", base_url=base), timeout=5)
    assert await backend.search("q", 3) == [
        SearchResult("From Serper", "https://s.example/1", "Hi")
    ]
    assert seen.requests[0]["json"] == {"q": "q", "num": 3}


async def test_searxng_request_and_results(server: tuple[str, Seen]) -> None:
    base, seen = server
    results = await SearXNGSearch(f"{base}/searx/", timeout=5).search("q", 3)
    assert results == [SearchResult("From SearXNG", "https://x.example/1", "Yo")]
    assert seen.requests[0]["query"] == {"q": "q", "format": "json"}


async def test_http_failures_become_tool_errors(server: tuple[str, Seen]) -> None:
    base, seen = server
    with pytest.raises(ToolExecutionError, match="refused the API key"):
        await brave(base, key="wrong").search("q", 3)
    seen.status = 429
    with pytest.raises(ToolExecutionError, match="rate limiting"):
        await brave(base).search("q", 3)
    seen.status = 503
    with pytest.raises(ToolExecutionError, match="answered 503"):
        await brave(base).search("q", 3)
    seen.status, seen.body = 200, b"<html>not json</html>"
    with pytest.raises(ToolExecutionError, match="not JSON"):
        await brave(base).search("q", 3)


async def test_a_slow_provider_times_out(server: tuple[str, Seen]) -> None:
    base, seen = server
    seen.holding = True  # the provider answers only once the client has given up
    try:
        async with asyncio.timeout(30):  # bounds a wait for an answer that is held
            with pytest.raises(ToolExecutionError, match="Timeout"):
                await brave(base, timeout=0.3).search("q", 3)
    finally:
        seen.release.set()
    assert len(seen.requests) == 1  # the request was made, and its answer never waited for


async def test_a_missing_key_and_a_remote_host_are_refused_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="BRAVE_API_KEY"):
        await BraveSearch().search("q", 3)
    # The suite's switch keeps every provider on this machine.
    with pytest.raises(UserError, match="blocked"):
        await BraveSearch(BraveSearchCredential(api_key="k")).search("q", 3)
    with pytest.raises(ConfigurationError, match="base_url"):
        SearXNGSearch()


# -- the tool --------------------------------------------------------------------------------


def test_results_are_numbered_for_the_model() -> None:
    text = format_results(
        "q", [SearchResult("A", "https://a.example", "about a"), SearchResult("", "https://b")]
    )
    assert text == (
        "Search results for 'q':\n\n[1] A\nhttps://a.example\nabout a\n\n[2] https://b\nhttps://b"
    )
    assert format_results("q", []) == "No results for 'q'."


async def test_the_tool_with_a_configured_provider(server: tuple[str, Seen]) -> None:
    base, seen = server
    assert TOOL_REGISTRY["web_search"] is WebSearch
    search = WebSearch({"provider": "brave", "api_key": "brave-key", "base_url": f"{base}/res/v1"})
    call = ToolCallBlock(id="1", name="web_search", input={"query": "parley", "max_results": 1})
    result = await Toolkit([search]).run(call)
    assert not result.is_error
    assert result.output == (
        "Search results for 'parley':\n\n[1] Parley & agents\nhttps://example.org/parley\n"
        "A parley framework."
    )
    default = await search.search("parley")
    assert len(default) == 3  # the configured default of 5, and the server has 3
    assert seen.requests[-1]["query"]["count"] == "5"


def test_the_provider_comes_from_the_environment(
    server: tuple[str, Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, _seen = server
    monkeypatch.setenv("SERPER_API_KEY", "serper-key")
    monkeypatch.setenv("SERPER_URL", f"{base}/search")  # Qwen-Agent's variable: the full URL
    search = WebSearch()
    assert isinstance(search.backend, SerperSearch)
    assert "From Serper" in search.call('{"query": "anything"}')
    monkeypatch.setenv("SEARXNG_URL", f"{base}/searx")
    monkeypatch.setenv("BRAVE_API_KEY", "brave-key")
    assert isinstance(WebSearch().backend, BraveSearch)  # Brave first


async def test_an_unconfigured_tool_tells_the_model_why() -> None:
    result = await Toolkit(["web_search"]).run(
        ToolCallBlock(id="1", name="web_search", input={"query": "q"})
    )
    assert result.is_error
    assert "BRAVE_API_KEY, SERPER_API_KEY or SEARXNG_URL" in str(result.output)
    with pytest.raises(ConfigurationError, match="unknown web_search provider"):
        _ = WebSearch({"provider": "altavista"}).backend


async def test_any_object_with_an_async_search_is_a_backend() -> None:
    class Canned:
        def __init__(self) -> None:
            self.asked: list[tuple[str, int]] = []

        async def search(self, query: str, max_results: int) -> list[SearchResult]:
            self.asked.append((query, max_results))
            return [SearchResult(f"About {query}", "https://c.example")]

    canned = Canned()
    search = WebSearch({"backend": canned, "max_results": 7})
    assert await search.acall({"query": "tea"}) == (
        "Search results for 'tea':\n\n[1] About tea\nhttps://c.example"
    )
    assert search.search_sync("tea", 99)[0].title == "About tea"
    assert canned.asked == [("tea", 7), ("tea", 20)]
    with pytest.raises(ConfigurationError, match="no async search method"):
        WebSearch({"backend": object()})
