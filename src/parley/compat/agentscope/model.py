"""AgentScope's chat models under `agentscope.model`'s names, on parley's providers.

`from agentscope.model import OpenAIChatModel` becomes
`from parley.compat.agentscope.model import OpenAIChatModel`, and the rest of the code stays:
the constructor's arguments and defaults (`stream=True`, `retry_delay`, `client_kwargs`,
`extra_body`), the inner `Parameters` class with AgentScope's fields, `await model(msgs,
tools, tool_choice)` answering AgentScope's `ChatResponse` (or an async generator of them),
tool calls whose `input` is a JSON string, and `generate_structured_output(msgs,
structured_model=...)`. `XAIChatModel` speaks xAI's OpenAI-compatible REST API where
AgentScope's uses the `xai_sdk` gRPC client: the same parameters, another transport.
`DashScopeChatModel` is AgentScope's: DashScope's OpenAI-compatible
mode (parley's `DashScopeCompatibleChatModel`), with `enable_thinking` sent on every call.

Each model wraps one of parley's (`to_parley()` gives it), which speaks the wire format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field

from parley.compat.agentscope._chat_base import ChatModelBase, ParleyChatModel
from parley.compat.agentscope._responses import (
    ChatResponse,
    ChatUsage,
    FinishedReason,
    StructuredResponse,
)
from parley.errors import UserError
from parley.models.base import ChatModel
from parley.models.cards import ModelCard
from parley.models.parameters import Parameters
from parley.providers.anthropic import AnthropicChatModel as _Anthropic
from parley.providers.gemini import GeminiChatModel as _Gemini
from parley.providers.ollama import OllamaChatModel as _Ollama
from parley.providers.openai import DashScopeCompatibleChatModel as _DashScope
from parley.providers.openai import DeepSeekChatModel as _DeepSeek
from parley.providers.openai import MoonshotChatModel as _Moonshot
from parley.providers.openai import OpenAIChatModel as _OpenAI
from parley.providers.openai import OpenAIResponseModel as _OpenAIResponses
from parley.providers.openai import XAIChatModel as _Grok

__all__ = [
    "AnthropicChatModel",
    "ChatModelBase",
    "ChatResponse",
    "ChatUsage",
    "DashScopeChatModel",
    "DeepSeekChatModel",
    "FinishedReason",
    "GeminiChatModel",
    "ModelCard",
    "MoonshotChatModel",
    "OllamaChatModel",
    "OpenAIChatModel",
    "OpenAIResponseModel",
    "StructuredResponse",
    "XAIChatModel",
]


# AgentScope's parameters that several providers share, each written once.
_MaxTokens = Annotated[int | None, Field(gt=0, description="Most output tokens.")]
_Thinking = Annotated[bool, Field(description="Think before answering.")]
_ThinkingBudget = Annotated[int | None, Field(gt=0, description="Most thinking tokens.")]
_Temperature = Annotated[float | None, Field(ge=0, le=2)]
_TopP = Annotated[float | None, Field(gt=0, le=1)]
_ParallelToolCalls = Annotated[bool, Field(description="Several calls at once.")]
_Voice = Annotated[str | None, Field(description="Spoken answers (not supported).")]


class _OpenAIParameters(BaseModel):
    """The fields OpenAI's two APIs (Chat Completions, Responses) share, in AgentScope's order."""

    max_tokens: _MaxTokens = None
    thinking_enable: bool = Field(
        default=False, description="Reason first (reasoning models; see reasoning_effort)."
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = Field(
        default=None, description="How hard to reason, when thinking_enable is on."
    )
    temperature: _Temperature = None


def _given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


_SAMPLING: Mapping[str, str] = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
}


def _openai_style(model: ParleyChatModel) -> dict[str, Any]:
    """The fields of OpenAI-style parameters that are not sent as they are.

    `reasoning_effort` goes only with `thinking_enable`; `parallel_tool_calls` only when
    off; `voice` (spoken answers) is refused.
    """
    p = model.parameters
    if getattr(p, "voice", None) is not None:
        raise UserError(
            f"{type(model).__name__}.Parameters(voice=...) asks for spoken answers, which "
            "parley's wrapper does not read; use parley.compat.agentscope.tts for speech"
        )
    effort = getattr(p, "reasoning_effort", None) if getattr(p, "thinking_enable", False) else None
    parallel = None if getattr(p, "parallel_tool_calls", True) else False
    return _given(reasoning_effort=effort, parallel_tool_calls=parallel)


class _ExtraBody:
    """Fields sent as they are in every request, over parley's (AgentScope's `extra_body`)."""

    extra_body: dict[str, Any] | None = None

    def wire_parameters(self, parameters: Parameters, *, tools: bool) -> dict[str, Any]:
        fields: dict[str, Any] = super().wire_parameters(parameters, tools=tools)  # type: ignore[misc]
        return {**fields, **(self.extra_body or {})}


class _OpenAIWire(_ExtraBody, _OpenAI):
    pass


class _DashScopeWire(_ExtraBody, _DashScope):
    pass


class _DeepSeekWire(_ExtraBody, _DeepSeek):
    pass


class _MoonshotWire(_ExtraBody, _Moonshot):
    pass


class _XAIWire(_ExtraBody, _Grok):
    pass


class _ExtraBodyChatModel(ParleyChatModel):
    """A model on an OpenAI-compatible wire: a call's `extra_body` goes with that call."""

    def wire_extra_body(self) -> dict[str, Any]:
        """Fields this model sends in every request, beyond parley's parameters."""
        return {}

    def _build(self) -> ChatModel:
        inner = super()._build()
        assert isinstance(inner, _ExtraBody)
        inner.extra_body = self.wire_extra_body()
        return inner

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        extra = kwargs.pop("extra_body", None)
        if extra is None:
            return self._parley
        assert isinstance(self._parley, _ExtraBody)
        copied = self._parley.with_parameters()  # shares the connections
        assert isinstance(copied, _ExtraBody)
        copied.extra_body = {**(self._parley.extra_body or {}), **extra}
        return copied


