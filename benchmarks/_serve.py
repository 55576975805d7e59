"""A benchmark's server process: an ASGI app under uvicorn on 127.0.0.1, its port announced.

It prints `PORT <n>` on standard output once listening, then serves until standard input
closes (the benchmark's signal to stop). Everything the server logs, uvicorn's access log
included (uvicorn writes it to standard output), goes to standard error, which the benchmark
sends to a file. It imports nothing of parley's, so a peer's own virtualenv runs it too
(`_toolkit_server.py`).
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import threading
import time
from importlib import metadata
from typing import Any

START_TIMEOUT = 300.0
"""Seconds a server may take to start: the toolkit imports LangChain and its providers, 10 s
of CPU, which on a busy 2-core machine took 53 s."""


def versions(names: tuple[str, ...]) -> str:
    """The installed versions of these distributions, as one line (`?` for one missing)."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return ", ".join(found)


def raise_file_limit() -> None:
    """Let the process open as many files (sockets) as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(app: Any, **config: Any) -> None:
    """Serve `app` (an app or uvicorn's "module:attribute") until stdin closes.

    `config` goes to `uvicorn.Config` (log level, access log, ...): uvicorn's defaults
    otherwise, as `uvicorn.run` would serve it.
    """
    import uvicorn  # noqa: PLC0415

    raise_file_limit()
    announce_to = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the access log: to the log file
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so (the accepted
    # ones copy this one), and without it every answer waits 40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # A deep backlog for the ramps of new clients, and connections kept between rows.
    server = uvicorn.Server(
        uvicorn.Config(app, lifespan="on", backlog=4096, timeout_keep_alive=120, **config)
    )

    def announce() -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        print(f"PORT {sock.getsockname()[1]}", file=announce_to, flush=True)
        sys.stdin.read()  # until the parent closes it (or dies)
        server.should_exit = True

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[sock])
