"""`OllamaCredential`: where the Ollama server is (no key), and extra headers to send."""

from __future__ import annotations

import builtins
import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr

from parley._sync import run_sync
from parley.errors import ConfigurationError
from parley.models.credentials import Credential

if TYPE_CHECKING:
    from parley.models.base import ChatModel
    from parley.models.cards import EmbeddingModelCard, ModelCard

__all__ = ["DEFAULT_HOST", "OllamaCredential", "normalize_host"]

DEFAULT_HOST = "http://localhost:11434"
"""Where `ollama serve` listens unless told otherwise."""

_DEFAULT_PORT = 11434


def normalize_host(value: str) -> str:
    """A base URL for an Ollama host written as `OLLAMA_HOST` takes it.

    As the `ollama` SDK reads it: a bare host (`0.0.0.0`, `box:8080`, `[::1]`) gets `http://`
    and, without a port, Ollama's 11434; a URL with a scheme keeps its scheme's port.

    Raises:
        ConfigurationError: The value is not a host or URL.
    """
    text = value.strip().rstrip("/")
    bare = "://" not in text
    if bare:
        text = "http://" + text
    try:
        split = urlsplit(text)
        port = split.port
    except ValueError as exc:
        raise ConfigurationError(f"not an Ollama host: {value!r} ({exc})") from None
    if split.scheme not in ("http", "https"):
        raise ConfigurationError(f"not an Ollama host: {value!r} (use http:// or https://)")
    host = split.hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 address loses its brackets in `hostname`
        host = f"[{host}]"
    if port is None and bare:
        port = _DEFAULT_PORT
    netloc = f"{host}:{port}" if port is not None else host
    return split._replace(netloc=netloc).geturl()


class OllamaCredential(Credential):
    """An Ollama server: its host (else `OLLAMA_HOST`, else `http://localhost:11434`).

    Ollama takes no key. `headers` are sent with every request (a reverse proxy's token, for
    instance); their values are kept secret like keys, never shown in reprs or logs. The
    `ollama` SDK also sends `OLLAMA_API_KEY`, when set, as a bearer token unless `headers`
    hold an `Authorization` header (for Ollama's hosted models).

    `OllamaCredential.list_models()` gives the bundled cards of common models, and
    `list_embedding_models()` those of common embedding models; what a given server has
    pulled is listed by the instance methods `list_server_models()` and
    `list_server_embedding_models()` (and their `_sync` twins), which ask that server.

    Example:
        >>> OllamaCredential(host="http://127.0.0.1:11434").endpoint()
        'http://127.0.0.1:11434'
    """

    env_host: ClassVar[str] = "OLLAMA_HOST"

    type: Literal["ollama"] = "ollama"
    host: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)

    def endpoint(self) -> str:
        """The server's base URL: the credential's host, else `OLLAMA_HOST`, else the default.

        Raises:
            ConfigurationError: The host is not a host or URL.
        """
        return normalize_host(self.host or os.environ.get(self.env_host) or DEFAULT_HOST)

    def header_values(self) -> dict[str, str]:
        """The extra headers, their values revealed (for the HTTP client only)."""
        return {name: value.get_secret_value() for name, value in self.headers.items()}

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The Ollama chat model."""
        from parley.providers.ollama.chat import OllamaChatModel  # noqa: PLC0415

        return [OllamaChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The Ollama embedding model."""
        from parley.providers.ollama.embeddings import OllamaEmbeddingModel  # noqa: PLC0415

        return [OllamaEmbeddingModel]

    async def list_server_models(
        self, *, capabilities: bool = False, timeout: float = 30.0
    ) -> list[ModelCard]:
        """The cards of the models this server has (`/api/tags`), sorted by name.

        Each is merged with the bundled card of its family when there is one (`qwen3:8b`
        takes `qwen3`'s). With `capabilities`, each model is also asked about (`/api/show`,
        one request per model): its input and output types then follow the server's
        `capabilities` (`vision`, `audio`, `thinking`, `tools`), its context size the
        model's own, and models that cannot chat (embedding models) are left out.

        Raises:
            ModelConnectionError: The server cannot be reached.
            ModelError: The server answered with an error.
        """
        from parley.providers.ollama._cards import server_cards  # noqa: PLC0415

        return await server_cards(self, capabilities=capabilities, timeout=timeout)

    def list_server_models_sync(
        self, *, capabilities: bool = False, timeout: float = 30.0
    ) -> list[ModelCard]:
        """`list_server_models`, from synchronous code."""
        return run_sync(self.list_server_models(capabilities=capabilities, timeout=timeout))

    async def list_server_embedding_models(
        self, *, timeout: float = 30.0
    ) -> list[EmbeddingModelCard]:
        """The cards of the embedding models this server has, sorted by name.

        Asks `/api/tags`, then `/api/show` for each model (one request per model): only its
        `capabilities` tell an embedding model apart. Each card is merged with the bundled
        card of its name or family when there is one (`nomic-embed-text:v1.5` takes
        `nomic-embed-text`'s); its context size is the model's own, and for a model without
        a bundled card the most `dimensions` is its vectors' size (`embedding_length`).

        Raises:
            ModelConnectionError: The server cannot be reached.
            ModelError: The server answered with an error.
        """
        from parley.providers.ollama.embeddings._cards import server_embedding_cards  # noqa: PLC0415

        return await server_embedding_cards(self, timeout=timeout)

    def list_server_embedding_models_sync(
        self, *, timeout: float = 30.0
    ) -> list[EmbeddingModelCard]:
        """`list_server_embedding_models`, from synchronous code."""
        return run_sync(self.list_server_embedding_models(timeout=timeout))