class OpenAIChatModel(_ExtraBodyChatModel):
    """OpenAI's Chat Completions (and servers that speak it), as AgentScope's class."""

    class Parameters(_OpenAIParameters):
        """Chat Completions parameters, as AgentScope names them."""

        top_p: _TopP = None
        parallel_tool_calls: _ParallelToolCalls = True
        voice: _Voice = None

    parley_class: ClassVar[type[ChatModel]] = _OpenAIWire

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: OpenAIChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 128000,
        formatter: Any = None,
        client_kwargs: dict[str, Any] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.extra_body = dict(extra_body) if extra_body is not None else None
        super().__init__(
            credential,
            model,
            parameters,
            stream,
            max_retries,
            retry_delay,
            context_size,
            formatter,
            client_kwargs,
        )

    def wire_extra_body(self) -> dict[str, Any]:
        """The constructor's `extra_body`."""
        return dict(self.extra_body or {})

    sent_as: ClassVar[Mapping[str, str]] = _SAMPLING

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's OpenAI parameters."""
        return {**super().parley_parameters(), **_openai_style(self)}


class DashScopeChatModel(_ExtraBodyChatModel):
    """DashScope (Qwen) through its OpenAI-compatible mode, as AgentScope's class.

    The credential is `parley.compat.agentscope.credential.DashScopeCredential`, whose
    `base_url` is the compatible mode's.
    """

    class Parameters(BaseModel):
        """DashScope parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: _Thinking = False
        thinking_budget: _ThinkingBudget = None
        temperature: float | None = Field(default=None, ge=0, lt=2)
        top_p: _TopP = None
        top_k: int | None = Field(default=None, gt=0)
        parallel_tool_calls: _ParallelToolCalls = True
        voice: _Voice = None

    parley_class: ClassVar[type[ChatModel]] = _DashScopeWire
    default_context_size = 131072

    sent_as: ClassVar[Mapping[str, str]] = {
        **_SAMPLING,
        "top_k": "top_k",
        "thinking_enable": "enable_thinking",  # sent on every call, as AgentScope does
        "thinking_budget": "thinking_budget",
    }

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's; `enable_thinking` always sent, as AgentScope does."""
        return {**super().parley_parameters(), **_openai_style(self)}


