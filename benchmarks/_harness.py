"""What the side-by-side provider benchmarks share: the server, the rounds, the table.

- **The server**: a bare `asyncio.start_server` HTTP/1.1 loop (`RenderingServer`) that keeps
  connections alive and renders each distinct answer once, then writes the same bytes, in one
  write, to every request that asks for it: the wire-format test servers of
  `parley.testing` render every answer afresh, right for tests, too slow to keep out of a
  benchmark's way. A benchmark runs it in a process of its own (`ServerProcess`), so that its
  CPU never shares the client's event loop; the child prints `PORT <n>` once it listens and
  stops when its standard input closes, so it never outlives the benchmark.
- **The rounds**: `interleaved` runs each contender in turn, round by round, the first to go
  alternating, so that drift in the machine's speed hits both; `time_figure` makes a row of
  the medians and the paired ratio.
- **The table**: `report` prints the rows, parley's figure beside the reference's.
- **A provider file's `main`** (`provider_main`): `--quick`, `--serve` for its server, the
  versions of what it measures, its rows.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# -- the server ------------------------------------------------------------------------------

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs")
"""What the chat servers stream, one word a chunk."""
DEFAULT_CHUNKS = 200
"""The chunks of a stream whose scenario's URL names none."""
TEXT = " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."
"""The text of a whole (not streamed) chat answer: 60 words."""


def word(i: int) -> str:
    """The text of chunk `i` of a streamed chat answer."""
    return " " + WORDS[i % len(WORDS)]


def http(status: str, content_type: str, body: bytes, *, chunked: bool = False) -> bytes:
    """A whole HTTP/1.1 response on a kept-alive connection: `status` and `body`."""
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
    head = (
        b"HTTP/1.1 " + status.encode() + b"\r\n"
        b"Content-Type: " + content_type.encode() + b"\r\n"
        b"Connection: keep-alive\r\n" + framing + b"\r\n\r\n"
    )
    return head + body


def chunked_body(pieces: Iterable[bytes]) -> bytes:
    """`pieces` in chunked transfer encoding, one HTTP chunk each, as streaming servers send
    them: the client's HTTP parser hands the body on piece by piece, as in production."""
    framed = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces]
    return b"".join(framed) + b"0\r\n\r\n"


def chunked_response(content_type: str, pieces: Iterable[bytes]) -> bytes:
    """A `200 OK` whose body is `pieces`, one HTTP chunk each."""
    return http("200 OK", content_type, chunked_body(pieces), chunked=True)


class RenderingServer:
    """The HTTP/1.1 loop; a subclass's `answer` renders what a request asks for.

    Each distinct answer is rendered once (`rendered`) and its bytes written again to every
    request that asks for the same.
    """

    def __init__(self) -> None:
        self._rendered: dict[Any, bytes] = {}
        self.requests = 0

    def rendered(self, key: Any, render: Callable[[], bytes]) -> bytes:
        """The answer cached under `key`, rendered by `render` the first time."""
        answer = self._rendered.get(key)
        if answer is None:
            answer = self._rendered[key] = render()
        return answer

    def answer(self, path: bytes, body: bytes) -> bytes:
        """The whole response to a request for `path` with `body`."""
        raise NotImplementedError

    def respond(self, path: bytes, headers: Mapping[bytes, bytes], body: bytes) -> bytes:
        """The response to a request; `answer`'s, for a server that reads no header."""
        return self.answer(path, body)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *header_lines = head[:-4].split(b"\r\n")
                _, path, _ = request_line.split(b" ", 2)
                headers = {}
                for line in header_lines:
                    name, _, value = line.partition(b":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get(b"content-length", 0))
                body = await reader.readexactly(length) if length else b""
                self.requests += 1
                writer.write(self.respond(path, headers, body))
                await writer.drain()
                if headers.get(b"connection", b"").lower() == b"close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


class ChatServer(RenderingServer):
    """A chat API's answers: whole (a text, or a tool call when the request offers tools) or
    streamed, `n` words long, `n` from the path (`/n2000/...`; `DEFAULT_CHUNKS` without).

    A provider's subclass names its `route` (group 1: the prefix's `n`) and its renderers.
    """

    route: re.Pattern[bytes]

    def render_whole(self, model: str, *, tool: bool) -> bytes:
        raise NotImplementedError

    def render_stream(self, model: str, chunks: int, *options: Any) -> bytes:
        raise NotImplementedError

    def streams(self, request: dict[str, Any]) -> bool:
        """Whether `request` asks for a stream."""
        return bool(request.get("stream"))

    def stream_options(self, request: dict[str, Any]) -> tuple[Any, ...]:
        """What else of `request` shapes a stream (`render_stream`'s `options`)."""
        return ()

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = self.route.match(path.split(b"?", 1)[0])
        if match is None:
            return http("404 Not Found", "text/plain", b"no such route: %s" % path)
        request = json.loads(body or b"{}")
        model = str(request.get("model") or "")
        if self.streams(request):
            chunks = int(match.group(1) or DEFAULT_CHUNKS)
            key = ("stream", model, chunks, *self.stream_options(request))
            return self.rendered(key, lambda: self.render_stream(model, chunks, *key[3:]))
        tool = bool(request.get("tools"))
        return self.rendered(("whole", model, tool), lambda: self.render_whole(model, tool=tool))


async def serve(server: RenderingServer, port: int = 0) -> None:
    """Serve `server` on `port` (0: a free one); print it; stop when standard input closes."""
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=2048)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        # Serve until the parent closes our standard input (or dies).
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


