"""Models named by a short spec: `provider:model`, as the CLI and settings write them."""

from __future__ import annotations

from typing import Any

from parley.errors import ConfigurationError
from parley.models.base import ChatModel
from parley.models.credentials import CredentialFactory

__all__ = ["DEFAULT_MODEL_SPEC", "model_from_spec"]

DEFAULT_MODEL_SPEC = "local"
"""The embedded default: the local model, no network and no keys."""


def model_from_spec(spec: str = DEFAULT_MODEL_SPEC, **options: Any) -> ChatModel:
    """Build a chat model from `provider` or `provider:model` (keys from the environment).

    `provider` is a credential type (`openai`, `deepseek`, `local`, ...); without a model name
    the provider's first model card is used (for `local`: the embedded model).

    Raises:
        ConfigurationError: The provider is unknown or offers no chat model.
    """
    provider, _, name = spec.partition(":")
    credential = CredentialFactory.from_dict({"type": provider})
    classes = credential.chat_model_classes()
    if not classes:
        raise ConfigurationError(f"provider {provider!r} offers no chat model")
    model_cls = classes[0]
    if not name:
        cards = model_cls.list_models()
        if not cards:
            raise ConfigurationError(f"name a model for {provider!r}: '{provider}:<model>'")
        name = cards[0].name
    return model_cls(credential, name, **options)
