"""DashScope embeddings: parley's `DashScopeEmbeddingModel` beside the raw `dashscope` SDK.

Against a local server that speaks DashScope's text embedding endpoint (this file, run with
`--serve`, in a process of its own; see `_embedding_bench.py`), parley and the SDK's 2.0
client (`dashscope.AsyncClient(...).embeddings.create`, as it comes: on httpx) embed the same
texts into vectors of 1,024 dimensions, taking turns round by round:

1. 10 texts (one request: text-embedding-v4's batch): time per call;
2. 1,000 texts (`--quick`: 400) in 100 (40) requests of 10, 4 at a time: time per call. The
   SDK's requests are made by the loop a caller would write (`_embedding_bench.gathered`).

Run: `python benchmarks/embeddings_dashscope.py [--quick]`; `provider_figures(settings)` gives
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

MODEL = "text-embedding-v4"
BATCH = 10
SIZE = 1024
REFERENCE = "the `dashscope` SDK's AsyncClient (2.0): embeddings.create, on httpx"
_PATH = re.compile(rb"^/api/v1/services/embeddings/text-embedding/text-embedding$")


def answer(count: int, size: int) -> bytes:
    """A text embedding answer: `count` vectors of `size`, with usage."""
    embeddings = [{"text_index": i, "embedding": vector(i, size)} for i in range(count)]
    body = {
        "output": {"embeddings": embeddings},
        "usage": {"total_tokens": 3 * count},
        "request_id": "7a9c4f2e-bench-4000-8000-000000000000",
    }
    return _http("200 OK", "application/json", json.dumps(body).encode())


class DashScopeEmbeddingServer(_OpenAIServer):
    """The OpenAI bench server's loop, DashScope's text embedding answers."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if _PATH.match(path.split(b"?", 1)[0]) is None:
            error = json.dumps({"code": "NotFound", "message": f"no route {path!r}"}).encode()
            return _http("404 Not Found", "application/json", error)
        request = json.loads(body)
        count = len(request["input"]["texts"])
        size = int((request.get("parameters") or {}).get("dimension") or SIZE)
        rendered = self._rendered.get((count, size))
        if rendered is None:
            rendered = self._rendered[(count, size)] = answer(count, size)
        return rendered


class ParleyContender:
    """parley's `DashScopeEmbeddingModel` (httpx's interface on aiohttp, raw JSON read)."""

    name = "parley"

    def __init__(self, url: str) -> None:
        from parley.providers.dashscope import DashScopeCredential  # noqa: PLC0415
        from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel  # noqa: PLC0415

        credential = DashScopeCredential(api_key="x", base_url=url)  # type: ignore[arg-type]
        self.model = DashScopeEmbeddingModel(credential, MODEL, parameters={"dimensions": SIZE})

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class RawSDKContender:
    """`dashscope.AsyncClient(...).embeddings.create`, one call per batch, 4 at a time."""

    name = "raw SDK"

    def __init__(self, url: str) -> None:
        import dashscope  # noqa: PLC0415

        self.client = dashscope.AsyncClient(api_key="x", base_url=url, max_retries=0)

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embeddings.create(model=MODEL, input=texts, dimension=SIZE)
        return [item.embedding for item in sorted(response.embeddings, key=lambda e: e.index)]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, BATCH, self._batch)

    async def aclose(self) -> None:
        await self.client.aclose()


async def provider_figures(settings: EmbeddingSettings) -> list[Figure]:
    """The DashScope embedding figures: one request, and many requests 4 at a time."""
    with BenchServer(Path(__file__).resolve()) as server:
        url = f"http://127.0.0.1:{server.port}/api/v1"
        pair: list[Any] = [ParleyContender(url), RawSDKContender(url)]
        try:
            return await figures(pair, settings, prefix="dashscope: ", batch=BATCH, size=SIZE)
        finally:
            for contender in pair:
                await contender.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    return run_provider_main(
        argv,
        doc=__doc__,
        server=DashScopeEmbeddingServer,
        figures_of=provider_figures,
        packages=("dashscope", "httpx", "httpx-aiohttp", "aiohttp"),
        reference=REFERENCE,
    )


if __name__ == "__main__":
    sys.exit(main())
