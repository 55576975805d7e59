"""A soak: three `parley serve` replicas on one PostgreSQL at a steady request rate.

Three replicas (`parley serve`, its own command: uvicorn, one process each, access log on) serve
the same agent (`langgraph_peer.agent`: a scripted model streaming five tokens at once)
from one PostgreSQL (`--postgres-url` / env `PARLEY_BENCH_POSTGRES_URL`, else a throwaway
cluster made as the tests make theirs, fsync off). The first replica starts alone (it migrates
the database), then the other two. Clients reach them through HAProxy when its binary is
installed (`haproxy`, the configuration `docs/how-to/deployment.md` gives: `balance
leastconn`, health checks on `/health`), else by round robin in the client.

The load is open-loop: `--rate` requests a second (default 20), sent on schedule whatever the
answers take (at most `--max-in-flight` at once; past that a request counts as an error), in
turn the kinds `--mix` names (default `invoke,stream`: `POST /invoke`, and `POST /stream`
read to its `[DONE]`; `langgraph`: `POST /langgraph/runs/wait`, stateless, kept), each on a
new thread, its answer checked, for `--minutes` (default 30). Every `--sample-every` seconds
(default 10) it reads each replica's resident memory (`VmRSS` of its process tree, `/proc`),
and once a minute prints a line: requests, runs/s, latency p50/p99, errors, RSS per replica.
At the end: the totals, the requests each replica served, and every run a client was told of
(`X-Run-Id`, `Content-Location`) looked up in the store: a run that has not ended well there
(`success`; `completed` before issue 20's statuses) is **lost**, as is any run the store
holds in another state; then each replica's RSS at the start, the end, its peak, and its
slope (least squares, MiB a minute) over the whole run and over its second half (after
warm-up: the figure that says whether memory is flat).

Run: `python benchmarks/soak.py [--minutes 30] [--rate 20] [--sample-every 10]
[--mix invoke,stream,langgraph]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from langgraph_peer import Server, free_port  # noqa: E402

REPLICAS = 3
AGENT = "langgraph_peer:agent"
ANSWER = "hello there friend"
INPUT = {"messages": [{"role": "user", "content": "hi"}]}
FINISHED = {"success", "completed"}
"""A run that ended well: `success` (issue 20's statuses), `completed` (the name before them)."""

HAPROXY = """\
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 5s
    retries 2
    option redispatch 1
    retry-on conn-failure
frontend parley_front
    bind 127.0.0.1:{port}
    default_backend parley_replicas
backend parley_replicas
    balance leastconn
    option httpchk
    http-check send meth GET uri /health
    http-check expect status 200
    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 2
{servers}
"""


@dataclass
class Tally:
    """What the clients saw: each request's latency and run id, or its error's name."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def mark(self) -> tuple[int, int]:
        return len(self.latencies), len(self.errors)

    def since(self, mark: tuple[int, int]) -> Tally:
        """What was added after `mark` (a request counts when it ends)."""
        return Tally(self.latencies[mark[0] :], self.errors[mark[1] :], self.run_ids[mark[0] :])


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points; 0 for fewer than two."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


# -- the replicas ------------------------------------------------------------------------------


def start_replicas(database_url: str, workdir: Path) -> list[Server]:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    replicas: list[Server] = []
    try:
        for index in range(REPLICAS):
            port = free_port()
            command = [sys.executable, "-m", "parley", "serve", "--agent", AGENT]
            command += ["--port", str(port), "--database-url", database_url]
            log = workdir / f"replica{index + 1}.log"
            replicas.append(Server(command, port=port, health="/health", log=log, env=env))
    except BaseException:
        for replica in replicas:
            replica.close()
        raise
    return replicas


def start_haproxy(replicas: list[Server], workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    servers = "\n".join(
        f"    server r{i + 1} 127.0.0.1:{r.port} check" for i, r in enumerate(replicas)
    )
    config = workdir / "haproxy.cfg"
    config.write_text(HAPROXY.format(port=port, servers=servers))
    log = (workdir / "haproxy.log").open("w")
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    import httpx  # noqa: PLC0415

    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"HAProxy did not answer on port {port}; see {workdir / 'haproxy.log'}")


# -- the load ----------------------------------------------------------------------------------


async def _invoke(client: Any) -> str:
    answer = await client.post("/invoke", json={"message": "hi"})
    answer.raise_for_status()
    if answer.json()["content"] != ANSWER:
        raise RuntimeError("wrong answer")
    return str(answer.headers["X-Run-Id"])


async def _stream(client: Any) -> str:
    text = ""
    async with client.stream("POST", "/stream", json={"message": "hi"}) as answer:
        answer.raise_for_status()
        run_id = str(answer.headers["X-Run-Id"])
        async for line in answer.aiter_lines():
            if line == "data: [DONE]":
                break
            if line.startswith("data: "):
                frame = json.loads(line[6:])
                if frame.get("type") == "token":
                    text += frame["content"]
                elif frame.get("type") == "error":
                    raise RuntimeError("error frame")
    if text != ANSWER:
        raise RuntimeError("wrong stream")
    return run_id


async def _langgraph(client: Any) -> str:
    """A stateless run on LangGraph's API (`/langgraph/runs/wait`), kept for the store check."""
    body = {"assistant_id": "agent", "input": INPUT, "on_completion": "keep"}
    answer = await client.post("/langgraph/runs/wait", json=body)
    answer.raise_for_status()
    if answer.json()["messages"][-1]["content"] != ANSWER:
        raise RuntimeError("wrong answer")
    return str(answer.headers["Content-Location"]).rsplit("/", 1)[-1]


KINDS = {"invoke": _invoke, "stream": _stream, "langgraph": _langgraph}
"""The requests `--mix` names: the toolkit's /invoke and /stream, LangGraph's runs/wait."""


async def one_request(client: Any, kind: str, tally: Tally) -> None:
    start = time.perf_counter()
    try:
        run_id = await KINDS[kind](client)
    except Exception as exc:  # every failure is a figure, not a crash
        tally.errors.append(type(exc).__name__)
        return
    tally.run_ids.append(run_id)
    tally.latencies.append(time.perf_counter() - start)


async def load(
    urls: list[str], replicas: list[Server], args: argparse.Namespace
) -> tuple[Tally, dict[int, list[tuple[float, float]]]]:
    import httpx  # noqa: PLC0415

    limits = httpx.Limits(max_connections=args.max_in_flight)
    clients = [httpx.AsyncClient(base_url=u, limits=limits, timeout=60) for u in urls]
    total = Tally()
    mark = total.mark()
    rss: dict[int, list[tuple[float, float]]] = {i: [] for i in range(len(replicas))}
    in_flight: set[asyncio.Task[None]] = set()
    start = time.monotonic()
    end = start + args.minutes * 60
    interval = 1 / args.rate
    next_sample = next_print = start
    index = 0
    print_header(len(replicas))
    while (now := time.monotonic()) < end:
        if now >= next_sample:
            for i, replica in enumerate(replicas):
                rss[i].append(((now - start) / 60, replica.rss_kib() / 1024))
            next_sample += args.sample_every
        if now >= next_print + 60:
            print_period(total.since(mark), (now - start) / 60, now - next_print, rss)
            mark, next_print = total.mark(), now
        if len(in_flight) >= args.max_in_flight:
            total.errors.append("over max in flight")
        else:
            kind = args.mix[index % len(args.mix)]
            task = asyncio.create_task(one_request(clients[index % len(clients)], kind, total))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        index += 1
        await asyncio.sleep(max(0.0, start + index * interval - time.monotonic()))
    if in_flight:
        await asyncio.wait(in_flight, timeout=120)
    now = time.monotonic()
    print_period(total.since(mark), (now - start) / 60, now - next_print, rss)
    for client in clients:
        await client.aclose()
    return total, rss


def print_header(replicas: int) -> None:
    rss = " | ".join(f"r{i + 1} RSS MiB" for i in range(replicas))
    print(f"| minute | requests | runs/s | p50 ms | p99 ms | errors | {rss} |")
    print("|---" * (6 + replicas) + "|", flush=True)


def print_period(
    tally: Tally, minute: float, seconds: float, rss: dict[int, list[tuple[float, float]]]
) -> None:
    done = len(tally.latencies)
    p50, p99 = quantile(tally.latencies, 0.5) * 1000, quantile(tally.latencies, 0.99) * 1000
    memory = " | ".join(f"{points[-1][1]:.1f}" if points else "-" for points in rss.values())
    print(
        f"| {minute:.1f} | {done + len(tally.errors)} | {done / seconds:.1f} "
        f"| {p50:.1f} | {p99:.1f} | {len(tally.errors)} | {memory} |",
        flush=True,
    )


# -- the end: the store's word on every run ----------------------------------------------------


async def check_store(database_url: str, run_ids: list[str]) -> tuple[Counter[str], int]:
    """The store's run statuses, and how many of `run_ids` did not finish well there."""
    import asyncpg  # noqa: PLC0415

    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT id, status FROM runs")
    finally:
        await conn.close()
    statuses = {row["id"]: row["status"] for row in rows}
    missing = sum(1 for run_id in run_ids if statuses.get(run_id) not in FINISHED)
    return Counter(statuses.values()), missing


def report(total: Tally, seconds: float, rss: dict[int, list[tuple[float, float]]]) -> None:
    done = len(total.latencies)
    errors = dict(Counter(total.errors)) or 0
    print(
        f"\n# totals: {done + len(total.errors)} requests, {done} runs ok, "
        f"{done / seconds:.1f} runs/s, p50 {quantile(total.latencies, 0.5) * 1000:.1f} ms, "
        f"p99 {quantile(total.latencies, 0.99) * 1000:.1f} ms, errors {errors}"
    )
    print(
        "\n| replica | RSS start MiB | RSS end MiB | peak MiB | slope MiB/min (all) "
        "| slope MiB/min (second half) |"
    )
    print("|---|---|---|---|---|---|")
    for i, points in rss.items():
        if not points:
            continue
        half = [p for p in points if p[0] >= points[-1][0] / 2]
        peak = max(y for _, y in points)
        print(
            f"| r{i + 1} | {points[0][1]:.1f} | {points[-1][1]:.1f} | {peak:.1f} "
            f"| {slope(points):+.3f} | {slope(half):+.3f} |"
        )


_PATHS = ("/invoke", "/stream", "/langgraph/runs/wait")


def _requests_in(log: Path) -> int:
    with log.open(errors="replace") as lines:
        return sum(1 for line in lines if any(f'"POST {path}' in line for path in _PATHS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument(
        "--sample-every", type=float, default=10.0, help="seconds between RSS reads"
    )
    parser.add_argument("--max-in-flight", type=int, default=200)
    parser.add_argument("--postgres-url", help="a PostgreSQL server to use (else a throwaway one)")
    parser.add_argument("--no-haproxy", action="store_true", help="round robin in the client")
    parser.add_argument(
        "--mix",
        default="invoke,stream",
        help=f"requests in turn, from {', '.join(KINDS)} (langgraph: /langgraph/runs/wait)",
    )
    args = parser.parse_args(argv)
    args.mix = args.mix.split(",")
    if unknown := set(args.mix) - set(KINDS):
        parser.error(f"--mix: unknown {sorted(unknown)}; choose from {sorted(KINDS)}")
    from service import postgres  # noqa: PLC0415  (the throwaway cluster, as service.py's)

    namespace = argparse.Namespace(skip_postgres=False, postgres_url=args.postgres_url)
    with postgres(namespace) as pg, tempfile.TemporaryDirectory(prefix="parley-soak-") as tmp:
        if pg is None:
            return 1
        database_url, where = pg
        workdir = Path(tmp)
        replicas = start_replicas(database_url, workdir)
        haproxy = None
        try:
            if shutil.which("haproxy") and not args.no_haproxy:
                haproxy, port = start_haproxy(replicas, workdir)
                urls, route = [f"http://127.0.0.1:{port}"], "HAProxy (leastconn)"
            else:
                urls = [f"http://127.0.0.1:{r.port}" for r in replicas]
                route = "round robin in the client (no haproxy binary)"
            print(
                f"# {REPLICAS} replicas of parley serve on PostgreSQL ({where}), via {route}; "
                f"{args.rate:g} requests/s for {args.minutes:g} min, {'/'.join(args.mix)} in turn; "
                f"load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            began = time.monotonic()
            total, rss = asyncio.run(load(urls, replicas, args))
            seconds = time.monotonic() - began
            report(total, seconds, rss)
        finally:
            if haproxy is not None:
                haproxy.terminate()
                haproxy.wait(timeout=10)
            for replica in replicas:
                replica.close()
        served = [_requests_in(replica.log) for replica in replicas]
        print(f"\n# requests each replica served (its access log): {served}")
        statuses, lost = asyncio.run(check_store(database_url, total.run_ids))
        not_success = sum(n for status, n in statuses.items() if status not in FINISHED)
        print(
            f"\n# store: runs by status {dict(statuses)}; runs the clients were told of "
            f"that did not finish well: {lost}; lost runs: {max(lost, not_success)}; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
