"""Embedding model cards for what an Ollama server has: `/api/tags`, then `/api/show`.

Only `/api/show` tells an embedding model from a chat model: its `capabilities` hold
`embedding` (`types/model/capability.go`). Each such model's card starts from the bundled
card of its name or family; its `model_info` then gives its context size
(`<architecture>.context_length`) and, for a model without a bundled card, its vectors'
size (`<architecture>.embedding_length`), the most `dimensions` can ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from parley.models.cards import EmbeddingModelCard, ModelCard, merge_parameter_schema
from parley.providers.ollama._cards import bundled_card, label_for, model_size, server_models

if TYPE_CHECKING:
    from parley.providers.ollama.credentials import OllamaCredential

__all__ = ["embedding_card_from_server", "server_embedding_cards"]


def embedding_card_from_server(
    name: str, cards: Sequence[ModelCard], capabilities: Sequence[str], model_info: Any
) -> EmbeddingModelCard | None:
    """The card of a server's model; None for a model that does not embed.

    Args:
        name: The model's name on the server.
        cards: The bundled embedding cards.
        capabilities: `/api/show`'s `capabilities`.
        model_info: `/api/show`'s `model_info`.
    """
    from parley.providers.ollama.embeddings.model import OllamaEmbeddingParameters  # noqa: PLC0415

    if "embedding" not in capabilities:
        return None
    base = bundled_card(name, cards)  # a copy: changed freely below
    card = cast("EmbeddingModelCard", base) if base else EmbeddingModelCard(name=name)
    card.name, card.label = name, label_for(name, base)
    card.context_size = model_size(model_info, "context_length") or card.context_size
    size = model_size(model_info, "embedding_length")
    if "dimensions" not in card.parameter_overrides and size is not None:
        card.parameter_overrides["dimensions"] = {"maximum": size, "default": size}
    schema = OllamaEmbeddingParameters.model_json_schema()
    card.parameter_schema = merge_parameter_schema(schema, card.parameter_overrides)
    return card


async def server_embedding_cards(
    credential: OllamaCredential, *, timeout: float
) -> list[EmbeddingModelCard]:
    """The cards of the embedding models the credential's server has, sorted by name."""
    from parley.providers.ollama.embeddings.model import OllamaEmbeddingModel  # noqa: PLC0415

    bundled = OllamaEmbeddingModel.list_models()
    found = []
    for name, shown in await server_models(credential, show=True, timeout=timeout):
        card = embedding_card_from_server(name, bundled, shown.capabilities or [], shown.modelinfo)
        if card is not None:
            found.append(card)
    return sorted(found, key=lambda card: card.name)
