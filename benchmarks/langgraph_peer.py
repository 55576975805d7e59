"""parley's LangGraph server API beside LangGraph's own server, driven by the same SDK client.

The peer is LangGraph's in-memory dev server (`langgraph-cli[inmem]`: `langgraph dev`),
installed with pinned versions into a throwaway virtualenv under the benchmarks' cache folder
on first use (`_bench_venv.py`; never into parley's environment), started offline
(`LANGSMITH_TRACING=false`, `LANGGRAPH_CLI_NO_ANALYTICS=1`, `--no-browser --no-reload`, an
explicit free port, `--n-jobs-per-worker` = the concurrency, since its default is one
background job) on the one-node graph in `langgraph_peer/` (langchain_core's
`GenericFakeChatModel` streaming `hello there friend` one token at a time, no delay).

parley is `parley serve` (its own command, uvicorn, SQLite in a temp dir, its access log on)
serving `agent()` (`--agent langgraph_peer:agent`: the service names it `agent`, after the
attribute, and LangGraph's clients pass that as the assistant): a scripted model that streams
the same five tokens (`hello`, ` `, `there`, ` `, `friend`), no delay.

Both are driven by the SAME client in the same interpreter: the official `langgraph-sdk`
(pinned, in the peer's virtualenv), `client.runs.stream(thread_id, "agent", input=...,
stream_mode=["messages-tuple"])`, stateless (`thread_id=None`) and on a new thread each run
(`threads.create()` then the run; the create is inside the run's time). Per row: runs/s at a
fixed concurrency (all runs over the wall time), time to the first event (any: LangGraph's
first is `metadata`) and to the first `messages` event, p50/p99, from the request sent to the
event read. Every run's streamed text is checked to be the whole answer.

parley's side goes to `/langgraph` (issue 20, item 5) when the server has it; a checkout
without it is measured through parley's own `POST /stream` with httpx instead (first frame,
first `token` frame), labelled **provisional** in the table: a different client and protocol.

Rows alternate LangGraph and parley, round after round; the ratios are parley over LangGraph
(runs/s) and LangGraph over parley (latency). Nothing here is a test: no figure fails the run.

Run: `python benchmarks/langgraph_peer.py [--runs 200] [--concurrency 10] [--rounds 2]`;
`--drive` is the client process's side (run by the benchmark in the peer's virtualenv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _bench_venv  # noqa: E402
from _harness import child_json  # noqa: E402

PEER = [
    "langgraph-cli[inmem]==0.4.40",
    "langgraph-api==0.16.7",
    "langgraph-runtime-inmem==0.36.7",
    "langgraph==1.2.24",
    "langgraph-checkpoint==4.3.2",
    "langgraph-sdk==0.4.14",
    "langchain-core==1.8.3",
    "httpx==0.28.1",
]
"""The peer's virtualenv: LangGraph's dev server and the SDK client, pinned."""
ANSWER = "hello there friend"
TOKENS = [piece for piece in re.split(r"(\s)", ANSWER) if piece]
"""How GenericFakeChatModel streams ANSWER: words and the spaces between them."""
INPUT = {"messages": [{"role": "user", "content": "hi"}]}
START_TIMEOUT = 60.0
WARM_RUNS = 5


# -- parley's agent (loaded by `parley serve --agent langgraph_peer:agent`) ------------


def agent() -> Any:
    """An agent whose model streams TOKENS at once, forever, recording nothing."""
    from parley.agents import Agent  # noqa: PLC0415 - parley's server process only
    from parley.models.accumulator import Delta, MetaDelta, TextDelta  # noqa: PLC0415
    from parley.models.response import ChatResponse  # noqa: PLC0415
    from parley.models.testing import ScriptedModel  # noqa: PLC0415

    class Tokens(ScriptedModel):
        def _next(self, request: Any) -> ChatResponse:
            self.steps.append(ANSWER)
            return super()._next(request)

        def _deltas(self, response: ChatResponse) -> Iterable[Delta]:
            for token in TOKENS:
                yield TextDelta(token)
            yield MetaDelta(usage=response.usage, finish_reason="stop")

    model = Tokens(stream=True)
    model.requests = deque(maxlen=0)  # type: ignore[assignment]  # record nothing
    return Agent("agent", model)


# -- the client process (the peer's virtualenv: langgraph-sdk, httpx) --------------------------


def _run(start: float, first: float | None, message: float | None, text: str) -> dict[str, Any]:
    """A run's figures: seconds to its first event and first message, in all; its text."""
    return {"first": first, "message": message, "total": time.perf_counter() - start, "text": text}


