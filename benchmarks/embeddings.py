"""Embedding models: parley beside each provider's raw SDK, on one local server, interleaved.

Against a local server speaking OpenAI's `/v1/embeddings` and Ollama's `/api/embed` (this file
run with `--serve`, in a process of its own, so that its CPU never shares the client's event
loop; `_openai_bench_server.py`'s loop, each distinct answer rendered once), each provider's
parley model and its raw SDK embed the same texts, taking turns round by round (`models.py`'s
`interleaved`, so that drift in the machine's speed hits both):

- openai: `OpenAIEmbeddingModel` against `AsyncOpenAI.embeddings.create` (the SDK's default
  base64, decoded by the SDK with numpy), 1,536 dimensions; and both again with
  `encoding_format="float"`, to see which way the vectors travel faster;
- ollama: `OllamaEmbeddingModel` against `ollama.AsyncClient.embed` (the SDK on httpx's own
  transport, as it comes), 768 dimensions.

For each: one request's worth of texts (512), and many texts in full batches (openai 4,096 in
2 requests of 2,048; ollama 2,048 in 4 of 512), sent at most 4 at a time (parley's default
`max_concurrency`; the SDK's batches by the loop a caller would write, `gathered`). Every
vector is the same fixed pattern with its first value set to the input's place in its request
(exact in float32, so base64 and numbers give the same), so a contender that puts vectors in
the wrong order is caught before anything is timed.

Run: `python benchmarks/embeddings.py [--quick] [--providers openai,ollama]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _openai_bench_server import Server as _BenchServer  # noqa: E402
from _openai_bench_server import _http  # noqa: E402
from models import Figure, interleaved, report, time_figure  # noqa: E402

CONCURRENCY = 4
"""Batches in flight at once, for both contenders (parley's default)."""


@dataclass(frozen=True)
class Settings:
    """Rounds of each measurement (every round runs both contenders), and calls per round."""

    rounds: int
    calls_per_round: int


DEFAULT = Settings(rounds=12, calls_per_round=5)
QUICK = Settings(rounds=5, calls_per_round=3)


@dataclass(frozen=True)
class Provider:
    """What a provider's figures embed: the model, the vectors' size, the batch, the texts."""

    model: str
    size: int
    batch: int
    one: int
    many: int
    reference: str


PROVIDERS = {
    "openai": Provider(
        "text-embedding-3-small",
        1536,
        2048,
        512,
        4096,
        "the raw `openai` SDK (AsyncOpenAI.embeddings.create, base64 decoded with numpy)",
    ),
    "ollama": Provider(
        "nomic-embed-text",
        768,
        512,
        512,
        2048,
        "the raw `ollama` SDK (AsyncClient.embed, on httpx's own transport)",
    ),
}


# -- the server (this file with --serve) ----------------------------------------------------


def vector(place: int, size: int) -> list[float]:
    """The vector the server sends for the input at `place` of a request (exact in float32)."""
    return [float(place), *(((j * 37) % 1024) / 1024 - 0.5 for j in range(1, size))]


def _base64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


def openai_answer(model: str, count: int, size: int, encoding: str) -> bytes:
    """A `/v1/embeddings` list: `count` vectors of `size`, as floats or base64."""
    data = []
    for i in range(count):
        values = vector(i, size)
        embedding = _base64(values) if encoding == "base64" else values
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    body = {"object": "list", "data": data, "model": model, "usage": usage}
    return _http("200 OK", "application/json", json.dumps(body).encode())


def ollama_answer(model: str, count: int, size: int) -> bytes:
    """An `/api/embed` answer: `count` vectors of `size`."""
    body = {
        "model": model,
        "embeddings": [vector(i, size) for i in range(count)],
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
        "prompt_eval_count": 3 * count,
    }
    return _http("200 OK", "application/json; charset=utf-8", json.dumps(body).encode())


class EmbeddingServer(_BenchServer):
    """The OpenAI bench server's loop, answering both providers' embedding endpoints."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        route = path.split(b"?", 1)[0]
        if route not in (b"/v1/embeddings", b"/api/embed"):
            return _http("404 Not Found", "text/plain", b"404 page not found")
        request = json.loads(body)
        model, count = str(request["model"]), len(request["input"])
        openai = route == b"/v1/embeddings"
        size = int(request.get("dimensions") or PROVIDERS["openai" if openai else "ollama"].size)
        encoding = str(request.get("encoding_format") or "float") if openai else "float"
        key = (route, model, count, size, encoding)
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = (
                openai_answer(model, count, size, encoding)
                if openai
                else ollama_answer(model, count, size)
            )
            self._rendered[key] = rendered
        return rendered


async def serve() -> None:
    listener = await asyncio.start_server(EmbeddingServer().handle, "127.0.0.1", 0, backlog=2048)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        # Serve until the parent closes our standard input (or dies).
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


class BenchServer(AbstractContextManager["BenchServer"]):
    """This file's server in a child process; it stops when its stdin closes."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> BenchServer:
        command = [sys.executable, __file__, "--serve"]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        if not line.startswith("PORT "):
            self._process.kill()
            raise SystemExit(f"the benchmark server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


# -- contenders -----------------------------------------------------------------------------


class Contender(Protocol):
    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]: ...
    async def aclose(self) -> None: ...


async def gathered(
    texts: Sequence[str],
    batch: int,
    call: Callable[[list[str]], Awaitable[list[list[float]]]],
) -> list[list[float]]:
    """`call` on each batch of `texts`, `CONCURRENCY` at a time, the vectors in input order.

    What a caller of a raw SDK writes to do what parley's `EmbeddingModel` does.
    """
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(start: int) -> list[list[float]]:
        async with gate:
            return await call(list(texts[start : start + batch]))

    parts = await asyncio.gather(*(one(i) for i in range(0, len(texts), batch)))
    return [vector for part in parts for vector in part]


class ParleyContender:
    """A parley embedding model."""

    name = "parley"

    def __init__(self, model: Any) -> None:
        self.model = model

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class OpenAISDKContender:
    """`AsyncOpenAI.embeddings.create`, batches gathered."""

    name = "raw SDK"

    def __init__(self, url: str, spec: Provider, encoding: str | None) -> None:
        from openai import AsyncOpenAI  # noqa: PLC0415

        self.client = AsyncOpenAI(api_key="x", base_url=f"{url}/v1", max_retries=0)
        self.spec = spec
        self.extra = {"encoding_format": encoding} if encoding else {}

    async def one(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embeddings.create(
            model=self.spec.model, input=texts, dimensions=self.spec.size, **self.extra
        )
        return [item.embedding for item in response.data]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, self.spec.batch, self.one)

    async def aclose(self) -> None:
        await self.client.close()


class OllamaSDKContender:
    """`ollama.AsyncClient.embed`, batches gathered."""

    name = "raw SDK"

    def __init__(self, url: str, spec: Provider) -> None:
        from ollama import AsyncClient  # noqa: PLC0415

        self.client = AsyncClient(host=url)
        self.spec = spec

    async def one(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embed(model=self.spec.model, input=texts)
        return [list(vector) for vector in response.embeddings]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, self.spec.batch, self.one)

    async def aclose(self) -> None:
        await self.client.close()


def openai_pair(url: str, spec: Provider, encoding: str | None) -> list[Contender]:
    from parley.embeddings.openai import OpenAIEmbeddingModel  # noqa: PLC0415
    from parley.models.openai import OpenAICredential  # noqa: PLC0415

    parameters: dict[str, Any] = {"dimensions": spec.size}
    if encoding:
        parameters["encoding_format"] = encoding
    credential = OpenAICredential(api_key="x", base_url=f"{url}/v1")
    model = OpenAIEmbeddingModel(credential, spec.model, parameters=parameters)
    return [ParleyContender(model), OpenAISDKContender(url, spec, encoding)]


def ollama_pair(url: str, spec: Provider) -> list[Contender]:
    from parley.embeddings.ollama import OllamaEmbeddingModel  # noqa: PLC0415
    from parley.models.ollama import OllamaCredential  # noqa: PLC0415

    model = OllamaEmbeddingModel(OllamaCredential(host=url), spec.model)
    return [ParleyContender(model), OllamaSDKContender(url, spec)]


# -- figures --------------------------------------------------------------------------------


def expected(count: int, batch: int, size: int) -> list[list[float]]:
    """The vectors a contender must give back for `count` texts sent in batches of `batch`."""
    return [vector(i % batch, size) for i in range(count)]


async def pair_figures(
    pair: Sequence[Contender], spec: Provider, settings: Settings, prefix: str, *, many: bool
) -> list[Figure]:
    """Check both contenders' vectors, then time one request (and many), interleaved."""
    inputs = [[f"text number {i}" for i in range(n)] for n in (spec.one, spec.many)]
    for contender in pair:
        for texts in inputs:
            if await contender.embed(texts) != expected(len(texts), spec.batch, spec.size):
                raise SystemExit(f"{contender.name} gave wrong vectors for {len(texts)} texts")

    def job(texts: list[str]) -> Callable[[Any], Callable[[], Awaitable[Any]]]:
        return lambda c: lambda: c.embed(texts)

    s = settings
    single = await interleaved(pair, job(inputs[0]), s.rounds, s.calls_per_round)
    rows = [time_figure(f"{prefix}{spec.one} texts, 1 request", "ms/call", 1e3, single)]
    if many:
        spread = await interleaved(pair, job(inputs[1]), s.rounds)
        requests = -(-spec.many // spec.batch)
        label = f"{prefix}{spec.many:,} texts, {requests} requests x{CONCURRENCY}"
        rows.append(time_figure(label, "ms", 1e3, spread))
    for row in rows:
        row.goal, row.met = "ratio <= 1.0", (row.ratio or 0) <= 1.0
    return rows


async def provider_figures(name: str, url: str, settings: Settings) -> list[Figure]:
    """One provider's figures (OpenAI's one request twice: base64, then numbers)."""
    spec = PROVIDERS[name]
    variants: list[tuple[str, list[Contender], bool]]
    if name == "openai":
        variants = [
            ("openai: ", openai_pair(url, spec, None), True),
            # The SDK takes seconds for each many-batch call in numbers: one request only.
            ("openai float: ", openai_pair(url, spec, "float"), False),
        ]
    else:
        variants = [(f"{name}: ", ollama_pair(url, spec), True)]
    figures: list[Figure] = []
    for prefix, pair, many in variants:
        try:
            figures += await pair_figures(pair, spec, settings, prefix, many=many)
        finally:
            for contender in pair:
                await contender.aclose()
    return figures


def encoding_figures(figures: list[Figure]) -> list[Figure]:
    """parley's time with base64 over its time with numbers, from the rows above."""
    by_label = {f.label: f for f in figures}
    rows = []
    for label in [f.label for f in figures if f.label.startswith("openai: ")]:
        base64_row = by_label[label]
        float_row = by_label.get(label.replace("openai: ", "openai float: "))
        if float_row is None:
            continue
        rows.append(
            Figure(
                label.replace("openai: ", "openai base64/float: "),
                "ratio",
                base64_row.parley / float_row.parley,
                (base64_row.reference or 0) / (float_row.reference or 1),
                goal="< 1: base64 won",
            )
        )
    return rows


def _versions() -> str:
    from importlib import metadata  # noqa: PLC0415

    found = []
    for name in ("parley", "openai", "httpx2", "ollama", "httpx", "aiohttp", "numpy", "jiter"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument(
        "--providers", default=",".join(PROVIDERS), help="comma-separated: openai, ollama"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return 0
    names = [name for name in args.providers.split(",") if name]
    unknown = [name for name in names if name not in PROVIDERS]
    if unknown:
        raise SystemExit(f"unknown provider {unknown[0]!r}; known: {', '.join(PROVIDERS)}")
    settings = QUICK if args.quick else DEFAULT
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {_versions()}\n")
    started = time.perf_counter()
    figures: list[Figure] = []
    with BenchServer() as server:
        for name in names:
            figures += asyncio.run(provider_figures(name, server.url, settings))
    figures += encoding_figures(figures)
    references = "; ".join(f"{name}: {PROVIDERS[name].reference}" for name in names)
    report(figures, [], reference=references)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