class AnthropicChatModel(ParleyChatModel):
    """Anthropic's Messages API, as AgentScope's class (`max_tokens` 8192 unless set)."""

    class Parameters(BaseModel):
        """Anthropic parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: _Thinking = False
        thinking_budget: _ThinkingBudget = None
        thinking_mode: Literal["adaptive", "enabled", "disabled"] | None = Field(
            default=None, description="How the model thinks, when thinking_enable is on."
        )
        thinking_display: Literal["summarized", "omitted"] | None = None
        reasoning_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None

    parley_class: ClassVar[type[ChatModel]] = _Anthropic
    default_context_size = 200000

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Anthropic parameters."""
        p = self.parameters
        assert isinstance(p, AnthropicChatModel.Parameters)
        max_tokens = p.max_tokens or 8192
        fields: dict[str, Any] = {"max_tokens": max_tokens}
        if p.thinking_enable:
            mode = p.thinking_mode or "enabled"
            fields["thinking"] = mode
            if mode == "enabled":
                budget = p.thinking_budget or max_tokens // 2
                # The API wants more output tokens than thinking tokens, as AgentScope ensures.
                fields["max_tokens"] = max(max_tokens, budget + 1024)
                fields["thinking_budget"] = budget
            if mode != "disabled" and p.thinking_display:
                fields["thinking_display"] = p.thinking_display
        if p.reasoning_effort:
            fields["effort"] = p.reasoning_effort
        return fields


class GeminiChatModel(ParleyChatModel):
    """Google's Gemini API, as AgentScope's class."""

    class Parameters(BaseModel):
        """Gemini parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: bool = Field(default=False, description="Return thoughts.")
        thinking_budget: int | None = Field(default=None, description="Most thinking tokens.")
        temperature: _Temperature = None
        top_p: _TopP = None

    parley_class: ClassVar[type[ChatModel]] = _Gemini
    default_context_size = 1048576

    sent_as: ClassVar[Mapping[str, str]] = _SAMPLING

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's; thinking on: thoughts included (budget 1024)."""
        p = self.parameters
        assert isinstance(p, GeminiChatModel.Parameters)
        fields = super().parley_parameters()
        if p.thinking_enable:
            fields.update(include_thoughts=True, thinking_budget=p.thinking_budget or 1024)
        return fields


class OllamaChatModel(ParleyChatModel):
    """A model served by Ollama, as AgentScope's class (`think` sent on every call)."""

    class Parameters(BaseModel):
        """Ollama parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: _Thinking = False
        temperature: float | None = Field(default=None, ge=0)

    parley_class: ClassVar[type[ChatModel]] = _Ollama
    client_kwargs_supported: ClassVar[tuple[str, ...]] = ("timeout",)

    def __init__(
        self,
        credential: Any = None,
        model: str = "",
        parameters: OllamaChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 32768,
        formatter: Any = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            credential,
            model,
            parameters,
            stream,
            max_retries,
            retry_delay,
            context_size,
            formatter,
            client_kwargs,
        )

    sent_as: ClassVar[Mapping[str, str]] = {
        "max_tokens": "max_tokens",
        "thinking_enable": "think",
        "temperature": "temperature",
    }


class DeepSeekChatModel(_ExtraBodyChatModel):
    """DeepSeek's API, as AgentScope's class (the thinking switch sent on every call)."""

    class Parameters(BaseModel):
        """DeepSeek parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: _Thinking = False
        reasoning_effort: Literal["high", "max"] | None = Field(
            default=None, description="How hard to think."
        )
        temperature: _Temperature = None
        top_p: _TopP = None

    parley_class: ClassVar[type[ChatModel]] = _DeepSeekWire
    default_context_size = 65536

    def wire_extra_body(self) -> dict[str, Any]:
        """`reasoning_effort`, which parley's DeepSeek parameters do not have."""
        p = self.parameters
        assert isinstance(p, DeepSeekChatModel.Parameters)
        return _given(reasoning_effort=p.reasoning_effort)

    sent_as: ClassVar[Mapping[str, str]] = {**_SAMPLING, "thinking_enable": "enable_thinking"}


