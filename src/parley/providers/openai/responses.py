"""`OpenAIResponseModel`: OpenAI's Responses API (`/v1/responses`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

from parley.models.accumulator import Delta
from parley.models.base import ChatRequest
from parley.models.cards import THINKING
from parley.models.formatter import Formatter
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse
from parley.providers.openai._common import OpenAIModelBase
from parley.providers.openai._responses_wire import ResponsesStreamReader, response_deltas
from parley.providers.openai.parameters import OpenAIResponsesParameters
from parley.providers.openai.responses_formatter import OpenAIResponsesFormatter

__all__ = ["OpenAIResponseModel", "responses_tool_fields"]


def responses_tool_fields(request: ChatRequest) -> dict[str, Any]:
    """`tools` and `tool_choice` in the Responses API's flat form (nothing without tools).

    Function tools are `strict` by default in the Responses API, which refuses schemas
    that do not meet strict mode's rules; parley sends `strict: false` unless a tool asks.
    """
    if not request.tools:
        return {}
    tools = [
        {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
            "strict": bool(spec.strict),
        }
        for spec in request.tools
    ]
    fields: dict[str, Any] = {"tools": tools}
    choice = request.tool_choice
    if choice in ("auto", "none", "required"):
        fields["tool_choice"] = choice
    elif choice is not None:
        fields["tool_choice"] = {"type": "function", "name": choice}
    return fields


class OpenAIResponseModel(OpenAIModelBase):
    """A model behind OpenAI's Responses API.

    Stateless: every call sends the whole conversation. Reasoning items come back as
    thinking blocks that keep the item (`ThinkingBlock.extra`: `id`, `encrypted_content`,
    `summary`), and go back to OpenAI as they came, so a reasoning model keeps its chain of
    thought across tool calls without server-side state.
    """

    parameters_class: ClassVar[type[Parameters]] = OpenAIResponsesParameters
    structured_strategies: ClassVar[tuple[str, ...]] = ("forced", "native", "auto", "text")

    def default_formatter(self) -> Formatter:
        """The formatter used when none was given."""
        return OpenAIResponsesFormatter()

    _card_reasons: bool | None = None

    def _reasons(self, parameters: Parameters) -> bool:
        fields = parameters.to_kwargs()
        if "reasoning_effort" in fields or "reasoning_summary" in fields:
            return True
        if self._card_reasons is None:
            card = self.card()
            self._card_reasons = card is not None and card.produces(THINKING)
        return self._card_reasons

    def wire_parameters(self, parameters: Parameters, *, tools: bool) -> dict[str, Any]:
        """The request fields for `parameters` (nested as the Responses API wants them)."""
        fields = parameters.to_kwargs()
        body: dict[str, Any] = {}
        if "max_tokens" in fields:
            body["max_output_tokens"] = fields.pop("max_tokens")
        reasoning = {
            key: fields.pop(name)
            for name, key in (("reasoning_effort", "effort"), ("reasoning_summary", "summary"))
            if name in fields
        }
        if reasoning:
            body["reasoning"] = reasoning
        if "verbosity" in fields:
            body["text"] = {"verbosity": fields.pop("verbosity")}
        if not tools:
            fields.pop("parallel_tool_calls", None)
        if self._reasons(parameters):
            # Encrypted reasoning lets the next call continue the chain of thought even when
            # OpenAI stores nothing (`store: false`, zero data retention).
            body["include"] = ["reasoning.encrypted_content"]
        return {**body, **fields}

    def request_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of the request."""
        formatter = self.formatter or self.default_formatter()
        body: dict[str, Any] = {"model": self.model, "input": formatter.format(request.messages)}
        if stream:
            body["stream"] = True
        body.update(responses_tool_fields(request))
        body.update(self.wire_parameters(request.parameters, tools=bool(request.tools)))
        if request.response_format is not None:
            schema_format = {
                "type": "json_schema",
                "name": "response",
                "schema": request.response_format,
                "strict": False,
            }
            body["text"] = {**body.get("text", {}), "format": schema_format}
        return body

    def _open(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        # As in `OpenAIChatModel._open`: parley's body as given, the raw response back. The
        # input items stay in `extra_body`, out of the SDK's walk of its TypedDict unions.
        responses = self.client().responses.with_streaming_response
        model = body.pop("model")
        stream = bool(body.pop("stream", False))
        return responses.create(model=model, stream=stream, extra_body=body)

    def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        reader = ResponsesStreamReader(model=self.model, provider=self.provider)
        return self.stream_events(self.request_body(request, stream=True), reader)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        parsed = await self.fetch_json(self.request_body(request, stream=False))
        return self.accumulate(response_deltas(parsed, model=self.model, provider=self.provider))
