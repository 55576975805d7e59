"""`/v1/embeddings` answers as vectors: OpenAI's `list` of `embedding` items.

An answer is `{"object": "list", "data": [{"object": "embedding", "index": i, "embedding":
...}], "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}` (the SDK's
`CreateEmbeddingResponse`). Each `embedding` is a list of numbers, or with
`encoding_format: base64` the vector's little-endian float32 bytes in base64: about a
quarter of the bytes to send and to parse. The items may come in any order; `index` says
whose each is. A server that ignores `encoding_format` answers numbers either way, so both
forms are read whatever was asked.
"""

from __future__ import annotations

import binascii
import sys
from array import array
from typing import Any

from parley.embeddings.base import EmbeddingBatch
from parley.errors import ModelOutputError
from parley.providers.openai._errors import error_from_payload

__all__ = ["read_embeddings"]


def read_embeddings(body: dict[str, Any], *, model: str, provider: str) -> EmbeddingBatch:
    """The vectors (in input order) and the token count of one answer.

    Raises:
        ModelOutputError: The answer is not a list of embeddings.
        ModelError: The server put an error in the body (with a 200 status).
    """
    data = body.get("data")
    if not isinstance(data, list):
        if "error" in body:
            raise error_from_payload(body["error"], model=model, provider=provider)
        raise _bad(f"an answer without a `data` list: {str(body)[:200]}", model, provider)
    vectors = _in_order(data, model, provider)
    usage = body.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return EmbeddingBatch(
        _decoded(vectors, model, provider), tokens if isinstance(tokens, int) else None
    )


def _bad(what: str, model: str, provider: str) -> ModelOutputError:
    return ModelOutputError(f"{provider} sent {what}", model=model, provider=provider)


def _in_order(data: list[Any], model: str, provider: str) -> list[Any]:
    """Each item's `embedding`, placed by its `index` (its position when it has none)."""
    vectors: list[Any] = [None] * len(data)
    for position, item in enumerate(data):
        if not isinstance(item, dict) or item.get("embedding") is None:
            raise _bad(f"an item without an `embedding`: {str(item)[:200]}", model, provider)
        index = item.get("index", position)
        if not isinstance(index, int) or not 0 <= index < len(data) or vectors[index] is not None:
            raise _bad(f"items whose indexes are not 0 to {len(data) - 1}", model, provider)
        vectors[index] = item["embedding"]
    return vectors


def _decoded(vectors: list[Any], model: str, provider: str) -> Any:
    """The vectors as lists, or as one 2-D array (decoded from base64)."""
    if all(isinstance(v, list) for v in vectors):
        return vectors
    if not all(isinstance(v, str) for v in vectors):
        raise _bad("embeddings that are neither lists of numbers nor base64", model, provider)
    try:
        raw = [binascii.a2b_base64(v, strict_mode=True) for v in vectors]
    except binascii.Error as exc:
        raise _bad(f"an embedding that is not base64 ({exc})", model, provider) from None
    size = len(raw[0]) if raw else 0
    if size % 4 or any(len(r) != size for r in raw):
        raise _bad("base64 embeddings that are not float32 vectors of one size", model, provider)
    return _float32_rows(b"".join(raw), len(raw), size // 4)


def _float32_rows(data: bytes, rows: int, columns: int) -> Any:
    """Little-endian float32 bytes as `rows` vectors: a numpy array, else lists."""
    try:
        # Optional: 1.7x faster than `array` below (2,048 vectors of 1,536: 139 ms, 235 ms).
        import numpy as np  # noqa: PLC0415
    except ImportError:
        flat = array("f", data)
        if sys.byteorder == "big":
            flat.byteswap()
        values = flat.tolist()
        return [values[i : i + columns] for i in range(0, rows * columns, columns)]
    return np.frombuffer(data, dtype="<f4").reshape(rows, columns)
