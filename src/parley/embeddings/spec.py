"""Embedding models named by a short spec, `provider:model`, as chat models are."""

from __future__ import annotations

from typing import Any

from parley.embeddings.base import EmbeddingModel
from parley.models.spec import build_from_spec

__all__ = ["DEFAULT_EMBEDDING_SPEC", "embedding_model_from_spec"]

DEFAULT_EMBEDDING_SPEC = "local"
"""The embedded default: the local embedding model, offline."""


def embedding_model_from_spec(
    spec: str = DEFAULT_EMBEDDING_SPEC, **options: Any
) -> EmbeddingModel[Any]:
    """Build an embedding model from `provider` or `provider:model` (keys from the environment).

    Without a model name the provider's first embedding card is used (for `local`: the
    embedded model).

    Raises:
        ConfigurationError: The provider is unknown or offers no embedding model.
    """
    model: EmbeddingModel[Any] = build_from_spec(spec, "embedding", options)
    return model
