"""Gemini embeddings: parley's `GeminiEmbeddingModel` beside the raw `google-genai` SDK.

Against a local server that speaks the Gemini API's `batchEmbedContents` (this file, run with
`--serve`, in a process of its own; see `_embedding_bench.py`), parley and the SDK's
`client.aio.models.embed_content` (as installed: aiohttp when importable) embed the same texts
into vectors of 768 dimensions, taking turns round by round:

1. 100 texts (one request: the API's batch limit): time per call;
2. 1,000 texts (`--quick`: 400) in 10 (4) requests of 100, 4 at a time: time per call. The
   SDK's requests are made by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_gemini.py [--quick]`; `provider_figures(settings)` gives
the figures to a caller that prints them with the other providers'.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
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

MODEL = "gemini-embedding-001"
BATCH = 100
SIZE = 768
REFERENCE = "the raw `google-genai` SDK (client.aio.models.embed_content)"
_PATH = re.compile(rb"^/v1(?:beta)?/models/([^/:]+):batchEmbedContents$")


def answer(count: int, size: int) -> bytes:
    """A `batchEmbedContents` answer: `count` vectors of `size`, with usage."""
    body = {
        "embeddings": [{"values": vector(i, size)} for i in range(count)],
        "usageMetadata": {"promptTokenCount": 3 * count, "totalTokenCount": 3 * count},
    }
    return _http("200 OK", "application/json", json.dumps(body).encode())


class GeminiEmbeddingServer(_OpenAIServer):
    """The OpenAI bench server's loop, the Gemini API's `batchEmbedContents` answers."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if _PATH.match(path.split(b"?", 1)[0]) is None:
            error = json.dumps({"error": {"code": 404, "message": f"no route {path!r}"}})
            return _http("404 Not Found", "application/json", error.encode())
        requests = json.loads(body)["requests"]
        size = int(requests[0].get("outputDimensionality") or SIZE)
        rendered = self._rendered.get((len(requests), size))
        if rendered is None:
            rendered = self._rendered[(len(requests), size)] = answer(len(requests), size)
        return rendered


class ParleyContender:
    """parley's `GeminiEmbeddingModel` (the SDK's request layer, raw JSON read)."""

    name = "parley"

    def __init__(self, url: str) -> None:
        from parley.providers.gemini import GeminiCredential  # noqa: PLC0415
        from parley.providers.gemini.embeddings import GeminiEmbeddingModel  # noqa: PLC0415

        credential = GeminiCredential(api_key="x", base_url=url)  # type: ignore[arg-type]
        self.model = GeminiEmbeddingModel(credential, MODEL, parameters={"dimensions": SIZE})

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class RawSDKContender:
    """`client.aio.models.embed_content`, one call per batch, 4 at a time."""

    name = "raw SDK"

    def __init__(self, url: str) -> None:
        from google import genai  # noqa: PLC0415

        self.client = genai.Client(api_key="x", http_options={"base_url": url})
        self.config = {"output_dimensionality": SIZE}

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.aio.models.embed_content(
            model=MODEL, contents=texts, config=self.config
        )
        return [embedding.values for embedding in response.embeddings]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, BATCH, self._batch)

    async def aclose(self) -> None:
        await self.client.aio.aclose()


async def provider_figures(settings: EmbeddingSettings) -> list[Figure]:
    """The Gemini embedding figures: one request, and many requests 4 at a time."""
    with BenchServer(Path(__file__).resolve()) as server:
        url = f"http://127.0.0.1:{server.port}/"
        pair: list[Any] = [ParleyContender(url), RawSDKContender(url)]
        try:
            return await figures(pair, settings, prefix="gemini: ", batch=BATCH, size=SIZE)
        finally:
            for contender in pair:
                await contender.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    return run_provider_main(
        argv,
        doc=__doc__,
        server=GeminiEmbeddingServer,
        figures_of=provider_figures,
        packages=("google-genai", "httpx2", "aiohttp"),
        reference=REFERENCE,
    )


if __name__ == "__main__":
    sys.exit(main())
