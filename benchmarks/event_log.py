"""The run event log on PostgreSQL: readers woken by NOTIFY (the doorbell) against polling.

Two `Store`s on one database stand for two replicas: one runs `--runs` runs at once, each
putting `--events` events through its writer (`StoreEventLog.writer`) at `--rate` events a
second (0: as fast as it goes), the other follows every run (`follow(run_id, 0)`) as a
replica serving their streams would. Each event carries the time it was put; a reader's lag
is the time it got it less that. Modes:

- `notify`: the writing replica NOTIFYs each flush, the reading one LISTENs (parley's way).
- `poll 100ms`, `poll 20ms`: no NOTIFY; readers look every 100 or 20 ms.
- `local`: reader and writer share one log (one replica: woken in-process, the floor).

Figures per mode: events per second (all events / time until every reader had every
event), reader lag p50 and p99, and the reads the readers made of the store (each a
transaction of two queries).

Run: `python benchmarks/event_log.py [--postgres-url URL] [--runs N] [--events N]
[--rate N]`. Without a URL it starts a throwaway cluster as the tests do
(`tests/_external.py`). Writers and readers share this process (and its clock): on a
machine with few cores they slow each other down, which the figures include. Nothing here
is a test: no figure fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
        writer.put(TextDelta(text=repr(time.perf_counter())))
        if not gap and i % 50 == 0:
            await asyncio.sleep(0)  # as fast as it goes, but let the flush task run
    writer.put(RunEnded(status="completed"))
    await writer.close()
    await store.end_run(run_id, "completed", None, None)


async def _read(log: StoreEventLog, run_id: str, lags: list[float]) -> int:
    got = 0
    async for _, event in log.follow(run_id, 0):
        if isinstance(event, TextDelta):
            lags.append(time.perf_counter() - float(event.text))
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


async def measure(url: str, mode: str, args: argparse.Namespace) -> Figures:
    one = await Store.open(url)
    two = await Store.open(url, migrate=False)
    polling = mode.startswith("poll")
    interval = float(mode.split()[1].removesuffix("ms")) / 1000 if polling else 2.0
    writing = await StoreEventLog.open(one, listen=False, notify=not polling)
    if mode == "local":
        reading = writing
    else:
        reading = await StoreEventLog.open(
            two, listen=not polling, notify=False, recheck_interval=interval
        )
    try:
        async with asyncio.timeout(30):
            while not reading.doorbell_up:
                await asyncio.sleep(0.01)
        run_ids = [uuid.uuid4().hex for _ in range(args.runs)]
        for run_id in run_ids:
            await one.open_run(run_id, run_id[:12], "bench", "a", "m", expire_approvals=False)
        lags: list[float] = []
        readers = [asyncio.create_task(_read(reading, r, lags)) for r in run_ids]
        await asyncio.sleep(0.2)  # every reader following before the first event
        counting = _CountingReads(reading._runner)
        reading._runner = counting  # type: ignore[assignment]
        start = time.perf_counter()
        await asyncio.gather(*(_write(writing, one, r, args.events, args.rate) for r in run_ids))
        got = sum(await asyncio.gather(*readers))
        seconds = time.perf_counter() - start
        reading._runner = counting.runner
        assert got == args.runs * args.events, (got, args.runs * args.events)
        return Figures(mode, got, seconds, lags, counting.reads)
    finally:
        await writing.close()
        if reading is not writing:
            await reading.close()
        await one.close()
        await two.close()


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
    arguments = parser.parse_args()
    with postgres(arguments.postgres_url) as database:
        asyncio.run(main(arguments, database))
