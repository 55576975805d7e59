"""A live service for tests that need real sockets (browsers, other processes, SDK clients).

`running(app)` serves an ASGI app with uvicorn on 127.0.0.1 and a free port, in a background
thread with its own event loop, and yields the base URL; leaving the block stops the server
(bounded waits both ways).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

__all__ = ["free_port", "running"]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running(app: Any, *, port: int | None = None) -> Iterator[str]:
    """Serve `app` while the block runs; yields `http://127.0.0.1:<port>`."""
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the test server stopped while starting (see its log)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"the test server did not start in {_START_TIMEOUT:g}s")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():  # a stuck stream: force the exit
            server.force_exit = True
            thread.join(_STOP_TIMEOUT)
