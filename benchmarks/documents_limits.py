"""Documents that would pin the server: memory and time of parsing, before and after.

Two measures, each in a process of its own, for each source tree given (`--src label=path`,
parley imported from that path), printed side by side:

1. **A hostile PDF through the `doc_parser` tool.** A PDF of `--bomb-pages` pages (about
   34 KiB each: 20 pages make about 680 KiB) whose content streams each inflate to about
   11 MB of text operators, just under pypdf's 2,000,000 tokens per stream, is read by
   `doc_parser` through a `Toolkit` whose call times out after `--tool-timeout` seconds, as
   the service runs it. The process's resident memory (VmRSS from `/proc/self/status`,
   sampled every 20 ms by a thread) is shown before the call, at its highest during the call,
   when the call returns, and `--settle` seconds later; with the tool's answer (an error or
   text) and how long the call took. Parsing in the server's own thread, the call times out
   and the parse goes on in the abandoned thread; parsing in a child process, the child is
   killed at the timeout.
2. **Indexing a folder of small files.** `--files` files (half Markdown, a quarter text, a
   quarter one-page PDFs, about 1 KB each) are synced into a fresh keyword index
   (`DocumentIndex.sync`, no embedding model) `--repeat` times, each into a new index file;
   the first run (which starts any parser processes), the median of the others, and the CPU
   time a sync costs (this process's and its parser processes', whatever else the machine
   runs: wall times on a busy machine add the waits for a CPU at each hand-over). Then
   `--pdfs` PDFs of `--pdf-pages` pages the same way (the median after the first).

Run: `python benchmarks/documents_limits.py --src before=/path/to/main/src --src after=src`
(default: `after=src` of this checkout only). Nothing fails on a slow result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # tests._hostile: the tests' PDF writer and hostile PDF

from tests.tools._hostile import inflating_pdf, text_pdf  # noqa: E402

# -- inputs ---------------------------------------------------------------------------------------


def small_folder(folder: Path, count: int) -> Path:
    """`count` files of about a kilobyte: Markdown, text and one-page PDFs."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        words = " ".join(f"word{(number * 7 + k) % 997}" for k in range(120))
        if number % 4 == 3:
            text_pdf(folder / f"doc{number:04}.pdf", [[f"Document {number} {words[:200]}"]])
        elif number % 4 == 2:
            (folder / f"doc{number:04}.txt").write_text(f"Document {number}\n\n{words}\n")
        else:
            (folder / f"doc{number:04}.md").write_text(f"# Document {number}\n\n{words}\n")
    return folder


# -- measures (in the child process) --------------------------------------------------------------


def rss() -> int:
    """This process's resident memory in bytes (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler:
    """The highest VmRSS seen, sampled every 20 ms by a thread."""

    def __init__(self) -> None:
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, rss())


async def measure_pdf(options: argparse.Namespace) -> dict[str, Any]:
    from parley.messages import ToolCallBlock  # noqa: PLC0415
    from parley.tools import Toolkit  # noqa: PLC0415
    from parley.tools.builtin import DocParser  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        path = inflating_pdf(folder / "hostile.pdf", options.bomb_pages)
        parser = DocParser({"root": str(folder)})
        parser.timeout = options.tool_timeout
        toolkit = Toolkit([parser])
        call = ToolCallBlock(id="1", name="doc_parser", input={"url": "hostile.pdf"})
        before = rss()
        sampler = Sampler()
        started = time.perf_counter()
        result = await toolkit.run(call)
        took = time.perf_counter() - started
        returned = rss()
        await asyncio.sleep(options.settle)
        peak = sampler.stop()
        return {
            "pdf_bytes": path.stat().st_size,
            "rss_before": before,
            "rss_peak": peak,
            "rss_returned": returned,
            "rss_settled": rss(),
            "call_seconds": took,
            "answer": str(result.output)[:160].replace("\n", " "),
        }


def pdf_folder(folder: Path, count: int, pages: int) -> Path:
    """`count` PDFs of `pages` pages of about 600 characters each."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        text = [
            [f"Report {number} page {page} line {n} of the quarterly figures" for n in range(10)]
            for page in range(pages)
        ]
        text_pdf(folder / f"report{number:03}.pdf", text)
    return folder


