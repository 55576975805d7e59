"""A local HTTP(S) server on 127.0.0.1 whose answers each test sets, and that records requests.

Routes answer with a body, a redirect, a body that never ends (it records when the client hung
up), or a trickle of bytes; every request's path and `Host` header is recorded.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests._http import serving

CHUNK = b"x" * 65536


@dataclass
class Body:
    """A fixed answer."""

    content: bytes
    media_type: str = "text/plain"
    status: int = 200
    declared_length: int | None = None  # a Content-Length to announce instead of the real one


@dataclass
class Redirect:
    """A redirect to `location`."""

    location: str
    status: int = 302


@dataclass
class Endless:
    """A body without end: chunks until the client goes away (then `hung_up` is set)."""

    delay: float = 0.0  # seconds between chunks
    chunk: bytes = CHUNK
    limit: int | None = None  # stop after this many bytes (a client stuck reading gets free)
    sent: int = 0
    hung_up: threading.Event = field(default_factory=threading.Event)


Route = Body | Redirect | Endless


@dataclass
class Site:
    """The server's routes and what it saw."""

    base: str
    port: int
    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[tuple[str, str]] = field(default_factory=list)  # (path, Host header)
    closing: threading.Event = field(default_factory=threading.Event)  # ends endless bodies

    @property
    def paths(self) -> list[str]:
        """The paths requested, in order."""
        return [path for path, _host in self.seen]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        site: Site = self.server.site  # type: ignore[attr-defined]
        site.seen.append((self.path, self.headers.get("Host", "")))
        route = site.routes.get(self.path)
        if route is None:
            self.send_error(404)
        elif isinstance(route, Redirect):
            self.send_response(route.status)
            self.send_header("Location", route.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif isinstance(route, Body):
            self._body(route)
        else:
            self._endless(route, site.closing)

    def _body(self, route: Body) -> None:
        self.send_response(route.status)
        self.send_header("Content-Type", route.media_type)
        length = route.declared_length or len(route.content)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        with suppress(OSError):  # the client hung up (it refused the length)
            self.wfile.write(route.content)
        self.close_connection = True

    def _endless(self, route: Endless, closing: threading.Event) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()  # no length: the body ends when the connection does
        self.close_connection = True
        try:
            # A client that never hangs up is let go at the limit, or when the server stops.
            while not closing.is_set() and (route.limit is None or route.sent < route.limit):
                self.wfile.write(route.chunk)
                self.wfile.flush()
                route.sent += len(route.chunk)
                time.sleep(route.delay)
        except OSError:
            route.hung_up.set()


@contextmanager
def serve(tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """A server on 127.0.0.1 (TLS with `tls`), stopped on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    port = httpd.server_address[1]
    site = Site(f"{'https' if tls else 'http'}://127.0.0.1:{port}", port)
    httpd.site = site  # type: ignore[attr-defined]
    with serving(httpd):
        try:
            yield site
        finally:
            site.closing.set()  # ends the endless bodies still being sent, before the shutdown
