"""The credential for Anthropic's API."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, ClassVar, Literal

from parley.models.credentials import APIKeyCredential

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["AnthropicCredential"]


class AnthropicCredential(APIKeyCredential):
    """An Anthropic API key (else `ANTHROPIC_API_KEY`) and endpoint (else Anthropic's).

    `base_url` is the API's root, without `/v1` (the SDK adds `/v1/messages`).

    Example:
        >>> AnthropicCredential(api_key="sk-ant-test")
        AnthropicCredential(type='anthropic', api_key=SecretStr('**********'), base_url=None)
    """

    env_key: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    env_base_url: ClassVar[str | None] = "ANTHROPIC_BASE_URL"  # the anthropic SDK's own
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com"

    type: Literal["anthropic"] = "anthropic"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """Anthropic's Messages API."""
        from parley.providers.anthropic.chat import AnthropicChatModel  # noqa: PLC0415

        return [AnthropicChatModel]