def server_main(argv: Sequence[str] | None, doc: str, server: Callable[[], RenderingServer]) -> int:
    """A server script's `main`: serve on `--port` (default any free one) until stdin closes."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    asyncio.run(serve(server(), args.port))
    return 0


def child_json(command: Sequence[str], failed: str, timeout: float | None = None) -> Any:
    """Run `command` to its end: the JSON value on the last line it prints.

    Raises:
        SystemExit: `failed` and the end of the command's error output, when it fails.
    """
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{failed}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class ServerProcess(AbstractContextManager["ServerProcess"]):
    """A benchmark's server in a child process (`script` run with `args`); it stops when its
    stdin closes."""

    def __init__(self, script: Path | str, *args: str, path: str = "") -> None:
        """`path` ends every scenario's base URL (an API's root: `/v1`, `/api/v1`)."""
        self._command = [sys.executable, str(Path(script).resolve()), *args]
        self._path = path
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> ServerProcess:
        stdio = subprocess.PIPE
        self._process = subprocess.Popen(self._command, stdin=stdio, stdout=stdio)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        if not line.startswith("PORT "):
            self._process.kill()
            raise SystemExit(f"the benchmark server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()

    def url(self, chunks: int | None = None) -> str:
        """The base URL of a scenario: streams of `chunks` chunks (the server's default: 200),
        selected by a path prefix so that a scenario is only a base URL."""
        prefix = f"/n{chunks}" if chunks else ""
        return f"http://127.0.0.1:{self.port}{prefix}{self._path}"


# -- the rounds ------------------------------------------------------------------------------


async def timed(job: Callable[[], Awaitable[Any]], times: int = 1) -> float:
    """Seconds per run of `job`, over `times` runs in a row."""
    return (await timed_cpu(job, times))[0]


async def timed_cpu(job: Callable[[], Awaitable[Any]], times: int = 1) -> tuple[float, float]:
    """Seconds per run of `job`, wall-clock and the process's CPU time, over `times` runs."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(times):
        await job()
    return (time.perf_counter() - start) / times, (time.process_time() - cpu) / times


async def interleaved(
    pair: Sequence[Any],
    job: Callable[[Any], Callable[[], Awaitable[Any]]],
    rounds: int,
    times: int = 1,
) -> dict[str, list[float]]:
    """Seconds per job for each contender, round by round, the first to go alternating."""
    results: dict[str, list[float]] = {c.name: [] for c in pair}
    for round_ in range(rounds):
        order = pair if round_ % 2 == 0 else list(reversed(pair))
        for contender in order:
            gc.collect()  # start without the other contender's garbage
            results[contender.name].append(await timed(job(contender), times))
    return results


async def close_all(contenders: Iterable[Any]) -> None:
    """`aclose` each contender."""
    for contender in contenders:
        await contender.aclose()


async def print_profile(job: Callable[[], Awaitable[Any]], title: str, top: int = 25) -> None:
    """Run `job` under cProfile; print `title` and the `top` functions by their own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    await job()
    profiler.disable()
    print(title)
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(top)


# -- the table -------------------------------------------------------------------------------


@dataclass
class Figure:
    """One row of the table: parley's figure against the reference's, and the goal."""

    label: str
    unit: str
    parley: float
    reference: float | None
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    scale: float = 1.0
    """What the unit multiplies the stored seconds (or other value) by, for printing."""


def paired_ratio(parley: Sequence[float], reference: Sequence[float]) -> float:
    """The median over rounds of parley's figure over the reference's in the same round."""
    return statistics.median(p / r for p, r in zip(parley, reference, strict=True))


def time_figure(label: str, unit: str, scale: float, runs: dict[str, list[float]]) -> Figure:
    """A time row: the median of rounds, and the paired ratio; the goal is set by the caller."""
    parley, raw = runs["parley"], runs["raw SDK"]
    ratio = paired_ratio(parley, raw)
    median = statistics.median
    return Figure(label, unit, median(parley), median(raw), ratio=ratio, scale=scale)


def at_most(rows: Sequence[Figure], limit: float) -> list[Figure]:
    """`rows`, each with the goal of a ratio at most `limit` and whether it is met."""
    for row in rows:
        row.goal, row.met = f"ratio <= {limit}", (row.ratio or 0) <= limit
    return list(rows)


def _value(value: float | None, scale: float) -> str:
    if value is None:
        return "-"
    shown = value * scale
    return f"{shown:,.0f}" if shown >= 1000 else f"{shown:,.3g}"


def print_heading(header: str) -> None:
    """Print a table's `header` and a rule under it."""
    print(header)
    print("-" * len(header))


def report(figures: list[Figure], notes: list[str], reference: str) -> None:
    """Print the table of `figures`, what parley is compared with, and `notes`."""
    header = (
        f"{'figure':<52}{'unit':>9}{'parley':>10}{'reference':>11}{'parley/ref':>12}"
        f"  {'goal':<18}{'met':>4}"
    )
    print_heading(header)
    for f in figures:
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "NO")
        print(
            f"{f.label:<52}{f.unit:>9}{_value(f.parley, f.scale):>10}"
            f"{_value(f.reference, f.scale):>11}{ratio:>12}  {f.goal:<18}{met:>4}"
        )
    print()
    print(f"reference: {reference}")
    print("times: median of rounds (import: best of runs); ratios are parley's over the reference")
    for note in notes:
        print(f"note: {note}")


