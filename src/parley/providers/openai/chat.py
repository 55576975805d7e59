"""`OpenAIChatModel`: OpenAI's Chat Completions API, and the base of compatible presets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

from parley.models.accumulator import Delta
from parley.models.base import ChatRequest
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.providers.openai._chat_wire import ChatStreamReader, completion_deltas
from parley.providers.openai._common import OpenAIModelBase
from parley.providers.openai.formatter import OpenAIChatFormatter
from parley.providers.openai.parameters import OpenAIParameters

__all__ = ["OpenAIChatModel", "chat_tool_fields", "json_schema_format"]


def chat_tool_fields(request: ChatRequest) -> dict[str, Any]:
    """`tools` and `tool_choice` for Chat Completions (nothing when no tools are given).

    `tool_choice` and `parallel_tool_calls` are sent only with tools: OpenAI refuses them
    otherwise.
    """
    if not request.tools:
        return {}
    fields: dict[str, Any] = {"tools": [spec.openai() for spec in request.tools]}
    choice = request.tool_choice
    if choice in ("auto", "none", "required"):
        fields["tool_choice"] = choice
    elif choice is not None:
        fields["tool_choice"] = {"type": "function", "function": {"name": choice}}
    return fields


def json_schema_format(schema: dict[str, Any], name: str = "response") -> dict[str, Any]:
    """A `json_schema` response format for Chat Completions.

    Not `strict`: strict mode needs `additionalProperties: false` and every property
    required, which few schemas are.
    """
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


class OpenAIChatModel(OpenAIModelBase):
    """A model behind OpenAI's Chat Completions API (`/v1/chat/completions`).

    Streams ask for usage in the last chunk (`stream_options.include_usage`); reasoning,
    usage and finish reasons are read also as OpenAI-compatible providers send them, so
    presets (`parley.providers.openai.deepseek`, ...) are thin subclasses.

    Example:
        >>> model = OpenAIChatModel(OpenAICredential(api_key="sk-..."), "gpt-4o-mini")
        >>> response = await model([Msg.user("Hi!")])  # doctest: +SKIP
    """

    parameters_class: ClassVar[type[Parameters]] = OpenAIParameters
    structured_strategies: ClassVar[tuple[str, ...]] = ("forced", "native", "auto", "text")
    max_tokens_field: ClassVar[str] = "max_completion_tokens"
    """The wire name of `max_tokens` (OpenAI deprecated `max_tokens` for its models)."""
    send_thinking: ClassVar[bool] = False
    """Whether the default formatter sends thinking back (`reasoning_content`)."""
    stream_usage: ClassVar[bool] = True
    """Whether to ask for usage in streams (`stream_options`); some servers refuse it."""

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given."""
        return OpenAIChatFormatter(send_thinking=self.send_thinking)

    def wire_parameters(self, parameters: Parameters, *, tools: bool) -> dict[str, Any]:
        """The request fields for `parameters`; presets override to rename or reshape."""
        fields = parameters.to_kwargs()
        if "max_tokens" in fields and self.max_tokens_field != "max_tokens":
            fields[self.max_tokens_field] = fields.pop("max_tokens")
        if not tools:
            fields.pop("parallel_tool_calls", None)
        return fields

    def request_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of the request."""
        formatter = self.formatter or self.default_formatter()
        body: dict[str, Any] = {"model": self.model, "messages": formatter.format(request.messages)}
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(chat_tool_fields(request))
        if request.response_format is not None:
            body["response_format"] = json_schema_format(request.response_format)
        body.update(self.wire_parameters(request.parameters, tools=bool(request.tools)))
        return body

    def _open(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        # The body is parley's own wire-format dict: the SDK sends it as given (`extra_body`)
        # and answers with the raw response, unparsed. The messages go in `extra_body` too,
        # which takes precedence over the SDK's arguments: passed as `messages`, the SDK would
        # walk them against its TypedDict unions, a third of a call's time (measured with
        # benchmarks/models.py), to send the same JSON.
        completions = self.client().chat.completions.with_streaming_response
        model = body.pop("model")
        stream = bool(body.pop("stream", False))
        return completions.create(model=model, messages=[], stream=stream, extra_body=body)

    def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        reader = ChatStreamReader(model=self.model, provider=self.provider)
        return self.stream_events(self.request_body(request, stream=True), reader)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        parsed = await self.fetch_json(self.request_body(request, stream=False))
        return self.accumulate(completion_deltas(parsed, model=self.model, provider=self.provider))
