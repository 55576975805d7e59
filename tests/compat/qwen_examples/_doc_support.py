"""What the document and tool examples' tests share: a stand-in web site and model replies."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from parley.providers._server.http import RecordedRequest
from parley.providers.openai.server import Reply, ToolCall
from tests._http import serving
from tests._requires import require_module
from tests.tools._hostile import text_pdf


@contextmanager
def serve_files(
    pages: Mapping[str, tuple[bytes, str]], fetched: list[str] | None = None
) -> Iterator[str]:
    """A web site on 127.0.0.1 serving `{path: (body, content type)}`; yields its base URL.

    It stands in for the examples' public URLs (arxiv, a blog, an image host). Each request's
    path and query go to `fetched`.
    """
    fetched = [] if fetched is None else fetched

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            found = pages.get(self.path.split("?")[0])
            if found is None:
                self.send_error(404)
                return
            body, media_type = found
            self.send_response(200)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        yield url


@contextmanager
def serve_pdf(tmp_path: Path, path: str, pages: list[list[str]]) -> Iterator[str]:
    """A PDF showing `pages` (lines of text each) at `path` of a `serve_files` site; yields the
    site's base URL. Skips without pypdf (the `tools` extra), which the agents read it with."""
    require_module("pypdf", "tools")
    pdf = text_pdf(tmp_path / PurePosixPath(path).name, pages).read_bytes()
    with serve_files({path: (pdf, "application/pdf")}) as site:
        yield site


@pytest.fixture
def local_web(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Let downloads reach the stand-in site (127.0.0.1), and keep indexes in the test."""
    monkeypatch.setenv("PARLEY_FETCH_ALLOWED_HOSTS", "127.0.0.1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def request_text(request: RecordedRequest) -> str:
    """Every message's text of a chat request, joined (for checking what the model saw)."""
    return "\n".join(message_text(m) for m in request.json["messages"])


def message_text(message: Mapping[str, Any]) -> str:
    """A wire message's text (string content, or its text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def tool_call(name: str, arguments: dict[str, Any]) -> Callable[[RecordedRequest], Reply]:
    """A reply calling a tool as the request expects it: natively when the request lists
    `tools`, else in the prompt's `<tool_call>` form (Qwen-Agent's default)."""

    def reply(request: RecordedRequest) -> Reply:
        if request.json.get("tools"):
            return Reply(tool_calls=[ToolCall(name, arguments)])
        call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return Reply(text=f"<tool_call>\n{call}\n</tool_call>")

    return reply


def text_only(message: Mapping[str, Any]) -> bool:
    """Whether a wire message holds text alone (no file, image or audio part)."""
    content = message.get("content")
    return isinstance(content, str) or all(part.get("type") == "text" for part in content or [])
