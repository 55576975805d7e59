"""Credentials: who to call and with which secret, and which model families they unlock.

Each provider's credential has a unique `type`; `CredentialFactory.from_dict` builds the
right class from stored settings. Keys are `SecretStr`: they never show in reprs or logs.
"""

from __future__ import annotations

import builtins
import os
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from parley.models.base import ChatModel
    from parley.models.cards import EmbeddingModelCard, ModelCard, TTSModelCard

__all__ = ["APIKeyCredential", "Credential", "CredentialFactory"]

_REGISTRY: dict[str, builtins.type[Credential]] = {}


class Credential(BaseModel):
    """The base of every provider's credential.

    Subclasses set a literal `type` (its registry key) and say which model classes they
    unlock; `list_models()` gathers those classes' model cards (`list_embedding_models()`, the
    embedding models').
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        kind = cls.model_fields["type"].default
        if isinstance(kind, str) and kind:
            _REGISTRY[kind] = cls

    # Seed 003's names, singular for chat and embeddings (one class each), plural for TTS. A
    # provider overrides either a singular or its plural form; each defaults to the other.

    @classmethod
    def get_chat_model_class(cls) -> builtins.type[ChatModel] | None:
        """The chat model class this credential drives (the first, when there are several)."""
        if _overrides(cls, "chat_model_classes"):
            classes = cls.chat_model_classes()
            return classes[0] if classes else None
        return None

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The chat model classes this credential can drive."""
        if _overrides(cls, "get_chat_model_class"):
            found = cls.get_chat_model_class()
            return [found] if found is not None else []
        return []

    @classmethod
    def get_embedding_model_class(cls) -> builtins.type[Any] | None:
        """The embedding model class this credential drives; None: no embedding support."""
        if _overrides(cls, "embedding_model_classes"):
            classes = cls.embedding_model_classes()
            return classes[0] if classes else None
        return None

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The embedding model classes this credential can drive."""
        if _overrides(cls, "get_embedding_model_class"):
            found = cls.get_embedding_model_class()
            return [found] if found is not None else []
        return []

    @classmethod
    def get_tts_model_classes(cls) -> list[builtins.type[Any]]:
        """The text-to-speech model classes this credential can drive (seed 003's name)."""
        if _overrides(cls, "tts_model_classes"):
            return cls.tts_model_classes()
        return []

    @classmethod
    def tts_model_classes(cls) -> list[builtins.type[Any]]:
        """The text-to-speech model classes this credential can drive."""
        if _overrides(cls, "get_tts_model_classes"):
            return cls.get_tts_model_classes()
        return []

    @classmethod
    def list_models(cls) -> list[ModelCard]:
        """The model cards of every chat model class this credential unlocks."""
        return [card for model_cls in cls.chat_model_classes() for card in model_cls.list_models()]

    @classmethod
    def list_embedding_models(cls) -> list[EmbeddingModelCard]:
        """The model cards of every embedding model class this credential unlocks."""
        return [c for model_cls in cls.embedding_model_classes() for c in model_cls.list_models()]

    @classmethod
    def list_tts_models(cls) -> list[TTSModelCard]:
        """The model cards of every text-to-speech model class this credential unlocks."""
        # Two classes of one provider (whole and realtime) may share a model's card.
        cards = {
            c.name: c for model_cls in cls.tts_model_classes() for c in model_cls.list_models()
        }
        return list(cards.values())


def _overrides(cls: builtins.type[Credential], name: str) -> bool:
    """Whether `cls` (or a parent below `Credential`) defines the classmethod `name` itself."""
    return getattr(cls, name).__func__ is not getattr(Credential, name).__func__


class APIKeyCredential(Credential):
    """A credential made of an API key and an endpoint.

    `api_key` falls back on the environment variable named by `env_key`; `base_url` on the
    one named by `env_base_url` (the provider SDK's own, so a proxy or a local server set for
    the SDK serves parley too), then on the provider's public endpoint.
    """

    env_key: ClassVar[str | None] = None
    env_base_url: ClassVar[str | None] = None
    default_base_url: ClassVar[str | None] = None

    api_key: SecretStr | None = None
    base_url: str | None = None

    def key(self) -> str | None:
        """The API key, from the credential or else the provider's environment variable."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.env_key) if self.env_key else None

    def endpoint(self) -> str | None:
        """The base URL to call: the credential's, the environment's, or the provider's."""
        if self.base_url:
            return self.base_url
        configured = os.environ.get(self.env_base_url) if self.env_base_url else None
        return configured or self.default_base_url


class CredentialFactory:
    """Builds credentials from plain data, by their `type`."""

    @staticmethod
    def known_types() -> list[str]:
        """The registered credential types."""
        _load_builtin_providers()
        return sorted(_REGISTRY)

    @staticmethod
    def credential_class(kind: str) -> builtins.type[Credential]:
        """The credential class registered for `kind`.

        Raises:
            ConfigurationError: No credential has that type.
        """
        _load_builtin_providers()
        if kind not in _REGISTRY:
            raise ConfigurationError(
                f"unknown credential type {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
            )
        return _REGISTRY[kind]

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Credential:
        """Build the credential `data["type"]` names.

        Raises:
            ConfigurationError: The type is missing or unknown, or a field is wrong.
        """
        _load_builtin_providers()
        kind = data.get("type")
        if not isinstance(kind, str) or kind not in _REGISTRY:
            raise ConfigurationError(
                f"unknown credential type {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
            )
        try:
            return _REGISTRY[kind].model_validate(data)
        except ValidationError as exc:
            raise ConfigurationError(f"bad {kind} credential: {exc}") from None


_BUILTIN_PROVIDERS = (
    "parley.providers.openai",
    "parley.providers.local",
    "parley.providers.anthropic",
    "parley.providers.dashscope",
    "parley.providers.gemini",
    "parley.providers.ollama",
)
"""The provider packages whose credentials `CredentialFactory` knows without an import."""


def _load_builtin_providers() -> None:
    # Providers register their credentials on import; import the built-in ones (cheap: they
    # import their SDKs lazily).
    import importlib  # noqa: PLC0415

    for module in _BUILTIN_PROVIDERS:
        try:
            importlib.import_module(module)
        except ImportError:  # pragma: no cover - a provider package removed from the install
            continue
