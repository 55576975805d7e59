"""`parley serve` as a model server: what it adds to a call, beside calling the model directly.

A client (the official `openai` SDK, async) asks an OpenAI-compatible upstream
(`_openai_bench_server.py`: pre-rendered answers, a process of its own) two ways, in one run:

- **direct**: the SDK's `base_url` is the upstream (the floor: no proxy at all);
- **parley**: the SDK's `base_url` is `parley serve`'s `/v1`, whose served model
  `openai_compatible:bench` forwards to the same upstream (a uvicorn process of its own,
  `_serve.py`, logging as its command does).

Rows: requests/s and p50/p99 latency of whole answers, with and without a client tool, at 1
and 16 concurrent clients; a streamed answer of 200 chunks (time to the last chunk, chunks
received). Each row runs direct and parley back to back, round after round, so drift in the
machine's speed falls on both; the ratio is parley over direct (latency) or direct over parley
(rate). Nothing here is a test: no figure fails the run.

Run: `python benchmarks/model_server.py [--requests 400] [--rounds 3]`; `--serve` is the
server process's side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _serve  # noqa: E402  (the server process's side, beside this file)

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def _serve_app() -> None:
    """The server process: parley's service serving the upstream as model `bench`."""
    from parley.service import ServiceSettings, create_app  # noqa: PLC0415

    settings = ServiceSettings(
        database_url=f"sqlite+aiosqlite:///{os.environ['BENCH_DB']}",
        served_models={"bench": "openai_compatible:bench"},
    )
    _serve.serve(create_app(settings))


class Process:
    """A child process that prints `PORT <n>` when it listens and stops when stdin closes."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self._log = log.open("w")
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"{command[1]} did not start; see {log}")
        self.port = int(line.split()[1])

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._log.close()


@dataclass
class Sample:
    """Latencies of one row's requests, and the wall time they took."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _whole(client: Any, tools: bool) -> None:
    extra: dict[str, Any] = {"tools": [TOOL]} if tools else {}
    answer = await client.chat.completions.create(model="bench", messages=MESSAGES, **extra)
    assert answer.choices[0].message.tool_calls if tools else answer.choices[0].message.content


async def _load(base_url: str, clients: int, requests: int, tools: bool) -> Sample:
    import httpx  # noqa: PLC0415
    import openai  # noqa: PLC0415

    sample = Sample()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", http_client=http)
        await _whole(client, tools)  # a warm connection and a warm server
        queue = list(range(requests))

        async def worker() -> None:
            while queue:
                queue.pop()
                start = time.perf_counter()
                await _whole(client, tools)
                sample.latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        sample.wall = time.perf_counter() - start
    return sample


async def _stream(base_url: str, requests: int) -> tuple[Sample, int]:
    import openai  # noqa: PLC0415

    sample, chunks = Sample(), 0
    client = openai.AsyncOpenAI(base_url=base_url, api_key="k")
    wall = time.perf_counter()
    for _ in range(requests):
        start = time.perf_counter()
        stream = await client.chat.completions.create(
            model="bench", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = sum(
            [1 async for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
        )
        sample.latencies.append(time.perf_counter() - start)
    sample.wall = time.perf_counter() - wall
    await client.close()
    return sample, chunks


def _row(name: str, direct: Sample, parley: Sample) -> str:
    return (
        f"| {name} | {direct.rate:,.0f} | {parley.rate:,.0f} | {direct.rate / parley.rate:.2f} "
        f"| {direct.quantile(0.5) * 1000:.1f} / {direct.quantile(0.99) * 1000:.1f} "
        f"| {parley.quantile(0.5) * 1000:.1f} / {parley.quantile(0.99) * 1000:.1f} "
        f"| {parley.quantile(0.5) / direct.quantile(0.5):.2f} |"
    )


def _merge(samples: list[Sample]) -> Sample:
    merged = Sample(wall=sum(s.wall for s in samples))
    for sample in samples:
        merged.latencies.extend(sample.latencies)
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve_app()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        upstream = Process(
            [sys.executable, str(HERE / "_openai_bench_server.py")], env, Path(tmp, "up.log")
        )
        direct_url = f"http://127.0.0.1:{upstream.port}/v1"
        env |= {
            "BENCH_DB": str(Path(tmp, "p.db")),
            "OPENAI_COMPATIBLE_BASE_URL": direct_url,
            "OPENAI_COMPATIBLE_API_KEY": "k",
        }
        server = Process([sys.executable, __file__, "--serve"], env, Path(tmp, "serve.log"))
        parley_url = f"http://127.0.0.1:{server.port}/v1"
        try:
            found = _serve.versions(("parley", "openai", "uvicorn"))
            print(f"# {found}; Python {sys.version.split()[0]}")
            print(
                "| row | direct req/s | parley req/s | rate ratio "
                "| direct p50/p99 ms | parley p50/p99 ms | p50 ratio |"
            )
            print("|---|---|---|---|---|---|---|")
            for name, clients, tools in (
                ("whole answer, 1 client", 1, False),
                ("whole answer, 16 clients", 16, False),
                ("client tool call, 1 client", 1, True),
                ("client tool call, 16 clients", 16, True),
            ):
                runs: dict[str, list[Sample]] = {"direct": [], "parley": []}
                for _ in range(args.rounds):
                    for label, url in (("direct", direct_url), ("parley", parley_url)):
                        runs[label].append(asyncio.run(_load(url, clients, args.requests, tools)))
                print(_row(name, _merge(runs["direct"]), _merge(runs["parley"])), flush=True)
            streams: dict[str, list[Sample]] = {"direct": [], "parley": []}
            got = {}
            for _ in range(args.rounds):
                for label, url in (("direct", direct_url), ("parley", parley_url)):
                    sample, got[label] = asyncio.run(_stream(url, max(1, args.requests // 10)))
                    streams[label].append(sample)
            print(
                _row(
                    "stream of 200 chunks, 1 client",
                    _merge(streams["direct"]),
                    _merge(streams["parley"]),
                )
            )
            print(f"# chunks with text received: direct {got['direct']}, parley {got['parley']}")
        finally:
            server.close()
            upstream.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