async def _sdk_run(client: Any, threads: bool) -> dict[str, Any]:
    start = time.perf_counter()
    thread_id = (await client.threads.create())["thread_id"] if threads else None
    sent = time.perf_counter()
    first = first_message = None
    text = ""
    stream = client.runs.stream(thread_id, "agent", input=INPUT, stream_mode=["messages-tuple"])
    async for part in stream:
        now = time.perf_counter()
        first = first or now - sent
        if part.event == "messages":
            first_message = first_message or now - sent
            chunk = part.data[0]
            text += chunk.get("content") or ""
        elif part.event == "error":
            raise RuntimeError(f"run failed: {part.data}")
    return _run(start, first, first_message, text)


async def _parley_stream_run(http: Any, threads: bool) -> dict[str, Any]:
    """One run on parley's own `POST /stream` (a new thread each time either way)."""
    start = time.perf_counter()
    first = first_message = None
    text = ""
    body = {"message": "hi", "stream_tokens": True}
    async with http.stream("POST", "/stream", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            now = time.perf_counter()
            first = first or now - start
            if line == "data: [DONE]":
                break
            frame = json.loads(line[6:])
            if frame.get("type") == "token":
                first_message = first_message or now - start
                text += frame["content"]
            elif frame.get("type") == "error":
                raise RuntimeError(f"run failed: {frame}")
    return _run(start, first, first_message, text)


async def _drive(kind: str, url: str, threads: bool, runs: int, concurrency: int) -> dict[str, Any]:
    import httpx  # noqa: PLC0415

    if kind == "sdk":
        from langgraph_sdk import get_client  # noqa: PLC0415

        client: Any = get_client(url=url, timeout=60)
        run = _sdk_run
    else:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        client = httpx.AsyncClient(base_url=url, limits=limits, timeout=60)
        run = _parley_stream_run
    for _ in range(WARM_RUNS):  # connections opened, server warm
        await run(client, threads)
    left = list(range(runs))
    results: list[dict[str, Any]] = []

    async def worker() -> None:
        while left:
            left.pop()
            results.append(await run(client, threads))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await (client.aclose() if kind != "sdk" else client.http.client.aclose())
    wrong = [r["text"] for r in results if r["text"] != ANSWER]
    return {
        "wall": wall,
        "first": [r["first"] for r in results],
        "message": [r["message"] for r in results],
        "wrong": len(wrong),
        "example": wrong[0] if wrong else ANSWER,
    }


# -- the benchmark's side ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server process on 127.0.0.1:`port`, its output in `log`, ready once `health` answers."""

    def __init__(
        self, command: list[str], *, port: int, health: str, log: Path, **popen: Any
    ) -> None:
        import httpx  # noqa: PLC0415

        self.port, self.log = port, log
        self._log = log.open("w")
        self._proc = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, **popen
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            try:
                if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-2000:]
        self.close()
        raise RuntimeError(f"{command[0]} did not answer {health} on port {port}:\n{tail}")

    def rss_kib(self) -> int:
        """Resident memory of the server and its children, KiB (Linux `/proc`)."""
        total = 0
        for pid in [self._proc.pid, *_children(self._proc.pid)]:
            with_status = Path(f"/proc/{pid}/status")
            if with_status.exists():
                for line in with_status.read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        return total

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=15)
        self._log.close()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in task.read_text().split():
            found += [int(child), *_children(int(child))]
    return found


def start_langgraph(python: Path, workdir: Path, jobs: int) -> Server:
    """`langgraph dev` on a copy of `langgraph_peer/` (its in-memory state lands in the copy)."""
    graph_dir = workdir / "langgraph_peer"
    shutil.copytree(HERE / "langgraph_peer", graph_dir)
    port = free_port()
    env = dict(os.environ, LANGSMITH_TRACING="false", LANGGRAPH_CLI_NO_ANALYTICS="1")
    command = [str(python.parent / "langgraph"), "dev", "--no-browser", "--no-reload"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n-jobs-per-worker", str(jobs)]
    # It picks another port silently when this one is taken: the health check on ours fails
    # then, and the error shows its log.
    return Server(
        command, port=port, health="/ok", log=workdir / "langgraph.log", cwd=graph_dir, env=env
    )


def start_parley(workdir: Path) -> Server:
    """`parley serve` with `agent()`, on SQLite in `workdir`."""
    port = free_port()
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path)
    command = [sys.executable, "-m", "parley", "serve", "--agent", "langgraph_peer:agent"]
    command += ["--port", str(port), "--database-url", f"sqlite+aiosqlite:///{workdir / 'p.db'}"]
    return Server(command, port=port, health="/health", log=workdir / "parley.log", env=env)


