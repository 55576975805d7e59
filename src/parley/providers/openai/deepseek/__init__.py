"""DeepSeek through its OpenAI-compatible API.

Thinking mode streams reasoning as `reasoning_content`. DeepSeek's thinking-mode guide
requires that reasoning back on assistant turns that called tools (a 400 otherwise), so it
is sent back; it is switched by `thinking: {"type": ...}` (`enable_thinking` here).
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from parley.models.credentials import APIKeyCredential, Credential
from parley.models.parameters import Parameters
from parley.providers.openai._switched import (
    SwitchedThinkingChatModel,
    SwitchedThinkingParameters,
)

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["DeepSeekChatModel", "DeepSeekCredential", "DeepSeekParameters"]


class DeepSeekCredential(APIKeyCredential):
    """A DeepSeek API key (else `DEEPSEEK_API_KEY`)."""

    env_key: ClassVar[str | None] = "DEEPSEEK_API_KEY"
    default_base_url: ClassVar[str | None] = "https://api.deepseek.com"

    type: Literal["deepseek"] = "deepseek"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """DeepSeek's chat model."""
        return [DeepSeekChatModel]


class DeepSeekParameters(SwitchedThinkingParameters):
    """DeepSeek's parameters (sampling knobs have no effect in thinking mode)."""

    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)


class DeepSeekChatModel(SwitchedThinkingChatModel):
    """A DeepSeek model (`deepseek-chat`, `deepseek-reasoner`)."""

    provider: ClassVar[str] = "deepseek"
    credential_class: ClassVar[type[Credential] | None] = DeepSeekCredential
    parameters_class: ClassVar[type[Parameters]] = DeepSeekParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.deepseek"
