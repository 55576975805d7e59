"""The openai SDK, imported on first use, and one client per event loop."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from parley.errors import ConfigurationError, MissingDependencyError
from parley.models._aiohttp import Closer, LoopClients, PooledClients
from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from parley.models.credentials import Credential

__all__ = ["OpenAIClients", "api_key", "client_pool", "new_client"]


def api_key(credential: Credential | None, *, required: bool, owner: str) -> str:
    """The key to send: the credential's (or its environment variable's).

    Args:
        credential: The model's credential.
        required: Whether a call without a key is a configuration error (local servers
            take none).
        owner: Who asks (a model class's name), for the error.

    Raises:
        ConfigurationError: No key where one is required.
    """
    key = credential.key() if isinstance(credential, APIKeyCredential) else None
    if key:
        return key
    env = getattr(type(credential), "env_key", None)
    if required:
        hint = f" or set {env}" if env else ""
        raise ConfigurationError(f"{owner} has no API key: pass one in the credential{hint}")
    # The SDK insists on a key; servers that check none ignore it (vLLM's docs use this).
    return "EMPTY"


def new_client(
    *,
    api_key: str,
    base_url: str | None,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    azure_endpoint: str | None = None,
    api_version: str | None = None,
) -> AsyncOpenAI:
    """An `AsyncOpenAI` client with the SDK's own retries off (parley's base retries).

    With `azure_endpoint` (and `api_version`), an `AsyncAzureOpenAI` on that Azure resource
    instead, `base_url` unused.

    Raises:
        MissingDependencyError: The `openai` package is not installed.
    """
    try:
        # `import openai` alone takes ~0.5 s.
        from openai import AsyncAzureOpenAI, AsyncOpenAI  # noqa: PLC0415
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai") from exc
    options: dict[str, Any] = {"timeout": timeout, "max_retries": 0, "default_headers": headers}
    if azure_endpoint is not None:
        return AsyncAzureOpenAI(
            azure_endpoint=azure_endpoint, api_key=api_key, api_version=api_version, **options
        )
    return AsyncOpenAI(api_key=api_key, base_url=base_url, **options)


def client_pool(factory: Callable[[], AsyncOpenAI]) -> LoopClients[AsyncOpenAI]:
    """One `AsyncOpenAI` per event loop, each closed with its loop (see `LoopClients`).

    Args:
        factory: Makes a client (`new_client` with the model's settings, or Azure's).
    """

    def make() -> tuple[AsyncOpenAI, Closer]:
        client = factory()
        return client, client.close  # closes its HTTP client and connections

    return LoopClients(make)


class OpenAIClients(PooledClients["AsyncOpenAI"]):
    """The connections of a model on the openai SDK: chat, embedding or speech.

    The endpoint from the credential, and one `AsyncOpenAI` per event loop made on first use;
    mixed in before the model's base class (whose no-op `aclose` it overrides).
    """

    key_required: ClassVar[bool] = True
    """Whether a call without an API key is a configuration error (local servers take none)."""
    extra_headers: ClassVar[dict[str, str]] = {}

    credential: Any
    timeout: float
    _pool: LoopClients[AsyncOpenAI] | None = None

    def endpoint(self) -> str | None:
        """The base URL requests go to."""
        credential = self.credential
        return credential.endpoint() if isinstance(credential, APIKeyCredential) else None

    def new_pool(self) -> LoopClients[AsyncOpenAI]:
        """One `AsyncOpenAI` per event loop (`ConfigurationError` without a needed API key)."""
        return client_pool(self.client_factory())

    def client_factory(self) -> Callable[[], AsyncOpenAI]:
        """How this model's SDK clients are made (settings read now, a client per loop later).

        Raises:
            ConfigurationError: No API key where the provider needs one.
        """
        options = self.client_options()
        return functools.partial(
            new_client,
            api_key=self._api_key(),
            base_url=self.endpoint(),
            timeout=self.timeout,
            headers=self.extra_headers,
            **options,
        )

    def client_options(self) -> dict[str, Any]:
        """More options of `new_client` (Azure's resource); none here."""
        return {}

    def _api_key(self) -> str:
        return api_key(self.credential, required=self.key_required, owner=type(self).__name__)
