"""`ChatModel`: the base every provider's chat model builds on.

A provider implements one method, `_stream(request)`, an async iterator of deltas (and may
override `_complete(request)` when its API answers whole responses more cheaply). The base
does the rest once for all: message and tool normalization, `tool_choice` checks, parameter
merging, retries, streaming with cancellation, the response cache, usage timing, structured
output and the sync twins.

A custom provider may follow AgentScope's three steps instead (seed 003): a credential whose
`get_chat_model_class()` names the model; a model class with an inner `Parameters` class that
implements `_call_api(request)`, returning a whole `ChatResponse` or an async iterator of
delta `ChatResponse`s; and model cards as YAML files in a `_models/` folder beside the
model's module, found without further setting.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import json
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ValidationError

from parley import tracing
from parley._sync import iterate_sync, run_sync
from parley.errors import UserError
from parley.messages import Msg, ToolCallBlock
from parley.models._provider import adopt_provider_class, check_credential, check_parameters
from parley.models.accumulator import (
    Delta,
    MetaDelta,
    StreamAccumulator,
    ToolCallDelta,
    made_by,
)
from parley.models.cache import ResponseCache, block_delta, replay
from parley.models.cards import ModelCard, Pricing, load_cards
from parley.models.credentials import Credential
from parley.models.formatter import Formatter, MultiAgentFormatter
from parley.models.parameters import Parameters
from parley.models.request import ChatRequest, MessagesInput
from parley.models.response import ChatResponse, StructuredResponse
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, call_with_retries
from parley.models.stream import ChatStream
from parley.models.tools import (
    ToolChoicePolicy,
    ToolLike,
    ToolSpec,
    check_tool_choice,
    to_tool_specs,
)

__all__ = ["ALLOW_MODEL_REQUESTS", "ChatModel", "ChatRequest", "MessagesInput", "ToolsInput"]


async def _call_api_deltas(
    answer: Awaitable[ChatResponse | AsyncIterator[ChatResponse]],
) -> AsyncIterator[Delta]:
    """Deltas of what a `_call_api` answered: a whole response, or delta chunks."""
    result = await answer
    if isinstance(result, ChatResponse):
        async for delta in replay(result):
            yield delta
        return
    named: set[str] = set()
    async for chunk in result:
        for block in chunk.content:
            if not isinstance(block, ToolCallBlock):
                yield block_delta(0, block)
                continue
            # A tool call's pieces share its id (the accumulator's key); its name counts once
            # (the accumulator joins names that come in pieces).
            raw = block.raw_input
            if raw is None:
                raw = json.dumps(block.input, ensure_ascii=False) if block.input else ""
            name = None if block.id in named else block.name
            named.add(block.id)
            yield ToolCallDelta(block.id, block.id, name, raw)
        if chunk.usage is not None or chunk.finish_reason is not None:
            yield MetaDelta(usage=chunk.usage, finish_reason=chunk.finish_reason)


ALLOW_MODEL_REQUESTS = True
"""When False, provider adapters refuse requests to any host but this machine.