async def _sync_times(folder: Path, scratch: Path, repeat: int, expected: int) -> list[float]:
    from parley.rag import DocumentIndex  # noqa: PLC0415

    times = []
    for run in range(repeat):
        started = time.perf_counter()
        index = await DocumentIndex.open(scratch / f"{folder.name}{run}.db", embedding_model=None)
        try:
            report = await index.sync(folder)
        finally:
            await index.close()
        times.append(time.perf_counter() - started)
        assert len(report.added) == expected, report
    return times


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (parsers closed)."""
    try:
        from parley.tools.builtin import _doc_pool  # noqa: PLC0415

        _doc_pool._close_pools()  # parsers are reaped: their time is counted
    except ImportError:  # before: no parser processes
        pass
    spent = os.times()
    return spent.user + spent.system + spent.children_user + spent.children_system


async def measure_index(options: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        small = small_folder(Path(scratch) / "docs", options.files)
        cpu = _cpu()
        times = await _sync_times(small, Path(scratch), options.repeat, options.files)
        cpu = _cpu() - cpu
        pdfs = pdf_folder(Path(scratch) / "pdfs", options.pdfs, options.pdf_pages)
        pdf_times = await _sync_times(pdfs, Path(scratch), options.repeat, options.pdfs)
    return {
        "index_first": times[0],
        "index_median": statistics.median(times[1:] or times),
        "index_cpu": cpu / options.repeat,
        "pdfs_median": statistics.median(pdf_times[1:] or pdf_times),
    }


# -- the side-by-side table -----------------------------------------------------------------------


def run_child(src: str, what: str, options: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--measure",
        what,
        *("--files", str(options.files), "--repeat", str(options.repeat)),
        *("--pdfs", str(options.pdfs), "--pdf-pages", str(options.pdf_pages)),
        *("--bomb-pages", str(options.bomb_pages), "--tool-timeout", str(options.tool_timeout)),
        *("--settle", str(options.settle)),
    ]
    environment = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _mib(value: Any) -> str:
    return f"{value / 2**20:.0f} MiB" if isinstance(value, int) else str(value)


def _seconds(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, float) else str(value)


ROWS = [
    ("hostile PDF size", "pdf_bytes", lambda v: f"{v / 1024:.0f} KiB"),
    ("RSS before the call", "rss_before", _mib),
    ("RSS peak during the call", "rss_peak", _mib),
    ("RSS when the call returned", "rss_returned", _mib),
    ("RSS after settling", "rss_settled", _mib),
    ("the call took", "call_seconds", _seconds),
    ("the tool answered", "answer", str),
    ("index: first sync", "index_first", _seconds),
    ("index: median of the others", "index_median", _seconds),
    ("index: CPU a sync (and parsers')", "index_cpu", _seconds),
    ("index PDFs: median", "pdfs_median", _seconds),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", action="append", help="label=path of a source tree")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--pdfs", type=int, default=40)
    parser.add_argument("--pdf-pages", type=int, default=20)
    parser.add_argument("--bomb-pages", type=int, default=20)
    parser.add_argument("--tool-timeout", type=float, default=20.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--measure", choices=["pdf", "index"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.measure:
        measure = measure_pdf if options.measure == "pdf" else measure_index
        print(json.dumps(asyncio.run(measure(options))))
        return
    sources = dict(s.split("=", 1) for s in options.src or [f"after={ROOT / 'src'}"])
    columns: dict[str, dict[str, Any]] = {}
    for label, src in sources.items():
        # Indexing first, alone: a parse left running in the other process cannot slow it.
        columns[label] = {**run_child(src, "index", options), **run_child(src, "pdf", options)}
    print(f"{'':30}" + "".join(f"{label:>24}" for label in columns))
    for title, key, shown in ROWS:
        values = [columns[label].get(key, columns[label].get("error", "-")) for label in columns]
        if key == "answer":
            for label, value in zip(columns, values, strict=True):
                print(f"{title} ({label}): {value}")
            continue
        print(f"{title:30}" + "".join(f"{shown(value):>24}" for value in values))


if __name__ == "__main__":
    main()
