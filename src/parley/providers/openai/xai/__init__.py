"""xAI (Grok) through its OpenAI-compatible API.

`grok-3-mini` streams its reasoning as `reasoning_content` and takes `reasoning_effort`
(`low` or `high`); Grok 4 always reasons and takes no reasoning parameter (xAI's reasoning
guide), so it has no thinking switch.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from parley.models.credentials import APIKeyCredential, Credential
from parley.models.parameters import Parameters
from parley.providers.openai.chat import OpenAIChatModel

if TYPE_CHECKING:
    from parley.models.base import ChatModel

__all__ = ["XAIChatModel", "XAICredential", "XAIParameters"]


class XAICredential(APIKeyCredential):
    """An xAI API key (else `XAI_API_KEY`)."""

    env_key: ClassVar[str | None] = "XAI_API_KEY"
    default_base_url: ClassVar[str | None] = "https://api.x.ai/v1"

    type: Literal["xai"] = "xai"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """The Grok chat model."""
        return [XAIChatModel]


class XAIParameters(Parameters):
    """The parameters of Grok models."""

    reasoning_effort: Literal["low", "high"] | None = Field(
        default=None, description="grok-3-mini: how much to think."
    )
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=8)


class XAIChatModel(OpenAIChatModel):
    """A Grok model (`grok-4`, `grok-3`, `grok-3-mini`)."""

    provider: ClassVar[str] = "xai"
    credential_class: ClassVar[type[Credential] | None] = XAICredential
    parameters_class: ClassVar[type[Parameters]] = XAIParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.xai"
