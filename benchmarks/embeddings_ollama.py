"""Ollama embeddings: parley's `OllamaEmbeddingModel` beside the raw `ollama` SDK.

Against a local server that speaks Ollama's `/api/embed` (this file, run with `--serve`, in a
process of its own; see `_embedding_bench.py`), parley and the SDK's `AsyncClient.embed` (as
it comes: on httpx's own transport) embed the same texts into vectors of 768 dimensions
(nomic-embed-text's), taking turns round by round:

1. 512 texts (one request: parley's batch for Ollama): time per call;
2. 2,048 texts in 4 requests of 512, 4 at a time: time per call. The SDK's requests are made
   by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_ollama.py [--quick]`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

import _embedding_bench as bench
from _harness import Figure, RenderingServer, http

MODEL = "nomic-embed-text"
BATCH = 512
SIZE = 768
REFERENCE = "the raw `ollama` SDK (AsyncClient.embed, on httpx's own transport)"
PACKAGES = ("ollama", "httpx", "httpx-aiohttp", "aiohttp")


def answer(model: str, count: int, size: int) -> bytes:
    """An `/api/embed` answer (`api.EmbedResponse`): `count` vectors of `size`."""
    body = {
        "model": model,
        "embeddings": [bench.vector(i, size) for i in range(count)],
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
        "prompt_eval_count": 3 * count,
    }
    return http("200 OK", "application/json; charset=utf-8", json.dumps(body).encode())


class Server(RenderingServer):
    """Ollama's `/api/embed` answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if path.split(b"?", 1)[0] != b"/api/embed":
            return http("404 Not Found", "text/plain", b"404 page not found")
        request = json.loads(body)
        key = (str(request["model"]), len(request["input"]), int(request.get("dimensions") or SIZE))
        return self.rendered(key, lambda: answer(*key))


def parley_contender(url: str) -> bench.ParleyEmbedder:
    """parley's `OllamaEmbeddingModel` (the SDK's HTTP client on aiohttp, raw JSON read)."""
    from parley.providers.ollama import OllamaCredential  # noqa: PLC0415
    from parley.providers.ollama.embeddings import OllamaEmbeddingModel  # noqa: PLC0415

    return bench.ParleyEmbedder(OllamaEmbeddingModel(OllamaCredential(host=url), MODEL))


class RawSDKContender(bench.RawBatches):
    """`AsyncClient.embed`, one call per batch, 4 at a time."""

    batch, size = BATCH, SIZE

    def connect(self, url: str) -> Any:
        from ollama import AsyncClient  # noqa: PLC0415

        return AsyncClient(host=url)

    async def one_batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embed(model=MODEL, input=texts)
        return [list(values) for values in response.embeddings]

    async def aclose(self) -> None:
        await self.client.close()


async def provider_figures(settings: bench.EmbeddingSettings) -> list[Figure]:
    """The Ollama embedding figures: one request, and many requests 4 at a time."""
    settings = replace(settings, many=4 * BATCH)
    return await bench.server_figures(__file__, parley_contender, RawSDKContender, settings)


if __name__ == "__main__":
    sys.exit(bench.embedding_main(__doc__, Server, provider_figures, PACKAGES, REFERENCE))
