"""What `embeddings_<provider>.py` share: the vectors, the settings, the rounds.

The server is `_harness.RenderingServer`'s loop (kept-alive connections, each distinct answer
rendered once, then the same bytes written) with a provider's embedding answers; it runs in a
process of its own (the provider file run with `--serve`, `_harness.ServerProcess`), so that
its CPU never shares the client's event loop. Each answer holds one vector per input of the
request; a vector is the same fixed pattern of floats with its first component set to the
input's place in the request, so a contender that puts vectors in the wrong order is caught
before any timing.

Two measurements, each contender in turn, round by round (`_harness.interleaved`):

1. one request's worth of texts (one batch): time per call;
2. many texts, split into the provider's batches and sent 4 at a time (parley's default
   `max_concurrency`; the raw SDK's batches under the same bound with `asyncio.gather`):
   time per call.

Each provider file runs alone (`python benchmarks/embeddings_<provider>.py [--quick]`); its
`provider_figures(settings)` gives its rows to a caller that prints them with others'.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import _harness as harness

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


class ParleyEmbedder:
    """parley's embedding model of a provider, called on the texts (it batches them itself)."""

    name = "parley"

    def __init__(self, model: Any) -> None:
        self.model = model

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class RawBatches:
    """A raw SDK's embedding call, one call per batch of `batch` texts, 4 at a time."""

    name = "raw SDK"
    batch: int
    """Texts in one request: the provider's limit."""
    size: int
    """Dimensions of a vector."""

    def __init__(self, url: str) -> None:
        self.client = self.connect(url)

    def connect(self, url: str) -> Any:
        """The SDK's client for the server at `url`."""
        raise NotImplementedError

    async def one_batch(self, texts: list[str]) -> list[list[float]]:
        """The SDK's vectors for one request's `texts`, in their order."""
        raise NotImplementedError

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, self.batch, self.one_batch)


async def server_figures(
    script: str,
    parley: Callable[[str], Contender],
    raw: type[RawBatches],
    settings: EmbeddingSettings,
    path: str = "",
) -> list[harness.Figure]:
    """The rows of `embeddings_<name>.py` (`script`): `parley` against `raw` on the file's
    server (the file run with `--serve`; `path`: its API's root), labelled with the name."""
    name = Path(script).stem.removeprefix("embeddings_")
    with harness.ServerProcess(script, "--serve", path=path) as server:
        pair = [parley(server.url()), raw(server.url())]
        try:
            return await figures(pair, settings, prefix=f"{name}: ", batch=raw.batch, size=raw.size)
        finally:
            await harness.close_all(pair)


def embedding_main(
    doc: str,
    server: Callable[[], harness.RenderingServer],
    figures_of: Callable[[EmbeddingSettings], Awaitable[list[harness.Figure]]],
    packages: Sequence[str],
    reference: str,
) -> int:
    """The `main` of a file whose rows take `EmbeddingSettings` (`_harness.provider_main`)."""
    return harness.provider_main(
        None, doc, (DEFAULT, QUICK), figures_of, packages, reference, server
    )


async def figures(
    pair: Sequence[Contender],
    settings: EmbeddingSettings,
    *,
    prefix: str,
    batch: int,
    size: int,
) -> list[harness.Figure]:
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
    single = await harness.interleaved(pair, job(one), s.rounds, s.calls_per_round)
    spread = await harness.interleaved(pair, job(many), s.rounds)
    batches = -(-settings.many // batch)
    many_label = f"{prefix}{settings.many:,} texts, {batches} requests x{CONCURRENCY}"
    return harness.at_most(
        [
            harness.time_figure(f"{prefix}{batch} texts, 1 request", "µs/call", 1e6, single),
            harness.time_figure(many_label, "ms", 1e3, spread),
        ],
        1.0,
    )
