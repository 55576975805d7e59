"""A TCP proxy on 127.0.0.1 that cuts the first run stream it carries, mid-way.

It forwards every connection to the service as is, except the first whose request starts a
run stream (`POST .../runs/stream`): that one is closed once `cut_after` frames of its answer
went through, as a dropped connection or a replica that died would close it. The SDKs then
reconnect to the stream's `Location` with `Last-Event-ID`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["Proxy", "cutting_proxy"]

_FRAME = b"event: "


def _pipe(source: socket.socket, sink: socket.socket, cut_after: int | None) -> None:
    """Copy until either side closes; with `cut_after`, close both after that many frames."""
    seen = 0
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            if cut_after is not None:
                at = -1
                while (at := data.find(_FRAME, at + 1)) >= 0:
                    seen += 1
                    if seen > cut_after:  # this frame is the first not to go through
                        sink.sendall(data[:at])
                        break
                if seen > cut_after:
                    break
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


class Proxy:
    """The proxy: where it listens, and what it carried."""

    def __init__(self, upstream: int, cut_after: int) -> None:
        self.upstream = upstream
        self.cut_after = cut_after
        self.cut = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.requests: list[str] = []
        """The request line of every connection it carried, in order."""
        self.headers: list[dict[str, str]] = []
        """Their headers (names in lower case)."""
        self.url = f"http://127.0.0.1:{self.port}"

    def serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                self._start(self._handle, client)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self.threads.append(thread)

    def _handle(self, client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", self.upstream))
        first = client.recv(65536)
        line = first.split(b"\r\n", 1)[0]
        self.requests.append(line.decode("latin-1"))
        head = first.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
        self.headers.append(
            {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head)}
        )
        cut = None
        if not self.cut.is_set() and line.startswith(b"POST ") and b"/runs/stream " in line:
            self.cut.set()
            cut = self.cut_after
        server.sendall(first)
        self._start(_pipe, client, server, None)
        _pipe(server, client, cut)


@contextlib.contextmanager
def cutting_proxy(upstream: int, *, cut_after: int) -> Iterator[Proxy]:
    """Proxy to 127.0.0.1:`upstream` while the block runs (its base URL is `.url`)."""
    proxy = Proxy(upstream, cut_after)
    thread = threading.Thread(target=proxy.serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.listener.close()
        thread.join(5)
