"""`ChatModelBase` as AgentScope 2.x has it, and the wrapper its providers share.

AgentScope's contract: `await model(messages, tools, tool_choice, **kwargs)` answers a
`ChatResponse`, or (streaming, the default) an async generator of delta `ChatResponse`s
ending in one `is_last=True` with the whole answer; `_call_api` is the provider's hook;
retries cover the exceptions `_get_retryable_exceptions` names, `retry_delay` seconds apart.
The providers here wrap parley's models (`to_parley()` gives the wrapped model), which do the
wire format, retries and structured output.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from parley import messages as pm
from parley.compat.agentscope._responses import (
    ChatResponse,
    FinishedReason,
    StructuredResponse,
    chat_response,
    chat_usage,
)
from parley.compat.agentscope.message import (
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    to_parley,
)
from parley.compat.agentscope.tool import ToolChoice
from parley.errors import UserError
from parley.messages import new_id
from parley.models.base import ChatModel
from parley.models.cards import ModelCard
from parley.models.formatter import Formatter
from parley.models.retry import RetryPolicy
from parley.models.stream import ChatStream

__all__ = ["ChatModelBase", "ParleyChatModel", "choose_tools"]

logger = logging.getLogger(__name__)

Messages = Sequence[Msg | pm.Msg | dict[str, Any]]
ChatResult = ChatResponse | AsyncGenerator[ChatResponse, None]


class ChatModelBase:
    """The base of AgentScope-style chat models: implement `_call_api` and an inner `Parameters`.

    Args:
        credential: The provider's credential.
        model: The model's name at the provider.
        parameters: An instance of the class's `Parameters`.
        stream: Whether calling the model streams (AgentScope's default: yes).
        max_retries: Tries after the first, on the exceptions `_get_retryable_exceptions` names.
        retry_delay: Seconds between tries.
        context_size: The context window in tokens.
    """

    class Parameters(BaseModel):
        """A provider's generation parameters (each provider defines its own)."""

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: BaseModel,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int = 32768,
    ) -> None:
        self.credential = credential
        self.model = model
        self.parameters = parameters
        self.stream = stream
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.context_size = context_size

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        """The exceptions worth another try; none by default."""
        return ()

    @classmethod
    def list_models(cls, custom_yaml_dir: str | None = None) -> list[ModelCard]:
        """The model cards (parley's cards for the wrapped provider; none for a custom one)."""
        return []

    async def __call__(
        self,
        messages: Messages,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Call the model: a `ChatResponse`, or an async generator of them when streaming."""
        retryable = self._get_retryable_exceptions()
        for attempt in range(self.max_retries + 1):
            try:
                result = await self._call_api(
                    self.model, list(messages), tools=tools, tool_choice=tool_choice, **kwargs
                )
                break
            except asyncio.CancelledError:
                return ChatResponse(content=[], finished_reason=FinishedReason.INTERRUPTED)
            except Exception as error:
                if not retryable or not isinstance(error, retryable):
                    raise
                if attempt == self.max_retries:
                    raise
                logger.warning(
                    "try %d of model %s failed (%s); retrying in %.1fs",
                    attempt + 1,
                    self.model,
                    error,
                    self.retry_delay,
                )
                await asyncio.sleep(self.retry_delay)
        if isinstance(result, ChatResponse):
            return result
        return _visible(result)

    @abstractmethod
    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg | pm.Msg | dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """The provider's call: a whole answer, or delta answers."""

    async def generate_structured_output(
        self,
        messages: Messages,
        structured_model: type[BaseModel] | dict[str, Any],
        **kwargs: Any,
    ) -> StructuredResponse:
        """An answer validated against `structured_model` (a pydantic model or JSON schema).

        Raises:
            UserError: No messages.
            ModelOutputError: No valid answer, after parley's strategies.
        """
        if not messages:
            raise UserError("generate_structured_output needs at least one message")
        inner = self.to_parley()
        result = await inner.generate_structured_output(to_parley(messages), structured_model)
        return StructuredResponse(
            content=result.content, id=result.response.id, usage=chat_usage(result.usage)
        )

    def to_parley(self) -> ChatModel:
        """This model as a parley `ChatModel` (for parley's agents and structured output).

        A custom model (its own `_call_api`) is adapted: parley's calls go through its
        `__call__`, the parameters set passed as keywords.
        """
        adapted = self.__dict__.get("_adapted")
        if adapted is None:
            from parley.compat.agentscope._adapter import AgentScopeBacked  # noqa: PLC0415

            adapted = self.__dict__["_adapted"] = AgentScopeBacked(self)
        assert isinstance(adapted, ChatModel)
        return adapted


async def _visible(chunks: AsyncIterator[ChatResponse]) -> AsyncGenerator[ChatResponse, None]:
    """The deltas that carry content, then the whole (made here if the provider sent none)."""
    whole: ChatResponse | None = None
    pieces: list[ChatResponse] = []
    try:
        async for chunk in chunks:
            if chunk.is_last:
                whole = chunk
            else:
                pieces.append(chunk)
                if not chunk.content:
                    continue  # usage-only carriers are not shown, as in AgentScope
            yield chunk
    except asyncio.CancelledError:
        # As AgentScope: a cancelled stream ends with what came, marked interrupted.
        whole = _joined(pieces)
        whole.finished_reason = FinishedReason.INTERRUPTED
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()  # a consumer that stops early closes the provider's stream now
    if whole is None or whole.finished_reason == FinishedReason.INTERRUPTED:
        yield whole if whole is not None else _joined(pieces)


def _joined(pieces: list[ChatResponse]) -> ChatResponse:
    """The whole answer that delta answers make, blocks joined by id."""
    blocks: dict[str, TextBlock | ToolCallBlock | ThinkingBlock | DataBlock] = {}
    for piece in pieces:
        for block in piece.content:
            seen = blocks.get(block.id)
            if seen is None:
                blocks[block.id] = block.model_copy(deep=True)
            elif isinstance(seen, TextBlock) and isinstance(block, TextBlock):
                seen.text += block.text
            elif isinstance(seen, ThinkingBlock) and isinstance(block, ThinkingBlock):
                seen.thinking += block.thinking
            elif isinstance(seen, ToolCallBlock) and isinstance(block, ToolCallBlock):
                seen.input += block.input
            else:
                blocks[block.id] = block.model_copy(deep=True)
    usage = next((p.usage for p in reversed(pieces) if p.usage is not None), None)
    last_id = pieces[-1].id if pieces else new_id()
    return ChatResponse(content=list(blocks.values()), id=last_id, usage=usage)


def choose_tools(
    tools: list[dict[str, Any]] | None, tool_choice: ToolChoice | str | None
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """AgentScope's `ToolChoice` as parley takes it: the tools it allows, and the mode.

    Raises:
        UserError: The choice names a tool that is not given.
    """
    if tool_choice is None:
        return tools, None
    choice = tool_choice if isinstance(tool_choice, ToolChoice) else ToolChoice(mode=tool_choice)
    names = [_tool_name(t) for t in tools or []]
    for name in choice.tools or []:
        if name not in names:
            raise UserError(
                f"tool_choice.tools names {name!r}, which is not among the tools given "
                f"({', '.join(sorted(names)) or 'none'})"
            )
    if choice.tools is not None and tools is not None:
        tools = [t for t in tools if _tool_name(t) in choice.tools]
    return tools, choice.mode


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else tool.get("name"))


class ParleyChatModel(ChatModelBase):
    """An AgentScope-style model on one of parley's: the base of the provider classes.

    A subclass names parley's class (`parley_class`), its context window
    (`default_context_size`) and turns its `Parameters` into parley's (`parley_parameters`);
    the constructor is this one, shown with the subclass's defaults (`inspect.signature`).
    """

    parley_class: ClassVar[type[ChatModel]]
    client_kwargs_supported: ClassVar[tuple[str, ...]] = ("base_url", "timeout")
    default_context_size: ClassVar[int] = 32768

    def __init__(
        self,
        credential: Any,
        model: str,
        parameters: BaseModel | None = None,
        stream: bool = True,
        max_retries: int = 3,
        retry_delay: float = 1.0,
        context_size: int | None = None,
        formatter: Any = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            credential,
            model,
            parameters if parameters is not None else self.Parameters(),
            stream,
            max_retries,
            retry_delay,
            context_size if context_size is not None else self.default_context_size,
        )
        self.formatter = formatter
        self.client_kwargs = dict(client_kwargs or {})
        self._parley = self._build()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # AgentScope's classes each spell out their defaults; help() shows them here too.
        cls.__signature__ = _shown_signature(cls)  # type: ignore[attr-defined]

    sent_as: ClassVar[Mapping[str, str]] = {}
    """The `Parameters` fields sent as they are (when set), each to its parley parameter."""

    def parley_parameters(self) -> dict[str, Any]:
        """This model's `Parameters` as the wrapped parley model's (the fields `sent_as` names)."""
        fields = self.parameters.model_dump(include=set(self.sent_as))
        return {self.sent_as[name]: value for name, value in fields.items() if value is not None}

    def _build(self) -> ChatModel:
        unknown = sorted(set(self.client_kwargs) - set(self.client_kwargs_supported))
        if unknown:
            raise UserError(
                f"{type(self).__name__} takes client_kwargs "
                f"{', '.join(self.client_kwargs_supported)}; not {', '.join(unknown)}"
            )
        credential = self.credential
        if "base_url" in self.client_kwargs and credential is not None:
            credential = credential.model_copy(update={"base_url": self.client_kwargs["base_url"]})
        formatter = getattr(self.formatter, "parley_formatter", self.formatter)
        if formatter is not None and not isinstance(formatter, Formatter):
            raise UserError(
                f"formatter must be one of parley.compat.agentscope.formatter's, not "
                f"{type(formatter).__name__}"
            )
        inner = self.parley_class(
            credential,
            self.model,
            self.parley_parameters(),
            stream=self.stream,
            max_retries=self.max_retries,
            context_size=self.context_size,
            formatter=formatter,
            timeout=float(self.client_kwargs.get("timeout", 120.0)),
        )
        # AgentScope waits `retry_delay` between tries: parley's backoff, capped at it.
        inner.retry = RetryPolicy(
            max_retries=self.max_retries,
            initial_delay=self.retry_delay,
            max_delay=self.retry_delay,
        )
        return inner

    def to_parley(self) -> ChatModel:
        """The parley model this one wraps (for parley's agents)."""
        return self._parley

    def for_call(self, kwargs: dict[str, Any]) -> ChatModel:
        """The parley model for one call, taking the call's keywords it handles out of `kwargs`.

        The others are parley parameters for this call only (`temperature=0.2`, ...).
        """
        return self._parley

    @classmethod
    def list_models(cls, custom_yaml_dir: str | None = None) -> list[ModelCard]:
        """The wrapped provider's model cards."""
        return cls.parley_class.list_models(custom_yaml_dir)

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg | pm.Msg | dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | str | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chosen, mode = choose_tools(tools, tool_choice)
        conversation = to_parley(messages)
        ids = {"text_id": new_id(), "thinking_id": new_id()}
        inner = self.for_call(kwargs)
        if self.stream:
            stream = inner.chat_stream(conversation, chosen, mode, **kwargs)
            return _converted(stream, ids)
        answer = await inner.chat(conversation, chosen, mode, **kwargs)
        return chat_response(answer, response_id=answer.id, **ids)

    async def aclose(self) -> None:
        """Close the wrapped model's connections."""
        close = getattr(self._parley, "aclose", None)
        if close is not None:
            await close()


def _shown_signature(cls: type[ParleyChatModel]) -> inspect.Signature:
    """`cls`'s constructor as AgentScope's class spells it: its `Parameters`, its context size."""
    shown = inspect.signature(cls.__init__)
    changed: dict[str, dict[str, Any]] = {
        "parameters": {"annotation": f"{cls.__qualname__}.Parameters | None"},
        "context_size": {"annotation": "int", "default": cls.default_context_size},
    }
    return shown.replace(
        parameters=[
            p.replace(**changed[p.name]) if p.name in changed and p.default is None else p
            for p in shown.parameters.values()
            if p.name != "self"
        ]
    )


async def _converted(stream: ChatStream, ids: dict[str, str]) -> AsyncGenerator[ChatResponse, None]:
    response_id = new_id()
    try:
        async for chunk in stream:
            yield chat_response(chunk, response_id=response_id, **ids)
    finally:
        await stream.aclose()