def _has_langgraph_api(port: int) -> bool:
    import httpx  # noqa: PLC0415

    try:
        answer = httpx.post(
            f"http://127.0.0.1:{port}/langgraph/assistants/search", json={}, timeout=5
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


def _measure(
    python: Path, kind: str, url: str, threads: bool, args: argparse.Namespace
) -> dict[str, Any]:
    command = [str(python), __file__, "--drive", kind, "--url", url, "--runs", str(args.runs)]
    command += ["--concurrency", str(args.concurrency)] + (["--threads"] if threads else [])
    result: dict[str, Any] = child_json(command, f"the client failed on {url}", timeout=900)
    if result["wrong"]:
        raise RuntimeError(f"{result['wrong']} runs on {url} streamed {result['example']!r}")
    return result


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [v for r in results for v in r["first"]]
    return {
        "rate": len(firsts) / sum(r["wall"] for r in results),
        "first": firsts,
        "message": [v for r in results for v in r["message"]],
    }


def _ms(values: list[float]) -> str:
    return f"{_quantile(values, 0.5) * 1000:.1f} / {_quantile(values, 0.99) * 1000:.1f}"


def _row(name: str, peer: dict[str, Any], ours: dict[str, Any]) -> str:
    return (
        f"| {name} | {peer['rate']:.1f} | {ours['rate']:.1f} | {ours['rate'] / peer['rate']:.2f}x "
        f"| {_ms(peer['first'])} | {_ms(ours['first'])} "
        f"| {_ms(peer['message'])} | {_ms(ours['message'])} "
        f"| {_quantile(peer['message'], 0.5) / _quantile(ours['message'], 0.5):.1f}x |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per row and round")
    parser.add_argument("--concurrency", type=int, default=10, help="runs in flight at once")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--drive", choices=("sdk", "parley-stream"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--threads", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.drive:
        result = asyncio.run(
            _drive(args.drive, args.url, args.threads, args.runs, args.concurrency)
        )
        print(json.dumps(result), flush=True)
        return 0
    python = _bench_venv.ensure("langgraph-peer", PEER)
    with tempfile.TemporaryDirectory(prefix="parley-lg-peer-") as tmp:
        workdir = Path(tmp)
        peer = start_langgraph(python, workdir, args.concurrency)
        try:
            ours = start_parley(workdir)
        except BaseException:
            peer.close()
            raise
        try:
            _compare(python, peer, ours, args)
        finally:
            ours.close()
            peer.close()
    return 0


def _compare(python: Path, peer: Server, ours: Server, args: argparse.Namespace) -> None:
    peer_url = f"http://127.0.0.1:{peer.port}"
    if _has_langgraph_api(ours.port):
        kind, ours_url, label = (
            "sdk",
            f"http://127.0.0.1:{ours.port}/langgraph",
            "parley /langgraph (SDK)",
        )
    else:
        kind, ours_url, label = (
            "parley-stream",
            f"http://127.0.0.1:{ours.port}",
            "parley /stream (httpx, PROVISIONAL)",
        )
    found = _bench_venv.installed(
        python, ("langgraph-api", "langgraph-runtime-inmem", "langgraph", "langgraph-sdk")
    )
    print(f"# peer: {found}; parley: {label}")
    print(
        f"# {args.runs} runs a row and round, {args.rounds} rounds, concurrency "
        f"{args.concurrency} (langgraph dev --n-jobs-per-worker {args.concurrency}); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        "| row | LangGraph runs/s | parley runs/s | parley / LangGraph "
        "| LangGraph first event p50 / p99 ms | parley first event p50 / p99 ms "
        "| LangGraph first `messages` p50 / p99 ms "
        "| parley first `messages` (or token) p50 / p99 ms "
        "| first-token p50, LangGraph / parley |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, threads in (("stateless runs.stream", False), ("thread create + runs.stream", True)):
        results: dict[str, list[dict[str, Any]]] = {"peer": [], "ours": []}
        for round_ in range(args.rounds):
            order = [("peer", "sdk", peer_url), ("ours", kind, ours_url)]
            for who, how, url in order if round_ % 2 == 0 else order[::-1]:
                results[who].append(_measure(python, how, url, threads, args))
        print(_row(name, _merge(results["peer"]), _merge(results["ours"])), flush=True)
    print(
        f"# resident memory after: LangGraph {peer.rss_kib() / 1024:.0f} MiB, "
        f"parley {ours.rss_kib() / 1024:.0f} MiB; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
