"""`AnthropicChatModel`: Claude through Anthropic's Messages API (`POST /v1/messages`)."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pydantic_core

from parley.errors import ConfigurationError, UserError
from parley.models._aiohttp import LoopClients, PooledClients
from parley.models._wire import read_json
from parley.models.accumulator import Delta, StreamAccumulator
from parley.models.base import ChatModel, ChatRequest
from parley.models.cards import ModelCard
from parley.models.credentials import APIKeyCredential, Credential
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import CONTAINER, ChatResponse
from parley.providers.anthropic._errors import anthropic_errors
from parley.providers.anthropic._request import mark_cache, parameter_fields, tool_fields
from parley.providers.anthropic._sdk import client_pool
from parley.providers.anthropic._sse import EventSplitter
from parley.providers.anthropic._wire import MessageStreamReader, message_deltas
from parley.providers.anthropic.credentials import AnthropicCredential
from parley.providers.anthropic.formatter import (
    AnthropicChatFormatter,
    AnthropicMultiAgentFormatter,
    split_system,
)
from parley.providers.anthropic.parameters import AnthropicParameters

if TYPE_CHECKING:
    import httpx2
    from anthropic import AsyncAnthropic

    from parley.messages import Msg

__all__ = ["AnthropicChatModel"]

Payload = dict[str, Any]

_MESSAGES_PATH = "/v1/messages"

# A snapshot's date suffix (`claude-haiku-4-5-20251001`): its card is the alias's.
_SNAPSHOT = re.compile(r"-\d{8}$")


def _continued_container(messages: list[Msg]) -> str | None:
    """The container of the turn a request continues: its last message's, if an answer's.

    A paused turn whose server tools ran code goes on in the same container: the request
    names it (the `container` parameter), as Anthropic's code execution guide asks.
    """
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant":
        return None
    container = last.metadata.get(CONTAINER)
    return container if isinstance(container, str) else None


class AnthropicChatModel(PooledClients["AsyncAnthropic"], ChatModel):
    """A Claude model behind Anthropic's Messages API, through the official `anthropic` SDK.

    - The system prompt goes in the top-level `system`; consecutive messages of one role are
      merged; tool results go back as `tool_result` blocks (`AnthropicChatFormatter`).
    - Streams carry text, thinking (its signature kept and sent back on later turns),
      redacted thinking and server-tool blocks (kept whole, sent back unchanged), and tool
      calls whose argument JSON streams in pieces (see `_wire`).
    - `max_tokens`, which the API requires, defaults to the model card's output size.
    - Parameters checked against the model's card before any request: a value the card
      leaves out (extended thinking on models that refuse it, `effort` where there is none)
      is a `UserError` rather than the API's 400.
    - Structured output: a forced tool call; Claude refuses forced tool choice while it
      thinks, so then thinking off, then the API's own JSON-schema output
      (`output_config.format`), then the tool left to the model, then JSON in the text.
    - Errors: 429, 5xx and 529 (`overloaded_error`, also as an `error` event mid-stream) are
      retried, honouring `retry-after`; a prompt too long is a `ContextLengthError`.
    - Stop reasons: `end_turn`, `stop_sequence` and `pause_turn` are `stop`, `max_tokens`
      and `model_context_window_exceeded` are `length`, `tool_use` is `tool_calls`,
      `refusal` is `content_filter`; the response's `metadata` keeps `stop_reason` (and
      `stop_sequence`) as sent.
    - Paused turns: on a long turn of server tools (web search, web fetch, code execution)
      the API may stop with `pause_turn`; the answer's `paused` is then True (whole or
      streamed). Send the conversation back with that answer last, unchanged (`to_msg()`
      keeps its server-tool blocks as they came), and Claude continues the turn; the
      continuation is the rest of the turn, and a later request may hold both as consecutive
      assistant messages, which the formatter sends as one turn. Agents do this themselves.

    Example:
        >>> credential = AnthropicCredential(api_key="sk-ant-...")
        >>> model = AnthropicChatModel(credential, "claude-sonnet-5-5")
        >>> response = await model([Msg.system("Be brief."), Msg.user("Hi!")])  # doctest: +SKIP
    """

    multi_agent_formatter_class = AnthropicMultiAgentFormatter

    provider: ClassVar[str] = "anthropic"
    credential_class: ClassVar[type[Credential] | None] = AnthropicCredential
    parameters_class: ClassVar[type[Parameters]] = AnthropicParameters
    cards_location: ClassVar[str | None] = "parley.providers.anthropic"
    structured_strategies: ClassVar[tuple[str, ...]] = (
        "forced",
        "thinking_off",
        "native",
        "auto",
        "text",
    )
    thinking_off: ClassVar[dict[str, Any]] = {"thinking": "disabled", "thinking_budget": None}
    default_model: ClassVar[str] = "claude-sonnet-5-5"
    """The model `list_models()` lists first (so `model_from_spec("anthropic")` picks it)."""
    fallback_max_tokens: ClassVar[int] = 8192
    """`max_tokens` for a model without a card (the API requires one)."""

    _pool: LoopClients[AsyncAnthropic] | None = None

    # -- cards ----------------------------------------------------------------------------

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[ModelCard]:
        """The model cards, the recommended model (`default_model`) first."""
        cards = super().list_models(custom_yaml_dir)
        return sorted(cards, key=lambda card: card.name != cls.default_model)

    @functools.cached_property
    def _model_card(self) -> ModelCard | None:
        # Looked up once: every request checks its parameters against it.
        return self.card()

    def card(self) -> ModelCard | None:
        """This model's card; a dated snapshot (`...-20251001`) has its alias's."""
        found = super().card()
        if found is None and _SNAPSHOT.search(self.model):
            alias = _SNAPSHOT.sub("", self.model)
            found = next((c for c in self.list_models() if c.name == alias), None)
        return found

    def check_parameters(self, parameters: AnthropicParameters) -> None:
        """Refuse values the model's card rules out (before the API would answer 400).

        Raises:
            UserError: A parameter the model does not take, or a value outside its range.
        """
        card = self._model_card
        if card is None:
            return
        properties: dict[str, Any] = card.parameter_schema.get("properties", {})
        for name, value in parameters.to_kwargs().items():
            spec = properties.get(name)
            if spec is None:
                raise UserError(f"{self.model} takes no `{name}` (see its model card)")
            allowed = spec.get("enum")
            if allowed is not None and value not in allowed:
                raise UserError(f"{self.model} takes `{name}` in {allowed}, not {value!r}")
            maximum = spec.get("maximum")
            if maximum is not None and isinstance(value, int) and value > maximum:
                raise UserError(f"{self.model} takes `{name}` up to {maximum}, not {value}")

    def _default_thinking(self) -> str | None:
        """The thinking mode the model uses when none is sent (its card's default)."""
        if self._model_card is None:
            return None
        spec = self._model_card.parameter_schema.get("properties", {}).get("thinking", {})
        default = spec.get("default")
        return default if isinstance(default, str) else None

    def _thinks(self, parameters: AnthropicParameters) -> bool:
        """Whether the request will have the model think (set, or its card's default).

        `between_tools` counts: the one model that takes it (Claude Sonnet 5.5) still writes
        thinking between tool calls and refuses a forced tool choice in every mode.
        """
        mode = parameters.thinking
        if mode is None and parameters.thinking_budget is not None:
            return True
        return (mode or self._default_thinking()) in ("adaptive", "enabled", "between_tools")

    # -- client ---------------------------------------------------------------------------

    def endpoint(self) -> str | None:
        """The base URL requests go to."""
        credential = self.credential
        return credential.endpoint() if isinstance(credential, APIKeyCredential) else None

    def new_pool(self) -> LoopClients[AsyncAnthropic]:
        """One `AsyncAnthropic` per event loop (`ConfigurationError` without an API key)."""
        return client_pool(api_key=self._api_key(), base_url=self.endpoint(), timeout=self.timeout)

    def _api_key(self) -> str:
        credential = self.credential
        key = credential.key() if isinstance(credential, APIKeyCredential) else None
        if not key:
            raise ConfigurationError(
                f"{type(self).__name__} has no API key: pass one in the credential or set "
                f"{AnthropicCredential.env_key}"
            )
        return key

    def errors(self) -> AbstractContextManager[None]:
        """Map SDK and transport errors raised inside the block to parley's."""
        return anthropic_errors(self.model, self.provider, self.endpoint())

    # -- the request ----------------------------------------------------------------------

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given."""
        return AnthropicChatFormatter()

    def max_tokens(self, parameters: AnthropicParameters) -> int:
        """`max_tokens` to send: the parameter, else the card's output size."""
        if parameters.max_tokens is not None:
            return parameters.max_tokens
        card = self._model_card
        return card.output_size if card and card.output_size else self.fallback_max_tokens

    def request_body(self, request: ChatRequest, *, stream: bool) -> Payload:
        """The JSON body of the request.

        Raises:
            UserError: Parameters the model does not take, or that do not fit together.
        """
        parameters = request.parameters
        assert isinstance(parameters, AnthropicParameters)
        self.check_parameters(parameters)
        formatter = self.formatter or self.default_formatter()
        system, messages = split_system(formatter.format(request.messages))
        body: Payload = {
            "model": self.model,
            "max_tokens": self.max_tokens(parameters),
            "messages": messages,
        }
        if system:
            body["system"] = system
        if stream:
            body["stream"] = True
        body.update(tool_fields(request, parameters, thinks=self._thinks(parameters)))
        body.update(
            parameter_fields(
                request, parameters, body["max_tokens"], default_thinking=self._default_thinking()
            )
        )
        if parameters.cache_system or parameters.cache_messages:
            mark_cache(body, parameters)
        if container := _continued_container(request.messages):
            body["container"] = container
        return body

    # -- calling --------------------------------------------------------------------------

    async def _send(self, body: Payload, *, stream: bool) -> httpx2.Response:
        """Send `body` through the SDK; the HTTP response, its body unread when streaming.

        The body is parley's own wire-format dict, serialized here and handed to the SDK as
        the request's bytes (the SDK's `post`, as its docs show for any endpoint): the SDK
        supplies the client, auth, headers, API version and status errors, and neither walks
        nor re-serializes the body, nor parses the answer into its types. Parley reads the
        answer itself (`_sse`, `_wire`); the SDK's typed events cost most of a stream's time
        (measured with `benchmarks/models_anthropic.py`).
        """
        import httpx2  # noqa: PLC0415  (the SDK's HTTP library; loaded with the client)

        client = self.client()
        content = pydantic_core.to_json(body)
        return await client.post(
            _MESSAGES_PATH, cast_to=httpx2.Response, content=content, stream=stream
        )

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        self.check_allowed(self.endpoint())
        body = self.request_body(request, stream=True)
        reader = MessageStreamReader(model=self.model, provider=self.provider)
        events = EventSplitter()
        with self.errors():
            response = await self._send(body, stream=True)
            chunks = _body(response)
            try:
                # Split into events in this loop (see `_sse`). Read to the end, past the last
                # event: a connection whose body was read whole goes back to the pool.
                async for chunk in chunks:
                    for name, data in events.feed(chunk):
                        if not reader.stopped:
                            for delta in reader.feed(name, data):
                                yield delta
            finally:
                # Closed here, in this task, however the reading ended (the event loop would
                # otherwise close the iterator later, in a task of its own).
                closer = getattr(chunks, "aclose", None)
                if closer is not None:
                    await closer()
                await response.aclose()
        for name, data in events.close():
            if not reader.stopped:
                for delta in reader.feed(name, data):
                    yield delta
        if not reader.complete:
            raise reader.incomplete("the message was complete")

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.check_allowed(self.endpoint())
        body = self.request_body(request, stream=False)
        with self.errors():
            response = await self._send(body, stream=False)
        parsed = read_json(response.content, model=self.model, provider=self.provider)
        deltas = message_deltas(parsed, model=self.model, provider=self.provider)
        return _accumulate(self.model, deltas)


def _body(response: httpx2.Response) -> AsyncIterator[bytes]:
    """The response's bytes, as directly as they can be had.

    Not encoded (the API does not compress event streams), they come straight from the
    transport's stream: the bookkeeping of httpx2's `aiter_raw` and `aiter_bytes` around each
    chunk was a tenth of parley's time per streamed event (benchmarks/models_anthropic.py).
    Encoded bytes are decoded by httpx2.
    """
    import httpx2  # noqa: PLC0415  (loaded with the SDK)

    stream = response.stream
    encoding = response.headers.get("content-encoding", "identity").lower()
    if encoding == "identity" and isinstance(stream, httpx2.AsyncByteStream):
        return aiter(stream)
    return response.aiter_bytes()


def _accumulate(model: str, deltas: Iterable[Delta]) -> ChatResponse:
    accumulator = StreamAccumulator(model)
    for delta in deltas:
        accumulator.add(delta)
    return accumulator.final()
