"""Credentials for OpenAI and for any server that speaks its wire format."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from parley.errors import ConfigurationError
from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from parley.models.base import ChatModel
    from parley.models.cards import ModelCard

__all__ = ["OpenAICompatibleCredential", "OpenAICredential"]


class OpenAICredential(APIKeyCredential):
    """An OpenAI API key (else `OPENAI_API_KEY`) and endpoint (else OpenAI's public one).

    Example:
        >>> OpenAICredential(api_key="sk-test")
        OpenAICredential(type='openai', api_key=SecretStr('**********'), base_url=None)
    """

    env_key: ClassVar[str | None] = "OPENAI_API_KEY"
    env_base_url: ClassVar[str | None] = "OPENAI_BASE_URL"  # the openai SDK's own
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"

    type: Literal["openai"] = "openai"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """Chat Completions and the Responses API."""
        from parley.providers.openai.chat import OpenAIChatModel  # noqa: PLC0415
        from parley.providers.openai.responses import OpenAIResponseModel  # noqa: PLC0415

        return [OpenAIChatModel, OpenAIResponseModel]

    @classmethod
    def list_models(cls) -> list[ModelCard]:
        """OpenAI's model cards (both APIs serve the same models, so each card once)."""
        from parley.providers.openai.chat import OpenAIChatModel  # noqa: PLC0415

        return OpenAIChatModel.list_models()

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The embeddings API."""
        from parley.providers.openai.embeddings import OpenAIEmbeddingModel  # noqa: PLC0415

        return [OpenAIEmbeddingModel]

    @classmethod
    def tts_model_classes(cls) -> list[builtins.type[Any]]:
        """The speech endpoint (`/v1/audio/speech`)."""
        from parley.providers.openai.speech import OpenAITTSModel  # noqa: PLC0415

        return [OpenAITTSModel]


class OpenAICompatibleCredential(APIKeyCredential):
    """A server that speaks OpenAI's Chat Completions: vLLM, llama.cpp's server, OpenRouter...

    `base_url` (e.g. `http://localhost:8000/v1`) is required, given here or in the
    `OPENAI_COMPATIBLE_BASE_URL` environment variable; models refuse a credential without
    one. The key is optional (`OPENAI_COMPATIBLE_API_KEY`), as local servers often take none.
    """

    env_key: ClassVar[str | None] = "OPENAI_COMPATIBLE_API_KEY"
    env_base_url: ClassVar[str | None] = "OPENAI_COMPATIBLE_BASE_URL"

    type: Literal["openai_compatible"] = "openai_compatible"

    def require_endpoint(self, owner: str) -> str:
        """The server's URL, which a model of `owner` (a class's name) cannot do without.

        Raises:
            ConfigurationError: No URL, here or in `OPENAI_COMPATIBLE_BASE_URL`.
        """
        found = self.endpoint()
        if not found:
            raise ConfigurationError(
                f"{owner} needs the server's URL: pass "
                "OpenAICompatibleCredential(base_url=...) or set OPENAI_COMPATIBLE_BASE_URL"
            )
        return found

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The generic OpenAI-compatible chat model."""
        from parley.providers.openai.compatible import OpenAICompatibleChatModel  # noqa: PLC0415

        return [OpenAICompatibleChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The generic OpenAI-compatible embedding model."""
        from parley.providers.openai.embeddings import OpenAICompatibleEmbeddingModel  # noqa: PLC0415

        return [OpenAICompatibleEmbeddingModel]
