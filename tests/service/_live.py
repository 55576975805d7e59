"""A live service for tests that need real sockets (browsers, other processes, SDK clients).

`running(app)` serves an ASGI app with uvicorn on 127.0.0.1 and a free port, in a background
thread with its own event loop, and yields the base URL; leaving the block stops the server
(bounded waits both ways). `service_process(factory, env)` serves an app factory in a uvicorn
process of its own, as `parley serve` runs it, for tests that measure the server itself
(its memory, its sockets: `ServerProcess`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import uvicorn

__all__ = ["ServerProcess", "free_port", "running", "service_process"]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 15.0
_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running(app: Any, *, port: int | None = None, **options: Any) -> Iterator[str]:
    """Serve `app` while the block runs; yields `http://127.0.0.1:<port>`.

    `options` go to `uvicorn.Config` (`proxy_headers=False`, as `parley serve` has it).
    """
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", ws="none", **options
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


@dataclass
class ServerProcess:
    """A service's uvicorn process, and what `/proc` tells of it."""

    process: subprocess.Popen[str]
    url: str
    port: int

    def memory(self, field: str = "VmRSS") -> int:
        """A size from `/proc/<pid>/status`, in bytes: `VmRSS` (now) or `VmHWM` (its peak)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field} in /proc/{self.process.pid}/status")

    def sockets(self) -> int:
        """How many sockets the process holds open (its listening one included)."""
        count = 0
        for fd in Path(f"/proc/{self.process.pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                count += os.readlink(fd).startswith("socket:")
        return count


@contextlib.contextmanager
def service_process(
    factory: str, env: Mapping[str, str], *, send_buffer: int | None = None
) -> Iterator[ServerProcess]:
    """Serve `factory` (`module:function`) in a uvicorn process, as `parley serve` does.

    Its settings come from `env` (`PARLEY_*`, over this process's; the database is a file of
    its own unless `env` names one). With `send_buffer`, the
    listening socket's send buffer is that size (the accepted sockets inherit it), so that a
    client that does not read blocks the server's writes after little data.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    command = [
        *(sys.executable, "-m", "uvicorn", "--factory", factory),
        *("--fd", str(sock.fileno()), "--log-level", "warning", "--no-proxy-headers"),
    ]
    # Its log to a file: a pipe nobody reads would stop the server once full.
    with tempfile.TemporaryFile("w+") as log, tempfile.TemporaryDirectory() as tmp:
        database = {"PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/parley.db"}
        process = subprocess.Popen(
            command,
            cwd=_ROOT,
            env=os.environ | database | dict(env),
            pass_fds=[sock.fileno()],
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        sock.close()  # the server holds it now
        server = ServerProcess(process, f"http://127.0.0.1:{port}", port)
        try:
            _wait_healthy(server, log)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(_STOP_TIMEOUT)


def _wait_healthy(server: ServerProcess, log: IO[str]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log.seek(0)
            err = log.read()
            raise RuntimeError(f"the service process exited while starting:\n{err[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"the service at {server.url} did not start in {_START_TIMEOUT:g}s")
