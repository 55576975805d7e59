"""A scripted HTTP/1.1 server on a background thread, the base of the wire-format doubles.

Each request is recorded and answered by a handler function through a `Responder`, which
can also misbehave on purpose: answer slowly, drop the connection, or cut a stream.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedRequest", "Responder", "ScriptedHTTPServer"]


@dataclass
class RecordedRequest:
    """A request the server received, and whether the client left before the answer ended."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int = 0
    """The client's port: requests on one kept-alive connection share it."""
    disconnected: bool = False
    """The client closed the connection while the answer was being sent."""

    @property
    def json(self) -> Any:
        """The body, parsed as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


class _ClientGoneError(Exception):
    """The client closed the connection."""


class Responder:
    """How a handler answers one request (and, on purpose, fails to)."""

    def __init__(self, handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        self._handler = handler
        self._stop = stop
        self.done = False

    def sleep(self, seconds: float) -> None:
        """Wait, but no longer than until the server stops."""
        if seconds > 0:
            self._stop.wait(seconds)

    def _write(self, data: bytes) -> None:
        try:
            self._handler.wfile.write(data)
            self._handler.wfile.flush()
        except OSError as exc:
            raise _ClientGoneError from exc

    def send(
        self,
        status: int,
        body: bytes,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> None:
        """A whole answer."""
        head = self._head(status, [("Content-Type", content_type), *headers])
        head += f"Content-Length: {len(body)}\r\n\r\n".encode()
        self._write(head + body)
        self.done = True

    def send_json(self, status: int, data: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        """A whole JSON answer."""
        self.send(status, json.dumps(data).encode(), headers)

    def send_head(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Only the status line and `headers` (a HEAD answer, or a body `write` sends)."""
        self._write(self._head(status, headers) + b"\r\n")
        self.done = True

    def write(self, data: bytes) -> None:
        """Body bytes after `send_head` (its `Content-Length` said how many)."""
        self._write(data)

    def start_stream(self, content_type: str = "text/event-stream") -> None:
        """Start a chunked answer."""
        headers = [("Content-Type", content_type), ("Transfer-Encoding", "chunked")]
        self._write(self._head(200, headers) + b"\r\n")

    def chunk(self, data: bytes) -> None:
        """Send one chunk of a chunked answer."""
        if data:
            self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def end_stream(self) -> None:
        """End a chunked answer properly."""
        self._write(b"0\r\n\r\n")
        self.done = True

    def drop(self, *, reset: bool = False) -> None:
        """Close the connection now: cleanly (FIN) or with a reset (RST)."""
        sock = self._handler.connection
        with contextlib.suppress(OSError):
            if reset:
                # SO_LINGER with a zero timeout makes close() send a RST.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._handler.close_connection = True
        self.done = True

    @staticmethod
    def _head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n").encode()


_REASONS = {
    200: "OK",
    206: "Partial Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    416: "Range Not Satisfiable",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

Handler = Callable[[RecordedRequest, Responder], None]


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close (`block_on_close`), so every connection is closed
    # by its own thread before `stop()` returns.
    daemon_threads = False
    block_on_close = True
    owner_errors: list[BaseException]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that drop a connection (a cancelled stream, a closed pool) are expected;
        # anything else is a bug in the double, kept for `assert_consumed` to report.
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            self.owner_errors.append(error)


class ScriptedHTTPServer:
    """An HTTP server on 127.0.0.1 and a free port, answering through `handler`.

    Args:
        handler: Called for each request (on the server's threads) with a `Responder`.
        startup_timeout: Seconds to wait for the server to accept connections.
    """

    def __init__(self, handler: Handler, *, startup_timeout: float = 5.0) -> None:
        self._handler = handler
        self._startup_timeout = startup_timeout
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self.requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        """Exceptions raised by the handler (a test double's own bugs show here)."""

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start serving; returns once the server accepts connections.

        Raises:
            TimeoutError: It did not start within the startup timeout.
        """
        server = _Server(("127.0.0.1", 0), self._handler_class())
        server.owner_errors = self.errors
        self._server = server
        ready = threading.Event()

        def serve() -> None:
            ready.set()
            server.serve_forever(poll_interval=0.05)

        self._thread = threading.Thread(target=serve, name="parley-test-http", daemon=True)
        self._thread.start()
        if not ready.wait(self._startup_timeout):
            self.stop()
            raise TimeoutError("the test HTTP server did not start")
        with socket.create_connection(("127.0.0.1", self.port), timeout=self._startup_timeout):
            pass  # accepting connections

    def stop(self) -> None:
        """Stop serving, close every connection, and wait for the handler threads."""
        self._stop.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()  # no new connections
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            # Wakes handlers blocked on a kept-alive connection; they close it themselves.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        server.server_close()  # joins the handler threads
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedHTTPServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Small writes go out at once: Nagle's algorithm and delayed ACKs would
                # otherwise hold each stream event back ~40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with owner._lock:
                    owner._sockets.add(self.connection)

            def finish(self) -> None:
                with owner._lock:
                    owner._sockets.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def do_GET(self) -> None:
                owner._dispatch(self)

            def do_POST(self) -> None:
                owner._dispatch(self)

            def do_HEAD(self) -> None:
                owner._dispatch(self)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return _Handler

    def _dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            client_port=int(handler.client_address[1]),
        )
        with self._lock:
            self.requests.append(request)
        responder = Responder(handler, self._stop)
        try:
            self._handler(request, responder)
        except _ClientGoneError:
            request.disconnected = True
            handler.close_connection = True
        except Exception as exc:
            self.errors.append(exc)
            if not responder.done:
                with contextlib.suppress(_ClientGoneError):
                    responder.send_json(500, {"error": {"message": f"test server bug: {exc!r}"}})
