"""Embedding models named by a short spec, `provider:model`, as chat models are."""

from __future__ import annotations

from typing import Any

from parley.embeddings.base import EmbeddingModel
from parley.errors import ConfigurationError
from parley.models.credentials import CredentialFactory

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
    provider, _, name = spec.partition(":")
    credential = CredentialFactory.from_dict({"type": provider})
    classes = credential.embedding_model_classes()
    if not classes:
        raise ConfigurationError(f"provider {provider!r} offers no embedding model")
    model_cls = classes[0]
    if not name:
        cards = model_cls.list_models()
        if not cards:
            raise ConfigurationError(f"name a model for {provider!r}: '{provider}:<model>'")
        name = cards[0].name
    model: EmbeddingModel[Any] = model_cls(credential, name, **options)
    return model
