"""Models named by a short spec: `provider:model`, as the CLI and settings write them."""

from __future__ import annotations

from typing import Any, Literal

from parley.errors import ConfigurationError
from parley.models.base import ChatModel
from parley.models.credentials import CredentialFactory

__all__ = ["DEFAULT_MODEL_SPEC", "build_from_spec", "model_from_spec"]

DEFAULT_MODEL_SPEC = "local"
"""The embedded default: the local model, no network and no keys."""


def model_from_spec(spec: str = DEFAULT_MODEL_SPEC, **options: Any) -> ChatModel:
    """Build a chat model from `provider` or `provider:model` (keys from the environment).

    `provider` is a credential type (`openai`, `deepseek`, `local`, ...); without a model name
    the provider's first model card is used (for `local`: the embedded model).

    Raises:
        ConfigurationError: The provider is unknown or offers no chat model.
    """
    model: ChatModel = build_from_spec(spec, "chat", options)
    return model


def build_from_spec(spec: str, kind: Literal["chat", "embedding"], options: dict[str, Any]) -> Any:
    """A `kind` model of the provider `spec` names (its first class of that kind).

    Without a model name in `spec`, the model of that class's first card.

    Raises:
        ConfigurationError: The provider is unknown or offers no model of that kind.
    """
    provider, _, name = spec.partition(":")
    credential = CredentialFactory.from_dict({"type": provider})
    classes: list[Any] = (
        credential.chat_model_classes() if kind == "chat" else credential.embedding_model_classes()
    )
    if not classes:
        raise ConfigurationError(f"provider {provider!r} offers no {kind} model")
    model_cls = classes[0]
    if not name:
        cards = model_cls.list_models()
        if not cards:
            raise ConfigurationError(f"name a model for {provider!r}: '{provider}:<model>'")
        name = cards[0].name
    return model_cls(credential, name, **options)
