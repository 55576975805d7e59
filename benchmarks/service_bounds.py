"""The service under requests meant to exhaust it: its memory and connections, before, during
and after (issue 18, item 7).

1. A 100 MB `POST /invoke` body, sent whole with its `Content-Length`, then the same as a
   chunked body: the server's resident set (`VmRSS`) idle before, its peak while the body
   goes (`VmHWM`), and after the answer; the answer's status, and how much of the body the
   thread then holds.
2. Ten clients that ask for a long spoken answer (`POST /stream`, `"speak": true`, parley
   frames, the local voice espeak-ng) and never read a byte: the server's resident set idle,
   its peak while they are held, and after every run has ended (at once, then every few
   seconds for `--hold` seconds); how many of their connections the server still holds (its
   sockets, from `/proc`); whether each run's answer is in its thread.

Each scenario gets a fresh server: a uvicorn process on 127.0.0.1 (`_serve.py`), its
settings from `PARLEY_*` variables, so the same script measures any version of parley:
`PYTHONPATH=<checkout>/src python benchmarks/service_bounds.py`. Nothing here is a test: no
figure fails the run. Linux only (`/proc`).

Run: `python benchmarks/service_bounds.py [--body-mb 100] [--clients 10] [--hold 60]
[--voice local:espeak-ng]`; `--serve` is the server process's side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _serve  # noqa: E402  (the server process's side, beside this file)

SENTENCES = (
    "Paris is the capital of France. It lies on the Seine, and many people visit it every year. "
)
CHUNK = 1 << 20


# -- the server ------------------------------------------------------------------------------


def _serve_app() -> None:
    """The server process: one agent answering `--repeat` times `SENTENCES`, streamed."""
    from parley.agents import Agent  # noqa: PLC0415
    from parley.models.testing import ScriptedModel  # noqa: PLC0415
    from parley.service import create_app  # noqa: PLC0415

    answer = SENTENCES * int(os.environ["BOUNDS_REPEAT"])
    model = ScriptedModel([answer] * 1000, stream=True, chunk_size=40)
    _serve.serve(create_app(agents=[Agent("assistant", model)]), log_level="warning")


@dataclass
class Server:
    """A server process and what /proc says of it."""

    process: subprocess.Popen[bytes]
    url: str
    port: int

    def status(self, field: str) -> int:
        """A `/proc/<pid>/status` size (VmRSS, VmHWM), in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field}")

    def sockets(self) -> int:
        """How many sockets the server holds open (listening one included)."""
        fds = Path(f"/proc/{self.process.pid}/fd")
        count = 0
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                count += os.readlink(fd).startswith("socket:")
        return count


