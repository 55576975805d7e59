"""Embedding models: texts (and, for multimodal models, media) to dense vectors.

    response = await model(["a first text", "a second text"])
    response.embeddings        # one vector per input, in input order

Every provider's model builds on `EmbeddingModel` (batching, bounded concurrency, per-batch
retry, caches); see `parley.embeddings.base`. Caches are in `parley.embeddings.cache`
(`FileEmbeddingCache`, `SQLiteEmbeddingCache`). The providers are packages of their own,
imported when used: `parley.providers.dashscope.embeddings`,
`parley.providers.gemini.embeddings`, and the embedded local model, on no network and no key,
`parley.providers.local.embeddings` (extra `embeddings`).
"""

from parley.embeddings.base import (
    BatchLimits,
    DataBlock,
    Embedding,
    EmbeddingBatch,
    EmbeddingInput,
    EmbeddingModel,
    EmbeddingParameters,
    EmbeddingResponse,
    EmbeddingUsage,
)
from parley.embeddings.cache import EmbeddingCache, FileEmbeddingCache, SQLiteEmbeddingCache
from parley.models.cards import EmbeddingModelCard

__all__ = [
    "BatchLimits",
    "DataBlock",
    "Embedding",
    "EmbeddingBatch",
    "EmbeddingCache",
    "EmbeddingInput",
    "EmbeddingModel",
    "EmbeddingModelCard",
    "EmbeddingParameters",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "FileEmbeddingCache",
    "SQLiteEmbeddingCache",
]
