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

from typing import Any, ClassVar, Literal

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


def _given(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not None}


def _no_voice(owner: str, voice: str | None) -> None:
    if voice is not None:
        raise UserError(
            f"{owner}.Parameters(voice=...) asks for spoken answers, which parley's wrapper "
            "does not read; use parley.compat.agentscope.tts for speech"
        )


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


def _with_call_extra_body(inner: ChatModel, kwargs: dict[str, Any]) -> ChatModel:
    """`inner`, or a copy sending a call's `extra_body` over the constructor's."""
    extra = kwargs.pop("extra_body", None)
    if extra is None:
        return inner
    assert isinstance(inner, _ExtraBody)
    copied = inner.with_parameters()  # shares the connections
    assert isinstance(copied, _ExtraBody)
    copied.extra_body = {**(inner.extra_body or {}), **extra}
    return copied


class OpenAIChatModel(ParleyChatModel):
    """OpenAI's Chat Completions (and servers that speak it), as AgentScope's class."""

    class Parameters(BaseModel):
        """Chat Completions parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(
            default=False, description="Reason first (reasoning models; see reasoning_effort)."
        )
        reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = (
            Field(default=None, description="How hard to reason, when thinking_enable is on.")
        )
        temperature: float | None = Field(default=None, ge=0, le=2)
        top_p: float | None = Field(default=None, gt=0, le=1)
        parallel_tool_calls: bool = Field(default=True, description="Several calls at once.")
        voice: str | None = Field(default=None, description="Spoken answers (not supported).")

    parley_class: ClassVar[type[ChatModel]] = _OpenAIWire
    client_kwargs_supported: ClassVar[tuple[str, ...]] = ("base_url", "timeout")

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

    def _build(self) -> ChatModel:
        inner = super()._build()
        assert isinstance(inner, _OpenAIWire)
        inner.extra_body = dict(self.extra_body or {})
        return inner

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        return _with_call_extra_body(self._parley, kwargs)

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's OpenAI parameters."""
        p = self.parameters
        assert isinstance(p, OpenAIChatModel.Parameters)
        _no_voice(type(self).__name__, p.voice)
        return _given(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            reasoning_effort=p.reasoning_effort if p.thinking_enable else None,
            parallel_tool_calls=None if p.parallel_tool_calls else False,
        )


class DashScopeChatModel(ParleyChatModel):
    """DashScope (Qwen) through its OpenAI-compatible mode, as AgentScope's class.

    The credential is `parley.compat.agentscope.credential.DashScopeCredential`, whose
    `base_url` is the compatible mode's.
    """

    class Parameters(BaseModel):
        """DashScope parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Think before answering.")
        thinking_budget: int | None = Field(default=None, gt=0, description="Most thinking tokens.")
        temperature: float | None = Field(default=None, ge=0, lt=2)
        top_p: float | None = Field(default=None, gt=0, le=1)
        top_k: int | None = Field(default=None, gt=0)
        parallel_tool_calls: bool = Field(default=True, description="Several calls at once.")
        voice: str | None = Field(default=None, description="Spoken answers (not supported).")

    parley_class: ClassVar[type[ChatModel]] = _DashScopeWire

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: DashScopeChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 131072,
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

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        return _with_call_extra_body(self._parley, kwargs)

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's; `enable_thinking` always sent, as AgentScope does."""
        p = self.parameters
        assert isinstance(p, DashScopeChatModel.Parameters)
        _no_voice(type(self).__name__, p.voice)
        return _given(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            top_k=p.top_k,
            enable_thinking=p.thinking_enable,
            thinking_budget=p.thinking_budget,
            parallel_tool_calls=None if p.parallel_tool_calls else False,
        )


class AnthropicChatModel(ParleyChatModel):
    """Anthropic's Messages API, as AgentScope's class (`max_tokens` 8192 unless set)."""

    class Parameters(BaseModel):
        """Anthropic parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Think before answering.")
        thinking_budget: int | None = Field(default=None, gt=0, description="Most thinking tokens.")
        thinking_mode: Literal["adaptive", "enabled", "disabled"] | None = Field(
            default=None, description="How the model thinks, when thinking_enable is on."
        )
        thinking_display: Literal["summarized", "omitted"] | None = None
        reasoning_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None

    parley_class: ClassVar[type[ChatModel]] = _Anthropic

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: AnthropicChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 200000,
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

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Return thoughts.")
        thinking_budget: int | None = Field(default=None, description="Most thinking tokens.")
        temperature: float | None = Field(default=None, ge=0, le=2)
        top_p: float | None = Field(default=None, gt=0, le=1)

    parley_class: ClassVar[type[ChatModel]] = _Gemini

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: GeminiChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 1048576,
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

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's; thinking on: thoughts included (budget 1024)."""
        p = self.parameters
        assert isinstance(p, GeminiChatModel.Parameters)
        fields = _given(max_tokens=p.max_tokens, temperature=p.temperature, top_p=p.top_p)
        if p.thinking_enable:
            fields.update(include_thoughts=True, thinking_budget=p.thinking_budget or 1024)
        return fields


class OllamaChatModel(ParleyChatModel):
    """A model served by Ollama, as AgentScope's class (`think` sent on every call)."""

    class Parameters(BaseModel):
        """Ollama parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Think before answering.")
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

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Ollama parameters."""
        p = self.parameters
        assert isinstance(p, OllamaChatModel.Parameters)
        return _given(max_tokens=p.max_tokens, temperature=p.temperature, think=p.thinking_enable)


