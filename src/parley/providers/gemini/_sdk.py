"""`google-genai`, imported on first use, and one SDK client per event loop.

The SDK is kept for what it does well: the endpoint of each backend (the Gemini API, or
Vertex AI with its `projects/.../locations/...` paths and versions), the key header or
Google's OAuth token, its headers, and its error classes. Its `generate_content` and
`embed_content` are not used: they validate the request into pydantic models and turn every
answer (every stream chunk) back into them, most of a call's cost. parley builds the
wire-format body itself and reads the raw response, through the SDK's own request layer
(`post`: `BaseApiClient._build_request` and `_async_request_once`, private names, hence the
SDK's major version is pinned), for chat and embedding models alike.

The SDK's own retries are not used (parley's base retries), and the async transport is an
`httpx2.AsyncClient` given to the SDK: its timeouts apply to each read (a long stream is not
cut by a total deadline, as the SDK's aiohttp transport would do) and its connections are
pooled per event loop, as this module keeps one SDK client per loop.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.errors import ConfigurationError, MissingDependencyError
from parley.models._aiohttp import Closer, LoopClients
from parley.providers.gemini.credentials import GeminiCredential

if TYPE_CHECKING:
    from google.genai._api_client import BaseApiClient

__all__ = ["Endpoint", "client_pool", "import_sdk", "post"]


def import_sdk() -> Any:
    """The `google.genai` module.

    Raises:
        MissingDependencyError: `google-genai` is not installed.
    """
    try:
        # By name, not `from google import genai`: that reads the attribute of the `google`
        # namespace package, which outlives a removal from `sys.modules`.
        return importlib.import_module("google.genai")  # ~0.5 s the first time
    except ImportError as exc:
        raise MissingDependencyError("google-genai", "gemini") from exc


@dataclass(frozen=True)
class Endpoint:
    """Who to call and how: what one SDK client is built from."""

    credential: GeminiCredential
    timeout: float
    headers: Mapping[str, str]

    def client_arguments(self) -> dict[str, Any]:
        """`genai.Client` keyword arguments, the HTTP options aside.

        Raises:
            ConfigurationError: The Gemini API without a key, or Vertex AI without a project
                or a key.
        """
        credential = self.credential
        key = credential.key()
        if not credential.vertexai:
            if not key:
                raise ConfigurationError(
                    "no Gemini API key: pass one in the credential or set "
                    "GOOGLE_API_KEY or GEMINI_API_KEY"
                )
            return {"vertexai": False, "api_key": key}
        project = credential.vertex_project()
        if key and not credential.project:
            return {"vertexai": True, "api_key": key}  # Vertex AI express mode
        if not project:
            raise ConfigurationError(
                "Vertex AI needs a project (the credential's or GOOGLE_CLOUD_PROJECT) or an API key"
            )
        arguments: dict[str, Any] = {
            "vertexai": True,
            "project": project,
            "location": credential.vertex_location(),
        }
        if credential.access_token is not None:
            from google.oauth2.credentials import Credentials  # noqa: PLC0415

            token = credential.access_token.get_secret_value()
            arguments["credentials"] = Credentials(token=token)  # type: ignore[no-untyped-call]
        return arguments


@dataclass
class _Client:
    """An SDK client and the HTTP clients it was given (the SDK leaves those open)."""

    api: BaseApiClient
    http: Any
    sync_http: Any

    async def aclose(self) -> None:
        """Close both HTTP clients and their connections."""
        await self.http.aclose()
        self.sync_http.close()


def _new_client(endpoint: Endpoint) -> _Client:
    genai = import_sdk()
    import httpx2  # noqa: PLC0415  (a dependency of google-genai)

    arguments = endpoint.client_arguments()
    http = httpx2.AsyncClient(timeout=endpoint.timeout)
    # Given one, the SDK builds no sync client of its own (nor its SSL context, ~10 ms).
    sync_http = httpx2.Client(timeout=endpoint.timeout)
    options: dict[str, Any] = {
        "timeout": int(endpoint.timeout * 1000),  # milliseconds
        "headers": dict(endpoint.headers),
        "httpx_async_client": http,
        "httpx_client": sync_http,
    }
    if endpoint.credential.base_url:
        options["base_url"] = endpoint.credential.base_url
    if endpoint.credential.api_version:
        options["api_version"] = endpoint.credential.api_version
    try:
        client = genai.Client(**arguments, http_options=options)
    except ValueError as exc:
        raise ConfigurationError(f"cannot set up the Gemini client: {exc}") from None
    return _Client(client._api_client, http, sync_http)


async def post(api: BaseApiClient, path: str, body: dict[str, Any]) -> Any:
    """POST `body` to `path` (under the backend's base URL and version) through the SDK.

    Returns:
        The raw (httpx2) response, its body not read yet: the caller reads it, or streams it.

    Raises:
        google.genai.errors.APIError: An error status.
    """
    request = api._build_request("post", path, {}, None)
    request.data = body  # given after: `_build_request` would walk and rewrite it
    response = await api._async_request_once(request, True)  # streamed: bytes, not text
    return response.response_stream


def client_pool(endpoint: Endpoint) -> LoopClients[BaseApiClient]:
    """One SDK API client per event loop, each closed with its loop (see `LoopClients`).

    Args:
        endpoint: What each client is built from.
    """

    def make() -> tuple[BaseApiClient, Closer]:
        client = _new_client(endpoint)
        return client.api, client.aclose

    return LoopClients(make)