# -- a provider file's main ------------------------------------------------------------------


def versions(packages: Iterable[str]) -> str:
    """The installed versions of `packages`, those that are installed."""
    from importlib import metadata  # noqa: PLC0415

    found = []
    for name in packages:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def print_header(packages: Iterable[str]) -> None:
    """The run's first line: Python, the cores, the versions of what it measures."""
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {versions(packages)}\n")


def provider_main(
    argv: Sequence[str] | None,
    doc: str,
    settings: tuple[Any, Any],
    figures_of: Callable[[Any], Awaitable[list[Figure]]],
    packages: Sequence[str],
    reference: str,
    server: Callable[[], RenderingServer] | None = None,
    needs: tuple[str, str] | None = None,
) -> int:
    """A provider file's `main`: `--serve` runs its server; otherwise its figures, printed.

    Args:
        argv: The command line (None: `sys.argv`).
        doc: The file's docstring (its first line is the description).
        settings: The run's settings, by default and with `--quick`.
        figures_of: The file's figures for the run's settings.
        packages: The distributions whose versions head the output.
        reference: What parley is compared with, for the table's footer.
        server: Makes the file's server, for `--serve` (None: the file has none).
        needs: A module the run imports, and what to say when it is missing.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    if server is not None:
        parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if server is not None and args.serve:
        asyncio.run(serve(server()))
        return 0
    if needs is not None:
        try:
            importlib.import_module(needs[0])
        except ImportError:
            raise SystemExit(needs[1]) from None
    print_header(packages)
    started = time.perf_counter()
    rows = asyncio.run(figures_of(settings[1] if args.quick else settings[0]))
    report(rows, [], reference=reference)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0
