"""DashScope embeddings: parley's `DashScopeEmbeddingModel` beside the raw `dashscope` SDK.

Against a local server that speaks DashScope's text embedding endpoint (this file, run with
`--serve`, in a process of its own; see `_embedding_bench.py`), parley and the SDK's 2.0
client (`dashscope.AsyncClient(...).embeddings.create`, as it comes: on httpx) embed the same
texts into vectors of 1,024 dimensions, taking turns round by round:

1. 10 texts (one request: text-embedding-v4's batch): time per call;
2. 1,000 texts (`--quick`: 400) in 100 (40) requests of 10, 4 at a time: time per call. The
   SDK's requests are made by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_dashscope.py [--quick]`.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import _embedding_bench as bench
from _harness import Figure, RenderingServer, http

MODEL = "text-embedding-v4"
BATCH = 10
SIZE = 1024
REFERENCE = "the `dashscope` SDK's AsyncClient (2.0): embeddings.create, on httpx"
PACKAGES = ("dashscope", "httpx", "httpx-aiohttp", "aiohttp")
_PATH = re.compile(rb"^/api/v1/services/embeddings/text-embedding/text-embedding$")


def answer(count: int, size: int) -> bytes:
    """A text embedding answer: `count` vectors of `size`, with usage."""
    embeddings = [{"text_index": i, "embedding": bench.vector(i, size)} for i in range(count)]
    body = {
        "output": {"embeddings": embeddings},
        "usage": {"total_tokens": 3 * count},
        "request_id": "7a9c4f2e-bench-4000-8000-000000000000",
    }
    return http("200 OK", "application/json", json.dumps(body).encode())


class Server(RenderingServer):
    """DashScope's text embedding answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if _PATH.match(path.split(b"?", 1)[0]) is None:
            error = json.dumps({"code": "NotFound", "message": f"no route {path!r}"}).encode()
            return http("404 Not Found", "application/json", error)
        request = json.loads(body)
        count = len(request["input"]["texts"])
        size = int((request.get("parameters") or {}).get("dimension") or SIZE)
        return self.rendered((count, size), lambda: answer(count, size))


def parley_contender(url: str) -> bench.ParleyEmbedder:
    """parley's `DashScopeEmbeddingModel` (httpx's interface on aiohttp, raw JSON read)."""
    from parley.providers.dashscope import DashScopeCredential  # noqa: PLC0415
    from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel  # noqa: PLC0415

    credential = DashScopeCredential(api_key="x", base_url=url)  # type: ignore[arg-type]
    return bench.ParleyEmbedder(
        DashScopeEmbeddingModel(credential, MODEL, parameters={"dimensions": SIZE})
    )


class RawSDKContender(bench.RawBatches):
    """`dashscope.AsyncClient(...).embeddings.create`, one call per batch, 4 at a time."""

    batch, size = BATCH, SIZE

    def connect(self, url: str) -> Any:
        import dashscope  # noqa: PLC0415

        return dashscope.AsyncClient(api_key="x", base_url=url, max_retries=0)

    async def one_batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embeddings.create(model=MODEL, input=texts, dimension=SIZE)
        return [item.embedding for item in sorted(response.embeddings, key=lambda e: e.index)]

    async def aclose(self) -> None:
        await self.client.aclose()


async def provider_figures(settings: bench.EmbeddingSettings) -> list[Figure]:
    """The DashScope embedding figures: one request, and many requests 4 at a time."""
    return await bench.server_figures(
        __file__, parley_contender, RawSDKContender, settings, "/api/v1"
    )


if __name__ == "__main__":
    sys.exit(bench.embedding_main(__doc__, Server, provider_figures, PACKAGES, REFERENCE))
