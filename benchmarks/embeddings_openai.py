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

Run: `python benchmarks/embeddings_openai.py [--quick]`; `provider_figures(settings)` gives
the figures to a caller that prints them with the other providers'.
"""

from __future__ import annotations

import base64
import json
import struct
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
    Contender,
    EmbeddingSettings,
    expected,
    figures,
    gathered,
    run_provider_main,
    vector,
)
from _openai_bench_server import Server as _OpenAIServer  # noqa: E402
from _openai_bench_server import _http  # noqa: E402
from models import Figure, interleaved, time_figure  # noqa: E402

MODEL = "text-embedding-3-small"
BATCH = 2048
SIZE = 1536
FLOAT_TEXTS = 512
REFERENCE = "the raw `openai` SDK (AsyncOpenAI.embeddings.create; base64 decoded with numpy)"


def answer(model: str, count: int, size: int, encoding: str) -> bytes:
    """A `/v1/embeddings` list: `count` vectors of `size`, as base64 float32 or numbers."""
    data = []
    for i in range(count):
        values = vector(i, size)
        embedding: Any = values
        if encoding == "base64":
            embedding = base64.b64encode(struct.pack(f"<{size}f", *values)).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": embedding})
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    body = {"object": "list", "data": data, "model": model, "usage": usage}
    return _http("200 OK", "application/json", json.dumps(body).encode())


class OpenAIEmbeddingServer(_OpenAIServer):
    """The OpenAI bench server's loop, `/v1/embeddings` answers."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if path.split(b"?", 1)[0] != b"/v1/embeddings":
            error = json.dumps({"error": {"message": f"no route {path!r}"}}).encode()
            return _http("404 Not Found", "application/json", error)
        request = json.loads(body)
        # OpenAI's own default is numbers; the SDK asks for base64 unless told.
        key = (
            str(request["model"]),
            len(request["input"]),
            int(request.get("dimensions") or SIZE),
            str(request.get("encoding_format") or "float"),
        )
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = self._rendered[key] = answer(*key)
        return rendered


class ParleyContender:
    """parley's `OpenAIEmbeddingModel` (the SDK's raw response, parley's decoding)."""

    name = "parley"

    def __init__(self, url: str, encoding: str | None = None) -> None:
        from parley.providers.openai import OpenAICredential  # noqa: PLC0415
        from parley.providers.openai.embeddings import OpenAIEmbeddingModel  # noqa: PLC0415

        parameters: dict[str, Any] = {"dimensions": SIZE}
        if encoding:
            parameters["encoding_format"] = encoding
        credential = OpenAICredential(api_key="x", base_url=url)
        self.model = OpenAIEmbeddingModel(credential, MODEL, parameters=parameters)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return (await self.model(texts)).embeddings

    async def aclose(self) -> None:
        await self.model.aclose()


class RawSDKContender:
    """`AsyncOpenAI.embeddings.create`, one call per batch, 4 at a time."""

    name = "raw SDK"

    def __init__(self, url: str, encoding: str | None = None) -> None:
        from openai import AsyncOpenAI  # noqa: PLC0415

        self.client = AsyncOpenAI(api_key="x", base_url=url, max_retries=0)
        self.options = {"encoding_format": encoding} if encoding else {}

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        response = await self.client.embeddings.create(
            model=MODEL, input=texts, dimensions=SIZE, **self.options
        )
        return [item.embedding for item in response.data]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await gathered(texts, BATCH, self._batch)

    async def aclose(self) -> None:
        await self.client.close()


async def float_figure(pair: Sequence[Contender], settings: EmbeddingSettings) -> Figure:
    """One request of `FLOAT_TEXTS` texts, the vectors sent as numbers."""
    texts = [f"text number {i}" for i in range(FLOAT_TEXTS)]
    for contender in pair:
        if await contender.embed(texts) != expected(len(texts), BATCH, SIZE):
            raise SystemExit(f"{contender.name} gave wrong vectors as numbers")
    runs = await interleaved(
        pair, lambda c: lambda: c.embed(texts), settings.rounds, settings.calls_per_round
    )
    row = time_figure(f"openai: {FLOAT_TEXTS} texts as numbers", "µs/call", 1e6, runs)
    row.goal, row.met = "ratio <= 1.0", (row.ratio or 0) <= 1.0
    return row


async def base64_figure(settings: EmbeddingSettings, url: str) -> Figure:
    """parley's time for the float row's texts as base64, over its time as numbers."""
    texts = [f"text number {i}" for i in range(FLOAT_TEXTS)]
    pair: list[Any] = [ParleyContender(url), ParleyContender(url, "float")]
    pair[1].name = "parley float"
    try:
        runs = await interleaved(
            pair, lambda c: lambda: c.embed(texts), settings.rounds, settings.calls_per_round
        )
    finally:
        for contender in pair:
            await contender.aclose()
    base64_times, float_times = runs["parley"], runs["parley float"]
    ratio = sorted(b / f for b, f in zip(base64_times, float_times, strict=True))
    return Figure(
        f"openai: base64 / numbers, parley, {FLOAT_TEXTS} texts",
        "ratio",
        ratio[len(ratio) // 2],
        None,
        goal="< 1: base64 wins",
    )


async def provider_figures(settings: EmbeddingSettings) -> list[Figure]:
    """The OpenAI embedding figures: one request, many requests 4 at a time, and numbers."""
    heavy = replace(
        settings, calls_per_round=max(1, settings.calls_per_round // 10), many=2 * BATCH
    )
    with BenchServer(Path(__file__).resolve()) as server:
        url = f"http://127.0.0.1:{server.port}/v1"
        rows: list[Figure] = []
        for encoding in (None, "float"):
            pair: list[Any] = [ParleyContender(url, encoding), RawSDKContender(url, encoding)]
            try:
                if encoding is None:
                    rows += await figures(pair, heavy, prefix="openai: ", batch=BATCH, size=SIZE)
                else:
                    rows.append(await float_figure(pair, heavy))
            finally:
                for contender in pair:
                    await contender.aclose()
        rows.append(await base64_figure(heavy, url))
        return rows


def main(argv: Sequence[str] | None = None) -> int:
    return run_provider_main(
        argv,
        doc=__doc__,
        server=OpenAIEmbeddingServer,
        figures_of=provider_figures,
        packages=("openai", "httpx2", "numpy", "jiter"),
        reference=REFERENCE,
    )


if __name__ == "__main__":
    sys.exit(main())
