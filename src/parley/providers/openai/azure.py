"""Azure OpenAI: OpenAI's Chat Completions on an Azure resource, through `AsyncAzureOpenAI`.

Azure serves a model under a deployment name the resource's owner chose: requests go to
`{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...` with the key in
an `api-key` header (the SDK builds both). The model name given to parley is the deployment.

Example:
    >>> credential = AzureOpenAICredential(
    ...     api_key="...", base_url="https://my-resource.openai.azure.com", api_version="2024-06-01"
    ... )
    >>> model = AzureOpenAIChatModel(credential, "my-gpt-4o-deployment")
"""

from __future__ import annotations

import builtins
import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from parley.errors import ConfigurationError
from parley.models.credentials import APIKeyCredential, Credential
from parley.providers.openai.chat import OpenAIChatModel

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["AzureOpenAIChatModel", "AzureOpenAICredential"]


class AzureOpenAICredential(APIKeyCredential):
    """An Azure OpenAI resource: its key, endpoint and API version.

    Each falls back on the environment variable the openai SDK reads: `api_key` on
    `AZURE_OPENAI_API_KEY`, `base_url` (the resource's endpoint,
    `https://NAME.openai.azure.com`, without `/openai`) on `AZURE_OPENAI_ENDPOINT`,
    `api_version` on `OPENAI_API_VERSION`. All three are required.
    """

    env_key: ClassVar[str | None] = "AZURE_OPENAI_API_KEY"
    env_base_url: ClassVar[str | None] = "AZURE_OPENAI_ENDPOINT"
    env_api_version: ClassVar[str] = "OPENAI_API_VERSION"

    type: Literal["azure_openai"] = "azure_openai"
    api_version: str | None = None

    def version(self) -> str | None:
        """The API version, from the credential or else `OPENAI_API_VERSION`."""
        return self.api_version or os.environ.get(self.env_api_version) or None

    def require(self, owner: str) -> tuple[str, str]:
        """The endpoint and API version, which a model of `owner` cannot do without.

        Raises:
            ConfigurationError: Either is missing, here and in the environment.
        """
        endpoint, version = self.endpoint(), self.version()
        if not endpoint:
            raise ConfigurationError(
                f"{owner} needs the resource's endpoint: pass AzureOpenAICredential("
                f"base_url='https://NAME.openai.azure.com') or set {self.env_base_url}"
            )
        if not version:
            raise ConfigurationError(
                f"{owner} needs the API version: pass AzureOpenAICredential("
                f"api_version='2024-06-01') or set {self.env_api_version}"
            )
        return endpoint, version

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """Azure's Chat Completions model."""
        return [AzureOpenAIChatModel]


class AzureOpenAIChatModel(OpenAIChatModel):
    """A model deployed on Azure OpenAI; the model name is the deployment's.

    As `OpenAIChatModel`, but the client is `AsyncAzureOpenAI`. `max_tokens` keeps its name
    and streams ask for no usage (`stream_options`): API versions before 2024-09 refuse
    `max_completion_tokens` and `stream_options` as unrecognized arguments.
    """

    provider: ClassVar[str] = "azure_openai"
    credential_class: ClassVar[type[Credential] | None] = AzureOpenAICredential
    cards_location: ClassVar[str | None] = None  # deployments have their owners' names
    max_tokens_field: ClassVar[str] = "max_tokens"
    stream_usage: ClassVar[bool] = False

    def _check_credential(self, credential: Credential | None) -> Credential | None:
        checked = super()._check_credential(credential)
        assert isinstance(checked, AzureOpenAICredential)  # the base built or checked it
        checked.require(type(self).__name__)
        return checked

    def client_options(self) -> dict[str, Any]:
        """The credential's resource and API version: the clients are `AsyncAzureOpenAI`.

        Raises:
            ConfigurationError: No endpoint or API version.
        """
        credential = self.credential
        assert isinstance(credential, AzureOpenAICredential)  # checked when built
        endpoint, version = credential.require(type(self).__name__)
        return {"azure_endpoint": endpoint, "api_version": version}
