"""OpenAI embeddings: parley's `OpenAIEmbeddingModel` beside the raw `openai` SDK.

Against a local server that speaks `/v1/embeddings` (this file, run with `--serve`, in a
process of its own; see `_embedding_bench.py`), parley and the SDK's
`AsyncOpenAI.embeddings.create` embed the same texts into vectors of 1,536 dimensions
(text-embedding-3-small's), taking turns round by round:

1. 2,048 texts (one request: the API's batch limit), sent as base64 (both sides' default;
   the SDK decodes it with numpy): time per call;
2. 4,096 texts in 2 requests of 2,048, 4 at a time: time per call. The SDK's requests are
   made by the loop a caller would write (`_embedding_bench.gathered`);
3. 512 texts in one request with `encoding_format="float"` (vectors as numbers), and parley's
   time with base64 over its time with numbers: which way the vectors travel faster.

The many-text calls are heavy (3 million floats a request), so this file runs a tenth of the
calls per round the other providers' files run.

Run: `python benchmarks/embeddings_openai.py [--quick]`.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import _embedding_bench as bench
from _harness import (
    Figure,
    RenderingServer,
    ServerProcess,
    at_most,
    close_all,
    http,
    interleaved,
    time_figure,
)

MODEL = "text-embedding-3-small"
BATCH = 2048
SIZE = 1536
FLOAT_TEXTS = 512
REFERENCE = "the raw `openai` SDK (AsyncOpenAI.embeddings.create; base64 decoded with numpy)"
PACKAGES = ("openai", "httpx2", "numpy", "jiter")


def answer(model: str, count: int, size: int, encoding: str) -> bytes:
    """A `/v1/embeddings` list: `count` vectors of `size`, as base64 float32 or numbers."""
    data = []
    for i in range(count):
        values = bench.vector(i, size)
        embedding: Any = values
        if encoding == "base64":
            embedding = base64.b64encode(struct.pack(f"<{size}f", *values)).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    body = {"object": "list", "data": data, "model": model, "usage": usage}
    return http("200 OK", "application/json", json.dumps(body).encode())


class Server(RenderingServer):
    """`/v1/embeddings` answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if path.split(b"?", 1)[0] != b"/v1/embeddings":
            error = json.dumps({"error": {"message": f"no route {path!r}"}}).encode()
            return http("404 Not Found", "application/json", error)
        request = json.loads(body)
        # OpenAI's own default is numbers; the SDK asks for base64 unless told.
        key = (
            str(request["model"]),
            len(request["input"]),
            int(request.get("dimensions") or SIZE),
            str(request.get("encoding_format") or "float"),
        )
        return self.rendered(key, lambda: answer(*key))


def parley_contender(url: str, encoding: str | None = None) -> bench.ParleyEmbedder:
    """parley's `OpenAIEmbeddingModel` (the SDK's raw response, parley's decoding)."""
    from parley.providers.openai import OpenAICredential  # noqa: PLC0415
    from parley.providers.openai.embeddings import OpenAIEmbeddingModel  # noqa: PLC0415

    parameters: dict[str, Any] = {"dimensions": SIZE}
    if encoding:
        parameters["encoding_format"] = encoding
    credential = OpenAICredential(api_key="x", base_url=url)
    return bench.ParleyEmbedder(OpenAIEmbeddingModel(credential, MODEL, parameters=parameters))


class RawSDKContender(bench.RawBatches):
    """`AsyncOpenAI.embeddings.create`, one call per batch, 4 at a time."""

    batch, size = BATCH, SIZE

    def __init__(self, url: str, encoding: str | None = None) -> None:
        super().__init__(url)
        self.options = {"encoding_format": encoding} if encoding else {}

    def connect(self, url: str) -> Any:
        from openai import AsyncOpenAI  # noqa: PLC0415

        return AsyncOpenAI(api_key="x", base_url=url, max_retries=0)

    async def one_batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embeddings.create(
            model=MODEL, input=texts, dimensions=SIZE, **self.options
        )
        return [item.embedding for item in response.data]

    async def aclose(self) -> None:
        await self.client.close()


async def float_figure(
    pair: Sequence[bench.Contender], settings: bench.EmbeddingSettings
) -> Figure:
    """One request of `FLOAT_TEXTS` texts, the vectors sent as numbers."""
    texts = [f"text number {i}" for i in range(FLOAT_TEXTS)]
    for contender in pair:
        if await contender.embed(texts) != bench.expected(len(texts), BATCH, SIZE):
            raise SystemExit(f"{contender.name} gave wrong vectors as numbers")
    runs = await interleaved(
        pair, lambda c: lambda: c.embed(texts), settings.rounds, settings.calls_per_round
    )
    row = time_figure(f"openai: {FLOAT_TEXTS} texts as numbers", "µs/call", 1e6, runs)
    return at_most([row], 1.0)[0]


async def base64_figure(settings: bench.EmbeddingSettings, url: str) -> Figure:
    """parley's time for the float row's texts as base64, over its time as numbers."""
    texts = [f"text number {i}" for i in range(FLOAT_TEXTS)]
    pair = [parley_contender(url), parley_contender(url, "float")]
    pair[1].name = "parley float"
    try:
        runs = await interleaved(
            pair, lambda c: lambda: c.embed(texts), settings.rounds, settings.calls_per_round
        )
    finally:
        await close_all(pair)
    base64_times, float_times = runs["parley"], runs["parley float"]
    ratio = sorted(b / f for b, f in zip(base64_times, float_times, strict=True))
    return Figure(
        f"openai: base64 / numbers, parley, {FLOAT_TEXTS} texts",
        "ratio",
        ratio[len(ratio) // 2],
        None,
        goal="< 1: base64 wins",
    )


async def provider_figures(settings: bench.EmbeddingSettings) -> list[Figure]:
    """The OpenAI embedding figures: one request, many requests 4 at a time, and numbers."""
    heavy = replace(
        settings, calls_per_round=max(1, settings.calls_per_round // 10), many=2 * BATCH
    )
    with ServerProcess(__file__, "--serve", path="/v1") as server:
        url = server.url()
        rows: list[Figure] = []
        for encoding in (None, "float"):
            pair: list[Any] = [parley_contender(url, encoding), RawSDKContender(url, encoding)]
            try:
                if encoding is None:
                    rows += await bench.figures(
                        pair, heavy, prefix="openai: ", batch=BATCH, size=SIZE
                    )
                else:
                    rows.append(await float_figure(pair, heavy))
            finally:
                await close_all(pair)
        rows.append(await base64_figure(heavy, url))
        return rows


if __name__ == "__main__":
    sys.exit(bench.embedding_main(__doc__, Server, provider_figures, PACKAGES, REFERENCE))
