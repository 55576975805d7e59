"""Ollama embeddings: parley's `OllamaEmbeddingModel` beside the raw `ollama` SDK.

Against a local server that speaks Ollama's `/api/embed` (this file, run with `--serve`, in a
process of its own; see `_embedding_bench.py`), parley and the SDK's `AsyncClient.embed` (as
it comes: on httpx's own transport) embed the same texts into vectors of 768 dimensions
(nomic-embed-text's), taking turns round by round:

1. 512 texts (one request: parley's batch for Ollama): time per call;
2. 2,048 texts in 4 requests of 512, 4 at a time: time per call. The SDK's requests are made
   by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_ollama.py [--quick]`; `provider_figures(settings)` gives
the figures to a caller that prints them with the other providers'.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _embedding_bench import (  # noqa: E402  (the shared helpers, beside this file)
    BenchServer,
    EmbeddingSettings,
    figures,
    gathered,
    run_provider_main,
    vector,
)
from _openai_bench_server import Server as _OpenAIServer  # noqa: E402
from _openai_bench_server import _http  # noqa: E402
from models import Figure  # noqa: E402

MODEL = "nomic-embed-text"
BATCH = 512
SIZE = 768
REFERENCE = "the raw `ollama` SDK (AsyncClient.embed, on httpx's own transport)"


def answer(model: str, count: int, size: int) -> bytes:
    """An `/api/embed` answer (`api.EmbedResponse`): `count` vectors of `size`."""
    body = {
        "model": model,
        "embeddings": [vector(i, size) for i in range(count)],
        "total_duration": 14_143_917,
        "load_duration": 1_019_500,
        "prompt_eval_count": 3 * count,
    }
    return _http("200 OK", "application/json; charset=utf-8", json.dumps(body).encode())


class OllamaEmbeddingServer(_OpenAIServer):
    """The OpenAI bench server's loop, Ollama's `/api/embed` answers."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if path.split(b"?", 1)[0] != b"/api/embed":
            return _http("404 Not Found", "text/plain", b"404 page not found")
        request = json.loads(body)
        key = (str(request["model"]), len(request["input"]), int(request.get("dimensions") or SIZE))
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = self._rendered[key] = answer(*key)
        return rendered


class ParleyContender:
    """parley's `OllamaEmbeddingModel` (the SDK's HTTP client on aiohttp, raw JSON read)."""

    name = "parley"

    def __init__(self, url: str) -> None:
        from parley.providers.ollama import OllamaCredential  # noqa: PLC0415
        from parley.providers.ollama.embeddings import OllamaEmbeddingModel  # noqa: PLC0415

        self.model = OllamaEmbeddingModel(OllamaCredential(host=url), MODEL)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class RawSDKContender:
    """`AsyncClient.embed`, one call per batch, 4 at a time."""

    name = "raw SDK"

    def __init__(self, url: str) -> None:
        from ollama import AsyncClient  # noqa: PLC0415

        self.client = AsyncClient(host=url)

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embed(model=MODEL, input=texts)
        return [list(values) for values in response.embeddings]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, BATCH, self._batch)

    async def aclose(self) -> None:
        await self.client.close()


async def provider_figures(settings: EmbeddingSettings) -> list[Figure]:
    """The Ollama embedding figures: one request, and many requests 4 at a time."""
    settings = replace(settings, many=4 * BATCH)
    with BenchServer(Path(__file__).resolve()) as server:
        url = f"http://127.0.0.1:{server.port}"
        pair: list[Any] = [ParleyContender(url), RawSDKContender(url)]
        try:
            return await figures(pair, settings, prefix="ollama: ", batch=BATCH, size=SIZE)
        finally:
            for contender in pair:
                await contender.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    return run_provider_main(
        argv,
        doc=__doc__,
        server=OllamaEmbeddingServer,
        figures_of=provider_figures,
        packages=("ollama", "httpx", "httpx-aiohttp", "aiohttp"),
        reference=REFERENCE,
    )


if __name__ == "__main__":
    sys.exit(main())
