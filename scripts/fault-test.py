#!/usr/bin/env python
"""Each fault of issue 20 under a steady load, on three replicas behind HAProxy: a table.

Starts the cluster of tests/service/cluster/_cluster.py (three `parley serve` on a throwaway
PostgreSQL, Debian's HAProxy in front, replica r1 reaching PostgreSQL through a fault proxy)
and, for each fault, runs a steady load of background runs through HAProxy, each followed
by a reader of its stream (re-attaching with `Last-Event-ID` when cut off), puts the fault
in the middle, undoes it, waits for every run to end and counts:

- started: runs created (`POST /runs` answered 202); refused: creations answered otherwise;
- finished: runs that ended `completed`; resumed: of those, how many a second attempt ended
  (taken over from a dead or cut-off replica);
- lost: started runs that did not end `completed` within the bounded wait, or whose thread
  does not hold their answer exactly once;
- dup events: frames a reader got twice or out of the run's log (its stream compared with
  the run's whole log read afterwards); 0 means every reader got exactly the log.

Usage (from the repository root, after scripts/setup-system.sh):
    .venv/bin/python scripts/fault-test.py [--rate 4] [--seconds 12] [--faults kill,pg,...]
Faults: kill (kill -9 of r2), pg (PostgreSQL restart), delay, cut, blackhole (r1's link).
Exit status 1 when any run was lost or any event duplicated, or a fault saw no run started.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.service.cluster._cluster import Cluster, cluster  # noqa: E402
from tests.service.cluster._runs import (  # noqa: E402
    Reader,
    create_run,
    join,
    replay,
    thread_messages,
)

QUESTION_PAD = "x" * 40  # a run streams ~30 chunks, 0.1 s apart: a few seconds long


@dataclass
class Tally:
    """What one fault did to the runs under it."""

    fault: str
    started: int = 0
    refused: int = 0
    finished: int = 0
    resumed: int = 0
    lost: int = 0
    dup_events: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Started:
    """A run the load made, its question and its reader."""

    info: dict[str, Any]
    question: str
    reader: Reader


def _faults(made: Cluster) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    """Each fault: how to cause it, and how to undo it."""
    proxy = made.proxy
    assert proxy is not None
    return {
        "kill": (lambda: made.replica("r2").kill(), lambda: None),
        "pg": (made.postgres.stop, made.postgres.start),
        "delay": (lambda: proxy.set_mode("delay", 200), lambda: proxy.set_mode("pass")),
        "cut": (lambda: proxy.set_mode("cut"), lambda: proxy.set_mode("pass")),
        "blackhole": (lambda: proxy.set_mode("blackhole"), lambda: proxy.set_mode("pass")),
    }


def _load(
    made: Cluster, tag: str, rate: float, seconds: float, out: list[Started], why: list[str]
) -> int:
    """Make `rate` runs a second for `seconds` through HAProxy; how many were refused."""
    refused = 0
    end = time.monotonic() + seconds
    number = 0
    while time.monotonic() < end:
        number += 1
        question = f"{tag}-{number}-{QUESTION_PAD}"
        try:
            info = create_run(made.url, question)
        except (AssertionError, httpx.HTTPError) as exc:  # refused (a 503) or cut: the fault
            refused += 1
            why.append(str(exc)[:200])
        else:
            reader = Reader(info["run_id"], made.url, made.url).start()
            out.append(Started(info, question, reader))
        time.sleep(1 / rate)
    return refused


def _judge(made: Cluster, run: Started, tally: Tally) -> None:
    try:
        ended = join(made.url, run.info["run_id"])
    except TimeoutError as exc:
        tally.lost += 1
        tally.notes.append(str(exc))
        return
    run.reader.wait()
    texts = [
        (m["role"], "".join(p.get("text", "") for p in m.get("content", [])))
        for m in thread_messages(made.url, run.info["thread_id"])
    ]
    once = texts.count(("assistant", f"turn 1: {run.question}")) == 1
    if ended["status"] != "completed" or not once:
        tally.lost += 1
        tally.notes.append(f"{run.info['run_id']}: {ended['status']}, answered once: {once}")
        return
    tally.finished += 1
    tally.resumed += ended.get("attempt", 1) >= 2
    log = replay(made.url, run.info["run_id"])
    got = run.reader.frames
    tally.dup_events += len(got) - len({f.id for f in got}) + (0 if got == log else 1)


def run_fault(made: Cluster, name: str, rate: float, seconds: float) -> Tally:
    """One fault in the middle of `seconds` of load; the tally once every run has ended."""
    cause, undo = _faults(made)[name]
    tally = Tally(name)
    runs: list[Started] = []
    refused: list[int] = []
    loader = threading.Thread(
        target=lambda: refused.append(_load(made, name, rate, seconds, runs, tally.notes)),
        daemon=True,
    )
    loader.start()
    time.sleep(seconds / 3)
    cause()
    time.sleep(seconds / 3)
    undo()
    loader.join(seconds + 120)
    tally.refused = refused[0] if refused else 0
    tally.started = len(runs)
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda r: _judge(made, r, tally), runs))
    made.heal()
    return tally


def main() -> int:
    """Run the faults and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=4.0, help="runs started per second")
    parser.add_argument("--seconds", type=float, default=12.0, help="load per fault")
    parser.add_argument("--faults", default="kill,pg,delay,cut,blackhole")
    args = parser.parse_args()
    tallies = []
    with tempfile.TemporaryDirectory(prefix="parley-faults-") as root:
        started = time.monotonic()
        with cluster(Path(root), proxied=True) as made:
            print(f"cluster up in {time.monotonic() - started:.0f} s: {made.url}", flush=True)
            for name in args.faults.split(","):
                print(f"fault {name}...", flush=True)
                tallies.append(run_fault(made, name, args.rate, args.seconds))
    header = ("fault", "started", "refused", "finished", "resumed", "lost", "dup events")
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for t in tallies:
        row = (t.fault, t.started, t.refused, t.finished, t.resumed, t.lost, t.dup_events)
        print("| " + " | ".join(str(v) for v in row) + " |")
    for t in tallies:
        for note in list(dict.fromkeys(t.notes))[:5]:  # the first few, each once
            print(f"{t.fault}: {note}")
    # Nothing started proves nothing: that fails too (the service refused every run).
    return 1 if any(t.lost or t.dup_events or not t.started for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
