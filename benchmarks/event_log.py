"""The run event log on PostgreSQL: readers woken by NOTIFY (the doorbell) against polling.

Two processes on one database stand for two replicas: this one runs `--runs` runs at once,
each putting `--events` events through its writer (`StoreEventLog.writer`) at `--rate`
events a second (0: as fast as it goes); the other (this script with `--read`) follows every
run (`follow(run_id, 0)`) as a replica serving their streams would. Each event carries the
wall-clock time it was put; a reader's lag is the time it got it less that. Modes:

- `notify`: the writing replica NOTIFYs each flush, the reading one LISTENs (parley's way).
- `poll 100ms`, `poll 20ms`: no NOTIFY; readers look every 100 or 20 ms.
- `local`: reader and writer share one log (one replica: woken in-process, the floor).

Figures per mode: events per second (all events / time until every reader had every
event), reader lag p50 and p99, and the reads the readers made of the store (each a
transaction of two queries).

Run: `python benchmarks/event_log.py [--postgres-url URL] [--runs N] [--events N]
[--rate N]`. Without a URL it starts a throwaway cluster as the tests do
(`tests/_external.py`). On a machine with few cores the two processes and PostgreSQL share
them, which the figures include. Nothing here is a test: no figure fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parley.agents.events import RunEnded, TextDelta
from parley.service.events import StoreEventLog
from parley.service.store import Store

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Figures:
    mode: str
    events: int
    seconds: float
    lags: list[float]
    reads: int

    def row(self) -> str:
        lags = sorted(self.lags)
        p50 = statistics.median(lags) * 1000
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000
        rate = self.events / self.seconds
        return f"| {self.mode:<10} | {rate:>9,.0f} | {p50:>8.1f} | {p99:>8.1f} | {self.reads:>8,} |"


async def _write(log: StoreEventLog, store: Store, run_id: str, events: int, rate: float) -> None:
    writer = await log.writer(run_id)
    gap = 1.0 / rate if rate else 0.0
    start = time.perf_counter()
    for i in range(events):
        if gap:
            delay = start + i * gap - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        writer.put(TextDelta(text=repr(time.time())))  # wall clock: readers in another process
        if not gap and i % 50 == 0:
            await asyncio.sleep(0)  # as fast as it goes, but let the flush task run
    writer.put(RunEnded(status="completed"))
    await writer.close()
    await store.end_run(run_id, "completed", None, None)


async def _read(log: StoreEventLog, run_id: str, lags: list[float]) -> int:
    got = 0
    async for _, event in log.follow(run_id, 0):
        if isinstance(event, TextDelta):
            lags.append(time.time() - float(event.text))
            got += 1
    return got


class _CountingReads:
    """The log's store runner, counting its reads."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.reads = 0

    async def read(self, work: Any) -> Any:
        self.reads += 1
        return await self.runner.read(work)

    async def write(self, work: Any) -> Any:
        return await self.runner.write(work)


def _interval(mode: str) -> float:
    return float(mode.split()[1].removesuffix("ms")) / 1000 if mode.startswith("poll") else 2.0


async def reader_process(url: str, mode: str, run_ids: list[str]) -> None:
    """The reading replica (a process of its own): follow the runs, print the lags as JSON."""
    store = await Store.open(url, migrate=False)
    polling = mode.startswith("poll")
    log = await StoreEventLog.open(
        store, listen=not polling, notify=False, recheck_interval=_interval(mode)
    )
    try:
        async with asyncio.timeout(30):
            while not log.doorbell_up:
                await asyncio.sleep(0.01)
        counting = _CountingReads(log._runner)
        log._runner = counting  # type: ignore[assignment]
        lags: list[float] = []
        readers = [asyncio.create_task(_read(log, r, lags)) for r in run_ids]
        await asyncio.sleep(0.2)  # every reader following before the first event
        print("ready", flush=True)
        got = sum(await asyncio.gather(*readers))
        log._runner = counting.runner
        print(json.dumps({"got": got, "lags": lags, "reads": counting.reads}), flush=True)
    finally:
        await log.close()
        await store.close()


