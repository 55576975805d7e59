"""Gemini's embedding calls on the wire, as `google-genai`'s `models.embed_content` sends them.

The SDK (3.x, `models.py`) picks the call by backend and model, and so does parley:

- Gemini API: `POST models/{model}:batchEmbedContents` with `{"requests": [{"model",
  "content", "taskType", "title", "outputDimensionality"}]}`, answered by `{"embeddings":
  [{"values"}], "usageMetadata"}`;
- Vertex AI, Gemini models: `POST publishers/google/models/{model}:batchEmbedContents` with
  `{"requests": [{"content", "embedContentConfig": {"taskType", "title",
  "outputDimensionality", "autoTruncate"}}]}`, answered the same way (each embedding may carry
  `statistics`);
- Vertex AI, other models (`text-embedding-005`, `text-multilingual-embedding-002`): `POST
  publishers/google/models/{model}:predict` with `{"instances": [{"content", "task_type",
  "title"}], "parameters": {"outputDimensionality", "autoTruncate"}}`, answered by
  `{"predictions": [{"embeddings": {"values", "statistics": {"token_count"}}}]}`; text only.

Each input is one `content` of one part: a text, or on multimodal models (gemini-embedding-2)
an image, audio, video or PDF as `inlineData` (base64, local files read) or `fileData` (a
URI). The SDK would merge a list of strings and parts into one content, hence one vector.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from parley.embeddings.base import EmbeddingBatch, EmbeddingInput
from parley.errors import ModelOutputError
from parley.messages import TextBlock
from parley.providers.gemini._media import media_part

__all__ = [
    "batch_body",
    "is_multimodal_model",
    "part",
    "predict_body",
    "read_batch",
    "read_predict",
    "uses_predict",
]

_CONFIG_NAMES = {
    "task_type": "taskType",
    "title": "title",
    "dimensions": "outputDimensionality",
    "auto_truncate": "autoTruncate",
}
_TEXT_ONLY = re.compile(r"^(gemini-embedding-001|gemini-embedding-exp)")


def is_multimodal_model(name: str) -> bool:
    """Whether a model embeds media too: a Gemini embedding model after 001 (the SDK's rule)."""
    model_id = name.rsplit("/", 1)[-1]
    return "gemini" in model_id and not _TEXT_ONLY.match(model_id)


def uses_predict(name: str, *, vertexai: bool) -> bool:
    """Whether a model is called through Vertex AI's `predict` (its non-Gemini models)."""
    model_id = name.rsplit("/", 1)[-1]
    return vertexai and "gemini" not in model_id and "maas" not in model_id


def part(item: EmbeddingInput) -> dict[str, Any]:
    """The one part of an input's content.

    Raises:
        MessageError: A local file cannot be read.
    """
    if isinstance(item, str):
        return {"text": item}
    if isinstance(item, TextBlock):
        return {"text": item.text}
    return media_part(item)


def config(fields: dict[str, Any]) -> dict[str, Any]:
    """The embedding config's wire fields (camelCase) for parley's parameters."""
    return {_CONFIG_NAMES[name]: value for name, value in fields.items()}


def batch_body(
    items: Sequence[EmbeddingInput], fields: dict[str, Any], *, model_path: str, vertexai: bool
) -> dict[str, Any]:
    """A `batchEmbedContents` body: one request per input."""
    wire = config(fields)
    requests = []
    for item in items:
        request: dict[str, Any] = {"content": {"parts": [part(item)]}}
        if vertexai:
            if wire:
                request["embedContentConfig"] = wire
        else:
            request.update(wire)
            request["model"] = model_path
        requests.append(request)
    return {"requests": requests}


def predict_body(texts: Sequence[str], fields: dict[str, Any]) -> dict[str, Any]:
    """A Vertex AI `predict` body: one instance per text, the sizes in `parameters`."""
    instance = {k: fields[k] for k in ("task_type", "title") if k in fields}
    sizes = ("dimensions", "auto_truncate")
    parameters = {_CONFIG_NAMES[k]: fields[k] for k in sizes if k in fields}
    body: dict[str, Any] = {"instances": [{"content": text, **instance} for text in texts]}
    if parameters:
        body["parameters"] = parameters
    return body


def _vector(embedding: Any, index: int, *, model: str) -> list[float]:
    values = embedding.get("values") if isinstance(embedding, dict) else None
    if not isinstance(values, list):
        raise ModelOutputError(
            f"gemini sent no values for input {index}: {str(embedding)[:200]}",
            model=model,
            provider="gemini",
        )
    return values


def _counted(size: int, found: Any, *, model: str, where: str) -> list[Any]:
    if not isinstance(found, list) or len(found) != size:
        count = len(found) if isinstance(found, list) else "no"
        raise ModelOutputError(
            f"gemini sent {count} {where} for {size} inputs", model=model, provider="gemini"
        )
    return found


def _token_count(statistics: Any) -> int | None:
    if not isinstance(statistics, dict):
        return None
    count = statistics.get("tokenCount", statistics.get("token_count"))
    return int(count) if isinstance(count, int | float) else None


def _sum(counts: list[int | None]) -> int | None:
    return None if not counts or None in counts else sum(c for c in counts if c is not None)


def read_batch(body: dict[str, Any], size: int, *, model: str) -> EmbeddingBatch:
    """The vectors of a `batchEmbedContents` answer, in request order, and its tokens.

    Raises:
        ModelOutputError: Not one vector for each input.
    """
    found = _counted(size, body.get("embeddings"), model=model, where="embeddings")
    vectors = [_vector(embedding, i, model=model) for i, embedding in enumerate(found)]
    usage = body.get("usageMetadata")
    tokens = usage.get("promptTokenCount") if isinstance(usage, dict) else None
    if not isinstance(tokens, int):  # Vertex AI may count per embedding instead
        tokens = _sum([_token_count(e.get("statistics")) for e in found])
    return EmbeddingBatch(vectors, tokens=tokens)


def read_predict(body: dict[str, Any], size: int, *, model: str) -> EmbeddingBatch:
    """The vectors of a Vertex AI `predict` answer, in instance order, and its tokens.

    Raises:
        ModelOutputError: Not one vector for each input.
    """
    found = _counted(size, body.get("predictions"), model=model, where="predictions")
    embeddings = [p.get("embeddings") if isinstance(p, dict) else None for p in found]
    vectors = [_vector(embedding, i, model=model) for i, embedding in enumerate(embeddings)]
    tokens = _sum([_token_count(e.get("statistics")) for e in embeddings if isinstance(e, dict)])
    return EmbeddingBatch(vectors, tokens=tokens)
