"""`GeminiCredential`: the Gemini API with an API key, or Vertex AI through the same SDK."""

from __future__ import annotations

import builtins
import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import SecretStr, model_validator

from parley.errors import ConfigurationError
from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["GeminiCredential"]

_ENV_KEYS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
"""Where the key is looked for, in the order `google-genai` itself reads them (it prefers
`GOOGLE_API_KEY` when both are set)."""


class GeminiCredential(APIKeyCredential):
    """Who to call at Google: the Gemini API (an API key) or Vertex AI (a project).

    - Gemini API (the default): `api_key`, else `GOOGLE_API_KEY`, else `GEMINI_API_KEY`.
    - Vertex AI (`vertexai=True`): `project` and `location` (else `GOOGLE_CLOUD_PROJECT` and
      `GOOGLE_CLOUD_LOCATION`, location `global` by default) with Google's application
      default credentials, or a fixed OAuth `access_token`; or Vertex's express mode, an
      `api_key` alone.

    `base_url` replaces Google's endpoint (a proxy, or a local test server); the SDK still
    adds its API version and, on Vertex, the `projects/.../locations/...` path.

    Example:
        >>> GeminiCredential(api_key="AIza-test").key()
        'AIza-test'
        >>> GeminiCredential(vertexai=True, project="my-project", location="europe-west4")
    """

    env_key: ClassVar[str | None] = "GOOGLE_API_KEY"

    type: Literal["gemini"] = "gemini"
    vertexai: bool = False
    project: str | None = None
    location: str | None = None
    access_token: SecretStr | None = None
    """Vertex AI: a bearer token to send instead of the application default credentials."""
    api_version: str | None = None
    """The API version in the URL (the SDK's default: `v1beta`, `v1beta1` on Vertex)."""

    @model_validator(mode="after")
    def _check_backend(self) -> GeminiCredential:
        if not self.vertexai and (self.project or self.location or self.access_token):
            raise ConfigurationError(
                "project, location and access_token are for Vertex AI: set vertexai=True"
            )
        return self

    def key(self) -> str | None:
        """The API key: the credential's, else `GOOGLE_API_KEY`, else `GEMINI_API_KEY`.

        On Vertex AI with a project, the environment's key is not used (the SDK makes the
        same choice): the project's credentials authenticate.
        """
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.vertexai and (self.vertex_project() or self.access_token):
            return None
        return next((os.environ[name] for name in _ENV_KEYS if os.environ.get(name)), None)

    def vertex_project(self) -> str | None:
        """The Vertex AI project: the credential's, else `GOOGLE_CLOUD_PROJECT`."""
        return self.project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None

    def vertex_location(self) -> str:
        """The Vertex AI location: the credential's, else `GOOGLE_CLOUD_LOCATION`, else global."""
        return self.location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"

    def endpoint(self) -> str | None:
        """The base URL: the credential's, the SDK's variable, else Google's for the backend.

        The variables are google-genai's own: `GOOGLE_GEMINI_BASE_URL`, and on Vertex AI
        `GOOGLE_VERTEX_BASE_URL`.
        """
        if self.base_url:
            return self.base_url
        variable = "GOOGLE_VERTEX_BASE_URL" if self.vertexai else "GOOGLE_GEMINI_BASE_URL"
        if configured := os.environ.get(variable):
            return configured
        if not self.vertexai:
            return "https://generativelanguage.googleapis.com/"
        location = self.vertex_location()
        if location == "global" or (self.api_key and not self.project):
            return "https://aiplatform.googleapis.com/"
        return f"https://{location}-aiplatform.googleapis.com/"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The Gemini chat model."""
        from parley.providers.gemini.chat import GeminiChatModel  # noqa: PLC0415

        return [GeminiChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The Gemini embedding model (text, and media on multimodal models)."""
        from parley.providers.gemini.embeddings import GeminiEmbeddingModel  # noqa: PLC0415

        return [GeminiEmbeddingModel]