async def measure(url: str, mode: str, args: argparse.Namespace) -> Figures:
    """One mode: writers here, readers in a process of their own (`local`: here, one log)."""
    one = await Store.open(url)
    writing = await StoreEventLog.open(one, listen=False, notify=not mode.startswith("poll"))
    run_ids = [uuid.uuid4().hex for _ in range(args.runs)]
    for run_id in run_ids:
        await one.open_run(run_id, run_id[:12], "bench", "a", "m", expire_approvals=False)
    try:
        if mode == "local":
            return await _measure_here(writing, one, mode, run_ids, args)
        return await _measure_apart(url, writing, one, mode, run_ids, args)
    finally:
        await writing.close()
        await one.close()


async def _measure_here(
    log: StoreEventLog, store: Store, mode: str, run_ids: list[str], args: argparse.Namespace
) -> Figures:
    lags: list[float] = []
    readers = [asyncio.create_task(_read(log, r, lags)) for r in run_ids]
    await asyncio.sleep(0.2)
    counting = _CountingReads(log._runner)
    log._runner = counting  # type: ignore[assignment]
    start = time.perf_counter()
    await asyncio.gather(*(_write(log, store, r, args.events, args.rate) for r in run_ids))
    got = sum(await asyncio.gather(*readers))
    seconds = time.perf_counter() - start
    log._runner = counting.runner
    assert got == args.runs * args.events, (got, args.runs * args.events)
    return Figures(mode, got, seconds, lags, counting.reads)


async def _measure_apart(
    url: str,
    log: StoreEventLog,
    store: Store,
    mode: str,
    run_ids: list[str],
    args: argparse.Namespace,
) -> Figures:
    reader = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--read",
        url,
        "--modes",
        mode,
        "--run-ids",
        *run_ids,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 26,  # the lags come back as one JSON line
    )
    assert reader.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = await reader.stdout.readline()
        assert line.strip() == b"ready", line
        start = time.perf_counter()
        await asyncio.gather(*(_write(log, store, r, args.events, args.rate) for r in run_ids))
        async with asyncio.timeout(120):
            result = json.loads(await reader.stdout.readline())
        seconds = time.perf_counter() - start
    finally:
        with contextlib.suppress(ProcessLookupError):
            reader.kill()
        await reader.wait()
    assert result["got"] == args.runs * args.events, result["got"]
    return Figures(mode, result["got"], seconds, result["lags"], result["reads"])


@contextlib.contextmanager
def postgres(given: str | None) -> Iterator[str]:
    """A fresh database on the server given, or on a throwaway cluster."""
    sys.path.insert(0, str(ROOT))  # tests._external: the tests' cluster and databases
    from tests._external import _Cluster, _postgres_bin, fresh_database  # noqa: PLC0415

    if given:
        with fresh_database(given) as url:
            yield url
        return
    bin_dir = _postgres_bin()
    if bin_dir is None:
        raise SystemExit("no initdb/pg_ctl here: pass --postgres-url")
    cluster = _Cluster(bin_dir)
    try:
        server = cluster.start()
        with fresh_database(server) as url:
            yield url
    finally:
        cluster.stop()


async def main(args: argparse.Namespace, url: str) -> None:
    print(
        f"{args.runs} runs at once, {args.events} events each, "
        f"{'as fast as they go' if not args.rate else f'{args.rate:g} events/s each'}\n"
    )
    print("| mode       |  events/s | p50 (ms) | p99 (ms) |  reads   |")
    print("|------------|----------:|---------:|---------:|---------:|")
    for mode in args.modes:
        print((await measure(url, mode, args)).row(), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres-url", help="a PostgreSQL server (else a throwaway one)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="per run; 0: flat out")
    parser.add_argument(
        "--modes", nargs="+", default=["notify", "poll 100ms", "poll 20ms", "local"]
    )
    parser.add_argument("--read", help=argparse.SUPPRESS)  # the reading replica's process
    parser.add_argument("--run-ids", nargs="*", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.read:
        asyncio.run(reader_process(arguments.read, arguments.modes[0], arguments.run_ids))
    else:
        with postgres(arguments.postgres_url) as database:
            asyncio.run(main(arguments, database))
