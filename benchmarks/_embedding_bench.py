"""What `embeddings_<provider>.py` share: the server process, the vectors, the rounds.

The server is `_openai_bench_server.py`'s loop (kept-alive connections, each distinct answer
rendered once, then the same bytes written) with a provider's embedding answers; it runs in a
process of its own (the provider file run with `--serve`), so that its CPU never shares the
client's event loop. Each answer holds one vector per input of the request; a vector is the
same fixed pattern of floats with its first component set to the input's place in the
request, so a contender that puts vectors in the wrong order is caught before any timing.

Two measurements, each contender in turn, round by round (`models.interleaved`):

1. one request's worth of texts (one batch): time per call;
2. many texts, split into the provider's batches and sent 4 at a time (parley's default
   `max_concurrency`; the raw SDK's batches under the same bound with `asyncio.gather`):
   time per call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from models import Figure, interleaved, report, time_figure

CONCURRENCY = 4
"""Batches in flight at once, for both contenders (parley's default)."""

T = TypeVar("T")


@dataclass(frozen=True)
class EmbeddingSettings:
    """How much to run: rounds of each measurement, calls per round, and the inputs' shape."""

    rounds: int
    calls_per_round: int
    many: int
    """Texts in the many-batch call."""


DEFAULT = EmbeddingSettings(rounds=15, calls_per_round=20, many=1_000)
QUICK = EmbeddingSettings(rounds=5, calls_per_round=10, many=400)


def vector(place: int, size: int) -> list[float]:
    """The vector the server sends for the input at `place` in a request.

    Every value is a multiple of 1/1024, exact in float32: a vector sent as base64 float32
    (OpenAI's) reads back equal to the one sent as numbers.
    """
    return [float(place), *(((j * 37) % 1024) / 1024 - 0.5 for j in range(1, size))]


def expected(count: int, batch: int, size: int) -> list[list[float]]:
    """The vectors a contender must give back for `count` texts sent in batches of `batch`."""
    return [vector(i % batch, size) for i in range(count)]


class Contender(Protocol):
    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]: ...
    async def aclose(self) -> None: ...


async def gathered(
    texts: Sequence[str], batch: int, call: Callable[[list[str]], Awaitable[list[T]]]
) -> list[T]:
    """`call` on each batch of `texts`, `CONCURRENCY` at a time, results in input order.

    What a caller of the raw SDK writes to do what parley's `EmbeddingModel` does.
    """
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(start: int) -> list[T]:
        async with gate:
            return await call(list(texts[start : start + batch]))

    parts = await asyncio.gather(*(one(i) for i in range(0, len(texts), batch)))
    return [item for part in parts for item in part]


class BenchServer(AbstractContextManager["BenchServer"]):
    """A provider file run with `--serve`, in a child process; it stops when its stdin closes."""

    def __init__(self, script: Path) -> None:
        self._script = script
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> BenchServer:
        command = [sys.executable, str(self._script), "--serve"]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
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


async def serve(server: Any) -> None:
    """Serve `server.handle` on a free port; print it; stop when standard input closes."""
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=2048)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


async def figures(
    pair: Sequence[Contender],
    settings: EmbeddingSettings,
    *,
    prefix: str,
    batch: int,
    size: int,
) -> list[Figure]:
    """Check both contenders' vectors, then time one batch and many batches, interleaved."""
    one = [f"text number {i}" for i in range(batch)]
    many = [f"text number {i}" for i in range(settings.many)]
    for contender in pair:
        for texts in (one, many):
            got = await contender.embed(texts)
            if got != expected(len(texts), batch, size):
                raise SystemExit(f"{contender.name} gave wrong vectors for {len(texts)} texts")

    def job(texts: list[str]) -> Callable[[Any], Callable[[], Awaitable[Any]]]:
        return lambda c: lambda: c.embed(texts)

    s = settings
    single = await interleaved(pair, job(one), s.rounds, s.calls_per_round)
    spread = await interleaved(pair, job(many), s.rounds)
    batches = -(-settings.many // batch)
    rows = [
        time_figure(f"{prefix}{batch} texts, 1 request", "µs/call", 1e6, single),
        time_figure(
            f"{prefix}{settings.many:,} texts, {batches} requests x{CONCURRENCY}", "ms", 1e3, spread
        ),
    ]
    for row in rows:
        row.goal, row.met = "ratio <= 1.0", (row.ratio or 0) <= 1.0
    return rows


def run_provider_main(
    argv: Sequence[str] | None,
    *,
    doc: str,
    server: Callable[[], Any],
    figures_of: Callable[[EmbeddingSettings], Awaitable[list[Figure]]],
    packages: Sequence[str],
    reference: str,
) -> int:
    """A provider file's `main`: `--serve` runs its server; otherwise its figures, printed.

    Args:
        argv: The command line (None: `sys.argv`).
        doc: The file's docstring (its first line is the description).
        server: Makes the file's server, for `--serve`.
        figures_of: The file's figures for the run's settings.
        packages: The distributions whose versions head the output.
        reference: What parley is compared with, for the table's footer.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(server()))
        return 0
    from importlib import metadata  # noqa: PLC0415

    versions = ", ".join(f"{n} {metadata.version(n)}" for n in packages)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {versions}\n")
    started = time.perf_counter()
    rows = asyncio.run(figures_of(QUICK if args.quick else DEFAULT))
    report(rows, [], reference=reference)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0
