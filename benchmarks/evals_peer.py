"""`parley.evals` beside pydantic-evals: the same dataset, evaluators and target, in one run.

Each framework runs the same cases: case `i` has the input `i` and the expected output
`answer i`; the target is an async function returning `answer i` (after `await
asyncio.sleep(--sleep)` when it is not 0); every case is judged by equality with its expected
output and by a case-sensitive `contains "answer"` (parley's `Equals()` and `Contains(...,
case_sensitive=True)`, pydantic-evals' `EqualsExpected()` and `Contains(...)`), at most 16
cases at once (`concurrency=16`, `max_concurrency=16`). pydantic-evals' progress bar is off.

Every run is a subprocess of its own (`--worker`), so the two never share a heap: parley's
in this Python with the working tree's `src` first, pydantic-evals' in a virtualenv of its own
made on first use (`_bench_venv.py`), or `--peer-python` (`benchmarks/setup.sh` installs it into
`.venv-bench` too: `--peer-python .venv-bench/bin/python`).
A worker times building the dataset, `evaluate` (which builds the report) and, at 1,000 cases
or fewer, rendering the report's terminal table to a string; it reads its peak RSS
(`ru_maxrss`) before building the dataset and after the run. Each configuration runs
`--repeat` times (default 3), alternating the frameworks; the table gives the medians and the
ratios parley / pydantic-evals (below 1: parley is faster or smaller).

Run: `python benchmarks/evals_peer.py [--cases 1000,10000] [--sleep 0,0.005] [--repeat 3]
[--concurrency 16] [--peer-python PATH] [--profile]`; `--profile` prints a cProfile of one
parley run on 10,000 cases without sleep. benchmarks/README.md has the figures and how they
were taken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench_venv

PEER = ["pydantic-evals==2.62.0"]
ROOT = Path(__file__).resolve().parent.parent


def _rss_mb() -> float:
    """The process's peak resident set so far, in MB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _target(sleep: float) -> Any:
    async def target(inputs: int) -> str:
        if sleep:
            await asyncio.sleep(sleep)
        return f"answer {inputs}"

    return target


async def _timed(evaluating: Any) -> tuple[Any, float]:
    """The report and the seconds `evaluate` took, timed inside the event loop.

    Python 3.11's `asyncio.run` reprs the main task (and so its result, the whole report) when
    it puts the SIGINT handler back: outside the loop, that would time a repr of 10,000 cases.
    """
    started = time.perf_counter()
    report = await evaluating
    return report, time.perf_counter() - started


def _render(report: Any, cases: int) -> float | None:
    """Seconds to render `report` as a table, up to 1,000 cases (None: more, not rendered)."""
    if cases > 1000:
        return None
    start = time.perf_counter()
    report.render()
    return time.perf_counter() - start


def _parley(cases: int, sleep: float, concurrency: int) -> dict[str, Any]:
    from parley.evals import Case, Contains, Dataset, Equals  # noqa: PLC0415

    base = _rss_mb()
    started = time.perf_counter()
    dataset = Dataset(
        "bench",
        [Case(f"case {i}", i, expected=f"answer {i}") for i in range(cases)],
        evaluators=[Equals(), Contains("answer", case_sensitive=True)],
    )
    built = time.perf_counter()
    report, run = asyncio.run(_timed(dataset.evaluate(_target(sleep), concurrency=concurrency)))
    passed = sum(case.passed for case in report.cases)
    return _figures(base, built - started, run, _render(report, cases), passed)


def _peer(cases: int, sleep: float, concurrency: int) -> dict[str, Any]:
    from pydantic_evals import Case, Dataset  # noqa: PLC0415
    from pydantic_evals.evaluators import Contains, EqualsExpected  # noqa: PLC0415

    base = _rss_mb()
    started = time.perf_counter()
    dataset = Dataset(
        name="bench",
        cases=[
            Case(name=f"case {i}", inputs=i, expected_output=f"answer {i}") for i in range(cases)
        ],
        evaluators=[EqualsExpected(), Contains(value="answer")],
    )
    built = time.perf_counter()
    evaluating = dataset.evaluate(_target(sleep), max_concurrency=concurrency, progress=False)
    report, run = asyncio.run(_timed(evaluating))
    passed = sum(all(a.value for a in case.assertions.values()) for case in report.cases)
    if report.failures:
        raise RuntimeError(f"pydantic-evals: {len(report.failures)} cases failed to run")
    return _figures(base, built - started, run, _render(report, cases), passed)