class DeepSeekChatModel(ParleyChatModel):
    """DeepSeek's API, as AgentScope's class (the thinking switch sent on every call)."""

    class Parameters(BaseModel):
        """DeepSeek parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Think before answering.")
        reasoning_effort: Literal["high", "max"] | None = Field(
            default=None, description="How hard to think."
        )
        temperature: float | None = Field(default=None, ge=0, le=2)
        top_p: float | None = Field(default=None, gt=0, le=1)

    parley_class: ClassVar[type[ChatModel]] = _DeepSeekWire

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: DeepSeekChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 65536,
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

    def _build(self) -> ChatModel:
        inner = super()._build()
        assert isinstance(inner, _DeepSeekWire)
        p = self.parameters
        assert isinstance(p, DeepSeekChatModel.Parameters)
        # parley's DeepSeek parameters have no effort: it goes as a field of its own.
        inner.extra_body = _given(reasoning_effort=p.reasoning_effort)
        return inner

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        return _with_call_extra_body(self._parley, kwargs)

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's DeepSeek parameters."""
        p = self.parameters
        assert isinstance(p, DeepSeekChatModel.Parameters)
        return _given(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            enable_thinking=p.thinking_enable,
        )


class OpenAIResponseModel(ParleyChatModel):
    """OpenAI's Responses API, as AgentScope's class."""

    class Parameters(BaseModel):
        """Responses API parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(
            default=False, description="Reason first (reasoning models; see reasoning_effort)."
        )
        reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = (
            Field(default=None, description="How hard to reason, when thinking_enable is on.")
        )
        temperature: float | None = Field(default=None, ge=0, le=2)

    parley_class: ClassVar[type[ChatModel]] = _OpenAIResponses

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: OpenAIResponseModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 200000,
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

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Responses parameters."""
        p = self.parameters
        assert isinstance(p, OpenAIResponseModel.Parameters)
        return _given(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            reasoning_effort=p.reasoning_effort if p.thinking_enable else None,
        )


class MoonshotChatModel(ParleyChatModel):
    """Moonshot AI (Kimi), as AgentScope's class.

    As AgentScope: the thinking switch (`thinking: {"type": ...}`) goes with every call,
    except to `kimi-k3`, which takes `reasoning_effort` instead and its output limit as
    `max_completion_tokens`.
    """

    class Parameters(BaseModel):
        """Moonshot parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(default=False, description="Think before answering.")
        reasoning_effort: Literal["low", "high", "max"] | None = Field(
            default=None, description="kimi-k3 only: how hard to think."
        )
        temperature: float | None = Field(default=None, ge=0, le=1)
        top_p: float | None = Field(default=None, gt=0, le=1)

    parley_class: ClassVar[type[ChatModel]] = _MoonshotWire

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: MoonshotChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 131072,
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

    def _is_k3(self) -> bool:
        return self.model == "kimi-k3"

    def _build(self) -> ChatModel:
        inner = super()._build()
        assert isinstance(inner, _MoonshotWire)
        p = self.parameters
        assert isinstance(p, MoonshotChatModel.Parameters)
        if self._is_k3():
            # parley's Moonshot parameters have neither field: they go as fields of their own.
            inner.extra_body = _given(
                max_completion_tokens=p.max_tokens, reasoning_effort=p.reasoning_effort
            )
        return inner

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        return _with_call_extra_body(self._parley, kwargs)

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's Moonshot parameters."""
        p = self.parameters
        assert isinstance(p, MoonshotChatModel.Parameters)
        if self._is_k3():
            return _given(temperature=p.temperature, top_p=p.top_p)
        return _given(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            enable_thinking=p.thinking_enable,
        )


class XAIChatModel(ParleyChatModel):
    """xAI (Grok), as AgentScope's class, over xAI's OpenAI-compatible REST API.

    `reasoning_effort` is sent only with `thinking_enable`, as AgentScope does. The
    credential is parley's `XAICredential` (`api_key`, `base_url`), not AgentScope's gRPC
    `api_host`.
    """

    class Parameters(BaseModel):
        """xAI parameters, as AgentScope names them."""

        max_tokens: int | None = Field(default=None, gt=0, description="Most output tokens.")
        thinking_enable: bool = Field(
            default=False, description="Reason first (grok-3-mini; see reasoning_effort)."
        )
        reasoning_effort: Literal["low", "medium", "high"] | None = Field(
            default=None, description="How hard to reason, when thinking_enable is on."
        )
        temperature: float | None = Field(default=None, ge=0, le=2)
        top_p: float | None = Field(default=None, gt=0, le=1)

    parley_class: ClassVar[type[ChatModel]] = _XAIWire
    client_kwargs_supported: ClassVar[tuple[str, ...]] = ("timeout",)

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: XAIChatModel.Parameters | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 131072,
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

    def _build(self) -> ChatModel:
        inner = super()._build()
        assert isinstance(inner, _XAIWire)
        p = self.parameters
        assert isinstance(p, XAIChatModel.Parameters)
        # parley's xAI parameters take low/high only; AgentScope's also medium: sent as is.
        effort = p.reasoning_effort if p.thinking_enable else None
        inner.extra_body = _given(reasoning_effort=effort)
        return inner

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The wrapped model, sending the call's `extra_body` if it has one."""
        return _with_call_extra_body(self._parley, kwargs)

    def parley_parameters(self) -> dict[str, Any]:
        """AgentScope's fields as parley's xAI parameters."""
        p = self.parameters
        assert isinstance(p, XAIChatModel.Parameters)
        return _given(max_tokens=p.max_tokens, temperature=p.temperature, top_p=p.top_p)
