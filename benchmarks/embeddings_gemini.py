"""Gemini embeddings: parley's `GeminiEmbeddingModel` beside the raw `google-genai` SDK.

Against a local server that speaks the Gemini API's `batchEmbedContents` (this file, run with
`--serve`, in a process of its own; see `_embedding_bench.py`), parley and the SDK's
`client.aio.models.embed_content` (as installed: aiohttp when importable) embed the same texts
into vectors of 768 dimensions, taking turns round by round:

1. 100 texts (one request: the API's batch limit): time per call;
2. 1,000 texts (`--quick`: 400) in 10 (4) requests of 100, 4 at a time: time per call. The
   SDK's requests are made by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_gemini.py [--quick]`.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import _embedding_bench as bench
from _harness import Figure, RenderingServer, http

MODEL = "gemini-embedding-001"
BATCH = 100
SIZE = 768
REFERENCE = "the raw `google-genai` SDK (client.aio.models.embed_content)"
PACKAGES = ("google-genai", "httpx2", "aiohttp")
_PATH = re.compile(rb"^/v1(?:beta)?/models/([^/:]+):batchEmbedContents$")


def answer(count: int, size: int) -> bytes:
    """A `batchEmbedContents` answer: `count` vectors of `size`, with usage."""
    body = {
        "embeddings": [{"values": bench.vector(i, size)} for i in range(count)],
        "usageMetadata": {"promptTokenCount": 3 * count, "totalTokenCount": 3 * count},
    }
    return http("200 OK", "application/json", json.dumps(body).encode())


class Server(RenderingServer):
    """The Gemini API's `batchEmbedContents` answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if _PATH.match(path.split(b"?", 1)[0]) is None:
            error = json.dumps({"error": {"code": 404, "message": f"no route {path!r}"}})
            return http("404 Not Found", "application/json", error.encode())
        requests = json.loads(body)["requests"]
        size = int(requests[0].get("outputDimensionality") or SIZE)
        return self.rendered((len(requests), size), lambda: answer(len(requests), size))


def parley_contender(url: str) -> bench.ParleyEmbedder:
    """parley's `GeminiEmbeddingModel` (the SDK's request layer, raw JSON read)."""
    from parley.providers.gemini import GeminiCredential  # noqa: PLC0415
    from parley.providers.gemini.embeddings import GeminiEmbeddingModel  # noqa: PLC0415

    credential = GeminiCredential(api_key="x", base_url=url)  # type: ignore[arg-type]
    return bench.ParleyEmbedder(
        GeminiEmbeddingModel(credential, MODEL, parameters={"dimensions": SIZE})
    )


class RawSDKContender(bench.RawBatches):
    """`client.aio.models.embed_content`, one call per batch, 4 at a time."""

    batch, size = BATCH, SIZE

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.config = {"output_dimensionality": SIZE}

    def connect(self, url: str) -> Any:
        from google import genai  # noqa: PLC0415

        return genai.Client(api_key="x", http_options={"base_url": url})

    async def one_batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.aio.models.embed_content(
            model=MODEL, contents=texts, config=self.config
        )
        return [embedding.values for embedding in response.embeddings]

    async def aclose(self) -> None:
        await self.client.aio.aclose()


async def provider_figures(settings: bench.EmbeddingSettings) -> list[Figure]:
    """The Gemini embedding figures: one request, and many requests 4 at a time."""
    return await bench.server_figures(__file__, parley_contender, RawSDKContender, settings, "/")


if __name__ == "__main__":
    sys.exit(bench.embedding_main(__doc__, Server, provider_figures, PACKAGES, REFERENCE))