def _figures(
    base: float, build: float, run: float, render: float | None, passed: int
) -> dict[str, Any]:
    return {
        "build": build,
        "run": run,
        "render": render,
        "rss_base": base,
        "rss_peak": _rss_mb(),
        "passed": passed,
    }


def _worker(args: argparse.Namespace) -> None:
    work = _parley if args.worker == "parley" else _peer
    if args.profile:
        import cProfile  # noqa: PLC0415
        import pstats  # noqa: PLC0415

        profiler = cProfile.Profile()
        profiler.enable()
        work(args.cases[0], args.sleep[0], args.concurrency)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        return
    print(json.dumps(work(args.cases[0], args.sleep[0], args.concurrency)))


def _run(python: Path, framework: str, cases: int, sleep: float, args: argparse.Namespace) -> Any:
    command = [str(python), __file__, "--worker", framework, "--cases", str(cases)]
    command += ["--sleep", str(sleep), "--concurrency", str(args.concurrency)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")} if framework == "parley" else None
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{framework} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["passed"] != cases:
        raise RuntimeError(f"{framework}: {result['passed']} of {cases} cases passed")
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _compare(python: Path, args: argparse.Namespace) -> None:
    print(
        "| cases | sleep | per case µs: parley / pydantic-evals (ratio) | cases/s: parley / "
        "pydantic-evals (ratio) | peak RSS MB (ratio) | RSS growth MB (ratio) "
        "| dataset build ms (ratio) | render ms (ratio) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for cases in args.cases:
        for sleep in args.sleep:
            runs: dict[str, list[dict[str, Any]]] = {"parley": [], "peer": []}
            for _ in range(args.repeat):
                for framework, py in (("parley", Path(sys.executable)), ("peer", python)):
                    runs[framework].append(_run(py, framework, cases, sleep, args))
            print(_row(cases, sleep, runs["parley"], runs["peer"]), flush=True)


def _pair(ours: float | None, peer: float | None, fmt: str) -> str:
    if ours is None or peer is None:
        return "-"
    return f"{ours:{fmt}} / {peer:{fmt}} ({ours / peer:.2f})"


def _row(cases: int, sleep: float, ours: list[dict[str, Any]], peer: list[dict[str, Any]]) -> str:
    run_o, run_p = _median(ours, "run"), _median(peer, "run")
    grow_o = statistics.median(r["rss_peak"] - r["rss_base"] for r in ours)
    grow_p = statistics.median(r["rss_peak"] - r["rss_base"] for r in peer)
    render_o = None if ours[0]["render"] is None else _median(ours, "render") * 1000
    render_p = None if peer[0]["render"] is None else _median(peer, "render") * 1000
    return (
        f"| {cases:,} | {sleep * 1000:g} ms "
        f"| {_pair(run_o / cases * 1e6, run_p / cases * 1e6, '.0f')} "
        f"| {_pair(cases / run_o, cases / run_p, ',.0f')} "
        f"| {_pair(_median(ours, 'rss_peak'), _median(peer, 'rss_peak'), '.0f')} "
        f"| {_pair(grow_o, grow_p, '.0f')} "
        f"| {_pair(_median(ours, 'build') * 1000, _median(peer, 'build') * 1000, '.0f')} "
        f"| {_pair(render_o, render_p, '.0f')} |"
    )


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=lambda t: [int(v) for v in t.split(",")])
    parser.add_argument("--sleep", type=_floats, default=[0.0, 0.005])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--profile", action="store_true", help="cProfile one parley run")
    parser.add_argument(
        "--peer-python",
        type=Path,
        help="a Python with pydantic-evals (e.g. .venv-bench/bin/python)",
    )
    parser.add_argument("--worker", choices=("parley", "peer"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.cases = args.cases or [1000, 10000]
    if args.worker:
        _worker(args)
        return 0
    if args.profile:
        command = [sys.executable, __file__, "--worker", "parley", "--profile", "--cases", "10000"]
        command += ["--sleep", "0", "--concurrency", str(args.concurrency)]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        return subprocess.run(command, env=env, check=False).returncode
    python = args.peer_python or _bench_venv.ensure("pydantic-evals-peer", PEER)
    print(f"# {_bench_venv.installed(python, ('pydantic-evals',))}; parley from {ROOT / 'src'}")
    print(f"# concurrency {args.concurrency}, median of {args.repeat} runs, one process per run")
    _compare(python, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
