"""`DashScopeCredential`: a Model Studio (DashScope) API key, its region's endpoint, a workspace."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["BEIJING_URL", "INTERNATIONAL_URL", "DashScopeCredential"]

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

    Args:
        api_key: The key; `DASHSCOPE_API_KEY` when not given.
        base_url: The native API's root, ending in `/api/v1`.
        workspace: A Model Studio workspace id, sent as `X-DashScope-WorkSpace` (optional).
    """

    env_key: ClassVar[str | None] = "DASHSCOPE_API_KEY"
    env_base_url: ClassVar[str | None] = "DASHSCOPE_HTTP_BASE_URL"
    default_base_url: ClassVar[str | None] = BEIJING_URL

    type: Literal["dashscope"] = "dashscope"
    workspace: str | None = None

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The native chat model (text generation and multimodal conversation)."""
        from parley.models.dashscope.chat import DashScopeChatModel  # noqa: PLC0415

        return [DashScopeChatModel]

    @classmethod
    def embedding_model_classes(cls) -> list[builtins.type[Any]]:
        """The native embedding model (text and multimodal embedding)."""
        from parley.embeddings.dashscope import DashScopeEmbeddingModel  # noqa: PLC0415

        return [DashScopeEmbeddingModel]
