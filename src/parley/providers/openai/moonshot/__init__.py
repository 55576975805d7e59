"""Moonshot AI (Kimi) through its OpenAI-compatible API.

Kimi's thinking models stream reasoning as `reasoning_content` and, like DeepSeek, refuse a
history whose tool-calling assistant turns lack it (Moonshot's thinking-model guide), so it
is sent back. Thinking is switched by `thinking: {"type": ...}` on models that allow it.
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

__all__ = ["MoonshotChatModel", "MoonshotCredential", "MoonshotParameters"]


class MoonshotCredential(APIKeyCredential):
    """A Moonshot API key (else `MOONSHOT_API_KEY`); the international endpoint by default."""

    env_key: ClassVar[str | None] = "MOONSHOT_API_KEY"
    default_base_url: ClassVar[str | None] = "https://api.moonshot.ai/v1"

    type: Literal["moonshot"] = "moonshot"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """Moonshot's chat model."""
        return [MoonshotChatModel]


class MoonshotParameters(SwitchedThinkingParameters):
    """Moonshot's parameters (its temperature goes from 0 to 1)."""

    temperature: float | None = Field(default=None, ge=0, le=1, description="Sampling temperature.")


class MoonshotChatModel(SwitchedThinkingChatModel):
    """A Kimi model (`kimi-k2-0905-preview`, `kimi-k2-thinking`, `moonshot-v1-8k`, ...)."""

    provider: ClassVar[str] = "moonshot"
    credential_class: ClassVar[type[Credential] | None] = MoonshotCredential
    parameters_class: ClassVar[type[Parameters]] = MoonshotParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.moonshot"