class OpenAIResponseModel(ParleyChatModel):
    """OpenAI's Responses API, as AgentScope's class."""

    class Parameters(_OpenAIParameters):
        """Responses API parameters, as AgentScope names them."""

    parley_class: ClassVar[type[ChatModel]] = _OpenAIResponses
    default_context_size = 200000

    sent_as: ClassVar[Mapping[str, str]] = {
        "max_tokens": "max_tokens",
        "temperature": "temperature",
    }

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Responses parameters."""
        return {**super().parley_parameters(), **_openai_style(self)}


class MoonshotChatModel(_ExtraBodyChatModel):
    """Moonshot AI (Kimi), as AgentScope's class.

    As AgentScope: the thinking switch (`thinking: {"type": ...}`) goes with every call,
    except to `kimi-k3`, which takes `reasoning_effort` instead and its output limit as
    `max_completion_tokens`.
    """

    class Parameters(BaseModel):
        """Moonshot parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: _Thinking = False
        reasoning_effort: Literal["low", "high", "max"] | None = Field(
            default=None, description="kimi-k3 only: how hard to think."
        )
        temperature: float | None = Field(default=None, ge=0, le=1)
        top_p: _TopP = None

    parley_class: ClassVar[type[ChatModel]] = _MoonshotWire
    default_context_size = 131072

    def _is_k3(self) -> bool:
        return self.model == "kimi-k3"

    def wire_extra_body(self) -> dict[str, Any]:
        """kimi-k3's fields, which parley's Moonshot parameters do not have."""
        p = self.parameters
        assert isinstance(p, MoonshotChatModel.Parameters)
        if not self._is_k3():
            return {}
        return _given(max_completion_tokens=p.max_tokens, reasoning_effort=p.reasoning_effort)

    sent_as: ClassVar[Mapping[str, str]] = {**_SAMPLING, "thinking_enable": "enable_thinking"}

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Moonshot parameters (kimi-k3's others go as they are)."""
        fields = super().parley_parameters()
        if self._is_k3():
            return _given(temperature=fields.get("temperature"), top_p=fields.get("top_p"))
        return fields


class XAIChatModel(_ExtraBodyChatModel):
    """xAI (Grok), as AgentScope's class, over xAI's OpenAI-compatible REST API.

    `reasoning_effort` is sent only with `thinking_enable`, as AgentScope does. The
    credential is parley's `XAICredential` (`api_key`, `base_url`), not AgentScope's gRPC
    `api_host`.
    """

    class Parameters(BaseModel):
        """xAI parameters, as AgentScope names them."""

        max_tokens: _MaxTokens = None
        thinking_enable: bool = Field(
            default=False, description="Reason first (grok-3-mini; see reasoning_effort)."
        )
        reasoning_effort: Literal["low", "medium", "high"] | None = Field(
            default=None, description="How hard to reason, when thinking_enable is on."
        )
        temperature: _Temperature = None
        top_p: _TopP = None

    parley_class: ClassVar[type[ChatModel]] = _XAIWire
    client_kwargs_supported: ClassVar[tuple[str, ...]] = ("timeout",)
    default_context_size = 131072

    def wire_extra_body(self) -> dict[str, Any]:
        """`reasoning_effort` as is (parley's xAI parameters take low/high; AgentScope's medium)."""
        p = self.parameters
        assert isinstance(p, XAIChatModel.Parameters)
        return _given(reasoning_effort=p.reasoning_effort if p.thinking_enable else None)

    sent_as: ClassVar[Mapping[str, str]] = _SAMPLING
