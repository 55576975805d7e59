"""The access log: a request's line, written after its response was sent, as uvicorn's was.

Driven as a server drives the app (raw ASGI), with the server's sends and the log's records
in one list, so the order is what is checked: the line comes after the response's last body,
once, with uvicorn's arguments. `parley serve`'s own log is checked in `tests/cli/test_serve.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.service.access_log import ACCESS_LOGGER, AccessLogged, uvicorn_log_config
from tests.service.conftest import MakeService

pytestmark = pytest.mark.usefixtures("no_ambient_settings")

Seen = list[tuple[str, Any]]


class _Recorder(logging.Handler):
    def __init__(self, seen: Seen) -> None:
        super().__init__(logging.INFO)
        self.seen = seen

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(("log", record))


@pytest.fixture
def seen() -> Iterator[Seen]:
    """What the server was sent and what the access logger wrote, in order."""
    found: Seen = []
    logger = logging.getLogger(ACCESS_LOGGER)
    handler, level = _Recorder(found), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield found
    logger.removeHandler(handler)
    logger.setLevel(level)


async def _request(
    app: Any,
    seen: Seen,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    leaves: bool = False,
) -> None:
    """Drive `app` with one request as uvicorn would, its sends recorded in `seen`.

    `leaves`: the client is gone once its request is read.
    """
    raw = json.dumps(body).encode() if body is not None else b""
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(path),  # a server hands the app the path decoded
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8080"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
        ],
        "client": ("127.0.0.1", 50712),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    messages = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        if not leaves:
            await asyncio.Event().wait()  # until the app stops listening
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        seen.append(("send", message))

    await app(scope, receive, send)


def _lines(seen: Seen) -> list[str]:
    """The lines as `parley serve` writes them (uvicorn's formatter), less the level."""
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s')
    return [formatter.format(record) for kind, record in seen if kind == "log"]


def _kinds(seen: Seen) -> list[str]:
    return [item["type"] if kind == "send" else "log" for kind, item in seen]


async def test_a_request_is_logged_once_after_its_response_was_sent(
    service: MakeService, seen: Seen
) -> None:
    svc = await service(Agent("a", ScriptedModel(["Paris."])))
    await _request(svc.app, seen, "POST", "/invoke", {"message": "Capital of France?"})
    assert _kinds(seen) == ["http.response.start", "http.response.body", "log"]
    assert _lines(seen) == ['127.0.0.1:50712 - "POST /invoke HTTP/1.1" 200 OK']


async def test_a_stream_is_logged_after_its_last_frame(service: MakeService, seen: Seen) -> None:
    svc = await service(Agent("a", ScriptedModel(["Paris is the capital."], chunk_size=4)))
    await _request(svc.app, seen, "POST", "/stream", {"message": "Capital of France?"})
    kinds = _kinds(seen)
    assert kinds.count("http.response.body") > 2  # frame by frame
    assert kinds[-1] == "log"
    assert kinds.count("log") == 1
    assert _lines(seen) == ['127.0.0.1:50712 - "POST /stream HTTP/1.1" 200 OK']


async def test_a_stream_whose_client_left_is_logged_once_it_ends(
    service: MakeService, seen: Seen
) -> None:
    svc = await service(Agent("a", ScriptedModel(["Paris is the capital."], chunk_size=4)))
    await _request(svc.app, seen, "POST", "/stream", {"message": "Capital?"}, leaves=True)
    kinds = _kinds(seen)
    assert kinds[0] == "http.response.start"
    assert kinds[-1] == "log"
    assert _lines(seen) == ['127.0.0.1:50712 - "POST /stream HTTP/1.1" 200 OK']


async def test_refusals_are_logged_with_their_status_and_the_query(
    service: MakeService, seen: Seen
) -> None:
    svc = await service(Agent("a", ScriptedModel(["Paris."])))
    await _request(svc.app, seen, "GET", "/threads/no%20such?limit=2")
    await _request(svc.app, seen, "POST", "/invoke", {"mesage": "a typo"})
    assert _lines(seen) == [
        '127.0.0.1:50712 - "GET /threads/no%20such?limit=2 HTTP/1.1" 404 Not Found',
        '127.0.0.1:50712 - "POST /invoke HTTP/1.1" 422 Unprocessable Entity',
    ]


async def test_the_setting_turns_it_off(service: MakeService, seen: Seen) -> None:
    svc = await service(Agent("a", ScriptedModel(["Paris."])), access_log=False)
    await _request(svc.app, seen, "POST", "/invoke", {"message": "Capital of France?"})
    assert _kinds(seen) == ["http.response.start", "http.response.body"]


def _logged(seen: Seen, path: str, query: bytes = b"", client: Any = None) -> AccessLogged:
    """A `GET path?query` request's logging `send`, whose sends are recorded in `seen`."""

    async def send(message: dict[str, Any]) -> None:
        seen.append(("send", message))

    scope = {
        "method": "GET",
        "path": path,
        "query_string": query,
        "http_version": "1.1",
        "client": client,
    }
    return AccessLogged(scope, send)


async def test_a_response_cut_short_is_logged_when_the_app_is_done(seen: Seen) -> None:
    logged = _logged(seen, "/runs/r1/stream")
    await logged({"type": "http.response.start", "status": 200, "headers": []})
    await logged({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
    assert "log" not in _kinds(seen)  # the stream goes on: not yet
    logged.close()  # its client left: the app ends the stream
    logged.close()  # once only
    assert _lines(seen) == [' - "GET /runs/r1/stream HTTP/1.1" 200 OK']


async def test_a_query_byte_past_ascii_is_shown_escaped(seen: Seen) -> None:
    logged = _logged(seen, "/threads", b"q=\xff", ("127.0.0.1", 50712))
    await logged({"type": "http.response.start", "status": 200, "headers": []})
    await logged({"type": "http.response.body", "body": b"[]"})
    assert _lines(seen) == ['127.0.0.1:50712 - "GET /threads?q=\\xff HTTP/1.1" 200 OK']


async def test_nothing_is_logged_for_a_response_never_started(seen: Seen) -> None:
    async def send(message: dict[str, Any]) -> None:
        raise AssertionError("nothing is sent")

    scope = {"method": "GET", "path": "/", "query_string": b"", "http_version": "1.1"}
    AccessLogged(scope, send).close()
    assert seen == []


def test_parley_serve_sends_the_line_where_uvicorn_wrote_its_own() -> None:
    config = uvicorn_log_config("warning")
    assert config["loggers"][ACCESS_LOGGER] == {
        "handlers": ["access"],
        "level": "WARNING",
        "propagate": False,
    }
    assert config["handlers"]["access"]["stream"] == "ext://sys.stdout"
    assert config["formatters"]["access"]["()"] == "uvicorn.logging.AccessFormatter"
    assert ACCESS_LOGGER not in LOGGING_CONFIG["loggers"]  # uvicorn's own is left as it was