@contextlib.contextmanager
def server(repeat: int, voice: str) -> Iterator[Server]:
    """A fresh server on a database of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        env = os.environ | {
            "PARLEY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/bounds.db",
            "PARLEY_TTS": voice,
            "BOUNDS_REPEAT": str(repeat),
        }
        process = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            env=env,
            cwd=tmp,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(Path(tmp) / "server.log", "wb"),  # noqa: SIM115 - the process holds it
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline().decode()
            if not line.startswith("PORT "):
                raise RuntimeError(
                    f"the server did not start: {(Path(tmp) / 'server.log').read_text()[-2000:]}"
                )
            port = int(line.split()[1])
            yield Server(process, f"http://127.0.0.1:{port}", port)
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def mib(size: int) -> str:
    """A size in MiB, one decimal."""
    return f"{size / 2**20:.1f} MiB"


# -- 1. a large body ---------------------------------------------------------------------------


def _read_response(sock: socket.socket, timeout: float) -> str:
    sock.settimeout(timeout)
    data = b""
    with contextlib.suppress(TimeoutError, OSError):
        while b"\r\n\r\n" not in data or len(data) < 64:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
            if b"\r\n\r\n" in data:
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(h.split(b":")[1])
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length:")
                    ),
                    None,
                )
                if length is not None and len(rest) >= length:
                    break
    return data.decode(errors="replace")


def send_body(port: int, size: int, *, chunked: bool, thread_id: str) -> tuple[str, int]:
    """POST /invoke with a body of about `size` bytes; the answer's status line, bytes sent."""
    prefix = json.dumps({"thread_id": thread_id, "message": ""})[:-2].encode()  # ..."message": "
    suffix = b'"}'
    filler = size - len(prefix) - len(suffix)
    head = f"POST /invoke HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {size}\r\n\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head.encode())
        pieces = [prefix, *([b"a" * CHUNK] * (filler // CHUNK)), b"a" * (filler % CHUNK), suffix]
        for piece in pieces:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered before the body ended
            data = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
            try:
                sock.sendall(data)
            except OSError:
                break
            sent += len(piece)
        else:
            if chunked:
                with contextlib.suppress(OSError):
                    sock.sendall(b"0\r\n\r\n")
        answer = _read_response(sock, 300)
    return answer.split("\r\n", 1)[0], sent


def stored_chars(url: str, thread_id: str) -> str:
    """How many characters the thread holds, or why none."""
    response = httpx.get(f"{url}/threads/{thread_id}", timeout=30)
    if response.status_code != 200:
        return f"no thread ({response.status_code})"
    texts = [b["text"] for m in response.json()["messages"] for b in m["content"] if "text" in b]
    return f"{sum(map(len, texts)):,} characters stored"


def body_attack(args: argparse.Namespace) -> None:
    """Scenario 1."""
    size = args.body_mb * 10**6
    for chunked in (False, True):
        with server(args.repeat, args.voice) as srv:
            time.sleep(1)
            idle = srv.status("VmRSS")
            thread_id = "body-chunked" if chunked else "body-length"
            status, sent = send_body(srv.port, size, chunked=chunked, thread_id=thread_id)
            peak = srv.status("VmHWM")
            time.sleep(2)
            after = srv.status("VmRSS")
            kind = "chunked" if chunked else "Content-Length"
            print(
                f"{args.body_mb} MB /invoke body ({kind}): {status!r}; {sent / 1e6:.1f} MB sent; "
                f"RSS idle {mib(idle)}, peak {mib(peak)} (+{mib(peak - idle)}), after "
                f"{mib(after)} (+{mib(after - idle)}); {stored_chars(srv.url, thread_id)}"
            )


# -- 2. clients that never read ----------------------------------------------------------------


def open_stream(port: int, thread_id: str) -> socket.socket:
    """A client that asks for a spoken stream and then reads nothing (a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(
        {
            "message": "Tell me about Paris.",
            "thread_id": thread_id,
            "speak": True,
            "events": "parley",
        }
    ).encode()
    head = (
        f"POST /stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def runs_ended(url: str, threads: list[str]) -> list[dict[str, Any]] | None:
    """The threads' details once every one is idle with its answer stored; else None."""
    details = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for thread_id in threads:
            response = client.get(f"/threads/{thread_id}")
            if response.status_code != 200 or response.json()["status"] == "running":
                return None
            details.append(response.json())
    return details


def slow_clients(args: argparse.Namespace) -> None:
    """Scenario 2."""
    with server(args.repeat, args.voice) as srv:
        time.sleep(1)
        idle, idle_sockets = srv.status("VmRSS"), srv.sockets()
        threads = [f"slow-{i}" for i in range(args.clients)]
        clients = [open_stream(srv.port, t) for t in threads]
        started = time.monotonic()
        samples: list[int] = []
        details = None
        while details is None and time.monotonic() - started < 600:
            samples.append(srv.status("VmRSS"))
            details = runs_ended(srv.url, threads)
            time.sleep(0.5)
        ended = time.monotonic()
        print(
            f"{args.clients} clients that never read a spoken stream ({args.repeat} x "
            f"{len(SENTENCES)} characters, voice {args.voice}): RSS idle {mib(idle)}, peak while "
            f"they run {mib(srv.status('VmHWM'))} (+{mib(srv.status('VmHWM') - idle)}); runs "
            f"ended in {ended - started:.1f}s"
        )
        if details is None:
            print("  the runs did not end in 600 s")
        else:
            answers = [len(d["messages"][-1]["content"][0]["text"]) for d in details]
            roles = sorted({d["messages"][-1]["role"] for d in details})
            print(f"  stored: {len(details)} threads, last {roles}, answers {set(answers)} chars")
        held_since = None
        while True:
            waited = time.monotonic() - ended
            held = srv.sockets() - idle_sockets
            rss = mib(srv.status("VmRSS"))
            print(f"  +{waited:4.0f}s after the runs ended: RSS {rss}, {held} connections held")
            if held <= 0:
                held_since = waited
                break
            if waited >= args.hold:
                break
            time.sleep(5)
        if held_since is None:
            print(f"  connections still held {args.hold} s after the runs ended")
        for sock in clients:
            sock.close()


def main() -> None:
    """Run both scenarios (or serve, with `--serve`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--body-mb", type=int, default=100)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds to watch after")
    parser.add_argument("--repeat", type=int, default=40, help="the answer: SENTENCES times")
    parser.add_argument("--voice", default="local:espeak-ng")
    parser.add_argument("--only", choices=["body", "slow"])
    args = parser.parse_args()
    if args.serve:
        _serve_app()
        return
    import parley  # noqa: PLC0415

    print(f"parley from {Path(parley.__file__).parent}")
    if args.only != "slow":
        body_attack(args)
    if args.only != "body":
        slow_clients(args)


if __name__ == "__main__":
    main()