The test suite sets it False in its `conftest.py`, so no test can reach the internet, while
tests against local servers speaking a provider's wire format still run.
"""

ToolsInput = Sequence[ToolSpec | ToolLike | Mapping[str, Any]] | None


@functools.lru_cache(maxsize=64)
def _cards(location: str | Path, parameters: type[Parameters]) -> tuple[ModelCard, ...]:
    # Read once per process: building a model looks its card up.
    return tuple(load_cards(location, parameters.model_json_schema()))


def _as_msgs(messages: MessagesInput) -> list[Msg]:
    if isinstance(messages, (str, Msg, Mapping)):
        raise UserError("messages must be a list of Msg or dicts, not a single message")
    try:
        return [m if isinstance(m, Msg) else Msg.model_validate(m) for m in messages]
    except ValidationError as exc:
        raise UserError(f"bad message: {exc}") from None


class ChatModel:
    """A chat model: call it with messages, get a response or a stream of deltas.

    Args:
        credential: The provider's credential; None builds the default one (environment).
        model: The model's name at the provider.
        parameters: Generation parameters (the provider's `Parameters` class, or a dict).
        stream: Whether calling the model (`await model(...)`) streams.
        max_retries: Tries after the first on retryable failures.
        context_size: The context window in tokens; from the model card when not given.
        formatter: Overrides how messages become the provider's payload.
        cache_dir: Turns on the on-disk response cache in this folder.
        timeout: Seconds to wait for the provider to answer.
    """

    provider: ClassVar[str] = "base"
    parameters_class: ClassVar[type[Parameters]] = Parameters
    credential_class: ClassVar[type[Credential] | None] = None
    cards_location: ClassVar[str | Path | None] = None
    """A package whose `_models/` folder holds the cards, or a folder."""
    structured_strategies: ClassVar[tuple[str, ...]] = ("forced", "auto", "thinking_off", "text")
    """How `generate_structured_output` asks, in order (see `parley.models.structured`)."""
    thinking_off: ClassVar[dict[str, Any]] = {}
    """Parameter overrides that switch reasoning off, for the `thinking_off` strategy."""
    multi_agent_formatter_class: ClassVar[type[MultiAgentFormatter] | None] = None
    """The provider's multi-agent formatter (other agents' turns folded), if it has one."""
    default_tool_choice: ToolChoicePolicy = None
    """The tool-choice policy an agent uses with this model when it is given none (see
    `ToolChoicePolicy`); None lets the model choose in every call. Set it on an instance to
    change it for that model."""
    trace_calls: ClassVar[bool] = True
    """Whether tracing makes a `chat` span of each call; False for a wrapper whose inner
    model's calls are traced (one span per call, so its usage is counted once)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        adopt_provider_class(cls, Parameters)

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: Parameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        max_retries: int = 3,
        context_size: int | None = None,
        formatter: Formatter | None = None,
        *,
        cache_dir: str | Path | None = None,
        timeout: float = 120.0,
    ) -> None:
        cls = type(self)
        if cls._stream is ChatModel._stream and cls._call_api is ChatModel._call_api:
            # What an abstract method would say: the provider implements one of the two.
            raise TypeError(f"{cls.__name__} implements neither _stream nor _call_api")
        if not model:
            raise UserError(f"{type(self).__name__} needs a model name")
        self.credential = self._check_credential(credential)
        self.model = model
        self.parameters = self._check_parameters(parameters)
        self.stream = stream
        self.retry = RetryPolicy(max_retries=max_retries)
        self.formatter = formatter
        self.timeout = timeout
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        card = self.card()
        self.context_size = context_size or (card.context_size if card else None)
        self.pricing: Pricing | None = card.pricing if card else None
        """The model's prices (from its card; set your own): usages then carry `cost`."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, stream={self.stream})"

    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        """The exception classes a failed call is retried on (AgentScope's hook).

        `DEFAULT_RETRYABLE` (connection errors, timeouts, HTTP errors of retryable statuses);
        a provider overrides it to add its SDK's transient errors or to retry nothing (`()`).
        See `parley.models.retry`.
        """
        return DEFAULT_RETRYABLE

    # -- configuration ------------------------------------------------------------------------

    def _check_credential(self, credential: Credential | None) -> Credential | None:
        return check_credential(type(self), self.credential_class, credential)

    def _check_parameters(self, parameters: Parameters | Mapping[str, Any] | None) -> Parameters:
        return check_parameters(type(self), self.parameters_class, parameters)

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[ModelCard]:
        """The model cards for this class (from `custom_yaml_dir` when given)."""
        location = custom_yaml_dir or cls.cards_location
        if location is None:
            return []
        cards = _cards(location, cls.parameters_class)
        return [card.model_copy(deep=True) for card in cards]

    def card(self) -> ModelCard | None:
        """This model's card, when there is one."""
        location = self.cards_location
        if location is None:
            return None
        cards = _cards(location, self.parameters_class)
        found = next((c for c in cards if c.name == self.model), None)
        return found.model_copy(deep=True) if found else None

    def multi_agent_formatter(self, self_name: str) -> Formatter | None:
        """This model's formatter, folding other agents' turns for `self_name`; None: none.

        Used when the model's agent talks with other agents (`parley.agents.multi`).
        """
        formatter = self.formatter
        if isinstance(formatter, MultiAgentFormatter):
            return type(formatter)(self_name, formatter.formatter, layout=formatter.layout)
        cls = self.multi_agent_formatter_class
        return cls(self_name, formatter) if cls is not None else None

    def with_formatter(self, formatter: Formatter) -> Self:
        """A copy of this model that formats with `formatter`, sharing its connections.

        Closing the original (`aclose`, `close_sync`) closes the copy's connections too.
        """
        copied = self._shared_copy()
        copied.formatter = formatter
        return copied

    def with_parameters(self, **overrides: Any) -> Self:
        """A copy of this model with `overrides` over its parameters, sharing its connections.

        Closing the original (`aclose`, `close_sync`) closes the copy's connections too.

        Raises:
            UserError: An override names no parameter of this provider, or has a bad value.
        """
        copied = self._shared_copy()
        copied.parameters = self.parameters.merged(**overrides)
        return copied

    def _shared_copy(self) -> Self:
        copied = copy.copy(self)
        client = getattr(self, "client", None)
        if callable(client):
            # Through the original's client: providers make theirs on first use, and a copy
            # made before that would otherwise open (and never close) connections of its own.
            vars(copied)["client"] = client
        return copied

    @staticmethod
    def check_allowed(base_url: str | None) -> None:
        """Refuse a request to another machine when `ALLOW_MODEL_REQUESTS` is off.

        Raises:
            UserError: Requests are blocked and `base_url` is not on this machine.
        """
        if ALLOW_MODEL_REQUESTS or base_url is None:
            return
        host = urlsplit(base_url).hostname or ""
        try:
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = host == "localhost"
        if not local:
            raise UserError(
                f"model requests to {host!r} are blocked: parley.models.base.ALLOW_MODEL_REQUESTS"
                " is False (as in the test suite)"
            )

    # -- calling ------------------------------------------------------------------------------

    def build_request(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        response_format: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> ChatRequest:
        """Normalize and check one call's inputs.

        Raises:
            UserError: Bad messages, tools, tool choice or parameters.
        """
        specs = to_tool_specs(tools)
        return ChatRequest(
            messages=_as_msgs(messages),
            tools=specs,
            tool_choice=check_tool_choice(tool_choice, specs),
            parameters=self.parameters.merged(**overrides),
            response_format=response_format,
        )

    async def __call__(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        **overrides: Any,
    ) -> ChatResponse | ChatStream:
        """Call the model: a `ChatResponse`, or a `ChatStream` when built with `stream=True`."""
        if self.stream:
            return self.chat_stream(messages, tools, tool_choice, **overrides)
        return await self.chat(messages, tools, tool_choice, **overrides)

    async def chat(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        **overrides: Any,
    ) -> ChatResponse:
        """Call the model and wait for the whole response."""
        request = self.build_request(messages, tools, tool_choice, **overrides)
        return await self.complete(request)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer a prepared request whole: cache, retries and timing around `_complete`."""
        key = self._cache_key(request)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)):
            return hit  # no model call, so no span
        with tracing.chat_call(self, request) as span:
            started = time.monotonic()
            response = await call_with_retries(
                self.retry,
                lambda: self._complete(request),
                describe=f"{self.provider} call",
                retry_on=self._get_retryable_exceptions(),
            )
            usage = response.usage.model_copy() if response.usage else None
            if usage is not None:
                usage.elapsed = time.monotonic() - started
                if self.pricing is not None:
                    usage.cost = self.pricing.usage_cost(usage)
                response.usage = usage
            response.model = response.model or self.model
            if (maker := self.thinking_provider()) is not None:
                made_by(response.content, maker)
            span.response(response)
        if key is not None and self.cache is not None:
            self.cache.put(key, response)
        return response

    def chat_stream(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        **overrides: Any,
    ) -> ChatStream:
        """Call the model and stream the answer as delta chunks, then the whole."""
        request = self.build_request(messages, tools, tool_choice, **overrides)
        return self.open_stream(request)

    def open_stream(self, request: ChatRequest) -> ChatStream:
        """Stream a prepared request: cache, retries before the first chunk, cancellation."""
        key = self._cache_key(request)
        cache = self.cache
        if key is not None and cache is not None and (hit := cache.get(key)):
            return ChatStream(
                lambda: replay(hit), model=self.model, provider=self.thinking_provider()
            )
        on_final = (lambda final: cache.put(key, final)) if key and cache else None
        trace = tracing.chat_stream(self, request)  # None when tracing is off
        open_source = lambda: self._stream(request)  # noqa: E731
        return ChatStream(
            open_source if trace is None else trace.watch(open_source),
            policy=self.retry,
            retry_on=self._get_retryable_exceptions(),
            model=self.model,
            on_final=on_final,
            pricing=self.pricing,
            trace=trace,
            provider=self.thinking_provider(),
        )

    def thinking_provider(self) -> str | None:
        """The provider recorded on the thinking blocks of this model's answers.

        `ThinkingBlock.provider`: formatters send a block's signature to its maker only. The
        model's `provider` by default; None leaves blocks as they come (a scripted model).
        """
        return self.provider

    def _cache_key(self, request: ChatRequest) -> str | None:
        if self.cache is None:
            return None
        return self.cache.key(self.provider, self.model, request)

    # -- sync twins ---------------------------------------------------------------------------

    def chat_sync(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        **overrides: Any,
    ) -> ChatResponse:
        """`chat`, from synchronous code."""
        return run_sync(self.chat(messages, tools, tool_choice, **overrides))

    def chat_stream_sync(
        self,
        messages: MessagesInput,
        tools: ToolsInput = None,
        tool_choice: str | None = None,
        **overrides: Any,
    ) -> Iterator[ChatResponse]:
        """`chat_stream`, from synchronous code."""

        async def chunks() -> AsyncIterator[ChatResponse]:
            stream = self.chat_stream(messages, tools, tool_choice, **overrides)
            try:
                async for chunk in stream:
                    yield chunk
            finally:
                await stream.aclose()

        return iterate_sync(chunks())

    # -- structured output --------------------------------------------------------------------

    async def generate_structured_output(
        self,
        messages: MessagesInput,
        schema: type[BaseModel] | Mapping[str, Any],
        **overrides: Any,
    ) -> StructuredResponse:
        """Get an answer that validates against `schema` (a pydantic model or JSON schema).

        See `parley.models.structured` for the strategy: a forced tool call where the provider
        takes one, falling back step by step; arguments repaired guided by the schema; the
        validation error sent back to the model for one more try.
        """
        from parley.models.structured import generate_structured_output  # noqa: PLC0415

        return await generate_structured_output(self, messages, schema, **overrides)

    def generate_structured_output_sync(
        self,
        messages: MessagesInput,
        schema: type[BaseModel] | Mapping[str, Any],
        **overrides: Any,
    ) -> StructuredResponse:
        """`generate_structured_output`, from synchronous code."""
        return run_sync(self.generate_structured_output(messages, schema, **overrides))

    # -- provider hooks -----------------------------------------------------------------------

    def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        """Stream the provider's answer as deltas; raise parley errors (mapped in one place).

        By default, the deltas of what `_call_api` answers (the seed's hook).
        """
        if type(self)._call_api is ChatModel._call_api:
            raise NotImplementedError(
                f"{type(self).__name__} implements neither _stream nor _call_api"
            )
        return _call_api_deltas(self._call_api(request))

    async def _call_api(self, request: ChatRequest) -> ChatResponse | AsyncIterator[ChatResponse]:
        """The seed's provider hook: the whole answer, or its delta chunks (`is_last=False`).

        Implement this or `_stream`. Delta chunks carry new text and thinking; a tool call's
        chunks share its block id and carry argument text in `raw_input` (or a whole `input`).
        """
        raise NotImplementedError

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        """The whole answer; by default the stream, accumulated."""
        accumulator = StreamAccumulator(self.model)
        async for delta in self._stream(request):
            accumulator.add(delta)
        return accumulator.final()
