"""`DashScopeCredential`: a Model Studio (DashScope) API key, its region's endpoint, a workspace."""

from __future__ import annotations

import builtins
import importlib.util
import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

from parley.errors import ConfigurationError
from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["BEIJING_URL", "INTERNATIONAL_URL", "DashScopeCredential"]

WEBSOCKET_ENV = "DASHSCOPE_WEBSOCKET_BASE_URL"
"""The variable the SDK reads for `dashscope.base_websocket_api_url`, the WebSocket inference
endpoint (`wss://dashscope.aliyuncs.com/api-ws/v1/inference`)."""

_COSYVOICE = "parley.providers.dashscope.speech.cosyvoice"

BEIJING_URL = "https://dashscope.aliyuncs.com/api/v1"
"""The native API in the Beijing (mainland China) region: the SDK's default
`dashscope.base_http_api_url`."""

INTERNATIONAL_URL = "https://dashscope-intl.aliyuncs.com/api/v1"
"""The native API in the international (Singapore) region. Keys are per region."""


class DashScopeCredential(APIKeyCredential):
    """A DashScope API key (else `DASHSCOPE_API_KEY`) and the native API's base URL.

    The base URL is the credential's, else `DASHSCOPE_HTTP_BASE_URL` (the variable the SDK
    reads for `dashscope.base_http_api_url`), else the Beijing region's. Each model sends its
    calls to its own credential's URL: parley never sets the SDK's process-wide
    `dashscope.base_http_api_url`, so two models on two regions (or a test server) work side
    by side.

    Example:
        >>> DashScopeCredential(api_key="sk-...", base_url=INTERNATIONAL_URL)  # doctest: +SKIP

    Attributes:
        api_key: The key; `DASHSCOPE_API_KEY` when not given.
        base_url: The native API's root, ending in `/api/v1`.
        workspace: A Model Studio workspace id, sent as `X-DashScope-WorkSpace` (optional).
        websocket_base_url: The WebSocket inference endpoint, ending in `/api-ws/v1/inference`
            (else derived from `base_url` when given, else `DASHSCOPE_WEBSOCKET_BASE_URL`, else
            derived from the HTTP base URL: its host with `wss`).
    """

    env_key: ClassVar[str | None] = "DASHSCOPE_API_KEY"
    env_base_url: ClassVar[str | None] = "DASHSCOPE_HTTP_BASE_URL"
    default_base_url: ClassVar[str | None] = BEIJING_URL

    type: Literal["dashscope"] = "dashscope"
    workspace: str | None = None
    websocket_base_url: str | None = None

    def websocket_endpoint(self, service: str = "inference") -> str:
        """The WebSocket endpoint of a `service`: `inference` (CosyVoice...) or `realtime` (Qwen).

        DashScope serves both beside the HTTP API on the same host: `/api/v1` becomes
        `/api-ws/v1/inference` or `/api-ws/v1/realtime`, `https` becomes `wss` (and `http`
        `ws`, for a local server). The SDK's `DASHSCOPE_WEBSOCKET_BASE_URL` names the inference
        endpoint; the realtime one is its sibling (the SDK builds it the same way).
        """
        # The credential's own URLs win over the environment's: the WebSocket one, then one
        # derived from its HTTP one (a credential aimed at a region or a test server).
        base = self.websocket_base_url
        if not base and not self.base_url:
            base = os.environ.get(WEBSOCKET_ENV)
        if not base:
            base = _websocket_from_http(self.endpoint() or BEIJING_URL)
        base = base.rstrip("/")
        head, _, last = base.rpartition("/")
        return f"{head}/{service}" if last in ("inference", "realtime") else f"{base}/{service}"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The native chat model (text generation and multimodal conversation)."""
        from parley.providers.dashscope.chat import DashScopeChatModel  # noqa: PLC0415

        return [DashScopeChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The native embedding model (text and multimodal embedding)."""
        from parley.providers.dashscope.embeddings import DashScopeEmbeddingModel  # noqa: PLC0415

        return [DashScopeEmbeddingModel]

    @classmethod
    def tts_model_classes(cls) -> list[builtins.type[Any]]:
        """Qwen-TTS (whole and realtime), and CosyVoice realtime when it is installed."""
        # Imported here: the TTS modules import this one.
        from parley.providers.dashscope.speech import (  # noqa: PLC0415
            DashScopeRealtimeTTSModel,
            DashScopeTTSModel,
        )

        classes: list[builtins.type[Any]] = [DashScopeTTSModel, DashScopeRealtimeTTSModel]
        if importlib.util.find_spec(_COSYVOICE) is not None:
            module = importlib.import_module(_COSYVOICE)
            classes.append(module.DashScopeCosyVoiceRealtimeTTSModel)
        return classes


def _websocket_from_http(http_url: str) -> str:
    """`http(s)://host/api/v1` as `ws(s)://host/api-ws/v1/inference`."""
    parts = urlsplit(http_url)
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    root, _, version = parts.path.rstrip("/").rpartition("/api/")
    if not version:
        raise ConfigurationError(
            f"cannot tell DashScope's WebSocket URL from {http_url!r}: a base URL ends in "
            f"/api/v1; or set websocket_base_url or {WEBSOCKET_ENV}"
        )
    return urlunsplit((scheme, parts.netloc, f"{root}/api-ws/{version}/inference", "", ""))
