"""Alibaba Cloud Model Studio (DashScope, Qwen) through its OpenAI-compatible mode.

Thinking is `enable_thinking` (with `thinking_budget`) and streams as `reasoning_content`.
Qwen3's open models and QwQ answer only when streamed (DashScope's Qwen guide: a
non-streamed call must turn thinking off), so this model always streams, also for whole
answers. DashScope's docs do not ask for reasoning back, so it is not sent. Named
`...Compatible...` to leave `DashScopeChatModel` to the native `dashscope` SDK.
"""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Literal

from pydantic import Field

from parley.models.base import ChatModel, ChatRequest
from parley.models.credentials import APIKeyCredential, Credential
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.providers.openai.chat import OpenAIChatModel

__all__ = [
    "DashScopeCompatibleChatModel",
    "DashScopeCompatibleCredential",
    "DashScopeParameters",
]


class DashScopeCompatibleCredential(APIKeyCredential):
    """A DashScope API key (else `DASHSCOPE_API_KEY`); the Beijing region by default.

    For the international (Singapore) region, pass
    `base_url="https://dashscope-intl.aliyuncs.com/compatible-mode/v1"`.
    """

    env_key: ClassVar[str | None] = "DASHSCOPE_API_KEY"
    default_base_url: ClassVar[str | None] = "https://dashscope.aliyuncs.com/compatible-mode/v1"

    type: Literal["dashscope_compatible"] = "dashscope_compatible"

    @classmethod
    def chat_model_classes(cls) -> list[builtins.type[ChatModel]]:
        """DashScope's chat model in compatible mode."""
        return [DashScopeCompatibleChatModel]


class DashScopeParameters(Parameters):
    """DashScope's parameters."""

    enable_thinking: bool | None = Field(default=None, description="Think before answering.")
    thinking_budget: int | None = Field(default=None, ge=1, description="Most thinking tokens.")
    enable_search: bool | None = Field(default=None, description="Search the web first.")
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    top_k: int | None = Field(default=None, ge=1, description="Top-k sampling.")


class DashScopeCompatibleChatModel(OpenAIChatModel):
    """A Qwen model on DashScope (`qwen-plus`, `qwen-max`, `qwen3-235b-a22b`, `qwq-plus`...)."""

    provider: ClassVar[str] = "dashscope"
    credential_class: ClassVar[type[Credential] | None] = DashScopeCompatibleCredential
    parameters_class: ClassVar[type[Parameters]] = DashScopeParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.dashscope"
    max_tokens_field: ClassVar[str] = "max_tokens"
    thinking_off: ClassVar[dict[str, Any]] = {"enable_thinking": False}
    # Forced tool choice is refused while thinking: retry with thinking off.
    structured_strategies: ClassVar[tuple[str, ...]] = ("forced", "thinking_off", "auto", "text")

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        return await ChatModel._complete(self, request)
