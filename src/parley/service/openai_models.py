"""A served model on `/v1/chat/completions`: the request goes to the model as it is.

`model` names one of the service's served models (`parley.service.served_models`), and the
request is one call of that model, as an OpenAI-compatible model server answers it:

- `messages` are the conversation as the client keeps it: it may end with `tool` results
  for the model to read (no thread is stored; `X-Thread-Id` is refused).
- `tools` go to the model, and its tool calls come back as `tool_calls` with
  `finish_reason: "tool_calls"`, for the client to run; `tool_choice` (`auto`, `none`,
  `required` or a function) and `parallel_tool_calls` go with them.
- `response_format` `json_object` or `json_schema` constrains the answer where the model's
  provider can (`native` structured output); it is refused (400) where it cannot.
- Sampling parameters the model's provider takes (`temperature`, `top_p`, `max_tokens` or
  `max_completion_tokens`, `stop`, `seed`, penalties, `top_k`, ...) apply to this call; the
  others are ignored, as OpenAI-compatible servers do. `n` above 1, `logprobs` and the
  legacy `functions`/`function_call` are refused (400).
- Streams (`stream: true`) send a role chunk, content, `reasoning_content` and tool-call
  deltas as the model makes them, a chunk with the `finish_reason`, a usage chunk when
  `stream_options.include_usage`, then `data: [DONE]`. A model that fails before its first
  delta answers with an HTTP error; after it, with an error frame and `[DONE]`. A client
  that leaves stops the model's call; one that does not read for `send_timeout` is dropped.

The provider's errors come back as OpenAI's: a context overflow 400
(`context_length_exceeded`), a content filter 400 (`content_filter`), a provider's rate
limit 429 with its `Retry-After`, any other failure 502.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from parley.errors import (
    ConfigurationError,
    ContentFilterError,
    ContextLengthError,
    MissingDependencyError,
    ParleyError,
    RateLimitError,
    UserError,
)
from parley.messages import TextBlock, ThinkingBlock, ToolCallBlock, Usage
from parley.models.base import ChatModel, ChatRequest
from parley.models.response import ChatResponse
from parley.models.stream import ChatStream
from parley.models.tools import ToolSpec, check_tool_choice, to_tool_specs
from parley.service.bounds import (
    CONNECTION,
    ClientConnection,
    ClientTooSlow,
    TimedStream,
    check_messages,
)
from parley.service.openai_messages import OpenAIError, bad_request, conversation, error_body
from parley.service.openai_schema import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    ChunkDelta,
    CompletionUsage,
    ErrorResponse,
    FinishReason,
    FunctionCall,
    FunctionDelta,
    MessageToolCall,
    OutputMessage,
    ParleyRun,
    ToolCallDelta,
)
from parley.service.served_models import ModelEntry
from parley.service.settings import ServiceSettings
from parley.service.sse import DONE, frame

__all__ = ["Completion", "model_completion"]

log = logging.getLogger("parley.service")

SAMPLING = (
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
    "parallel_tool_calls",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "top_k",
    "min_p",
    "repeat_penalty",
    "reasoning_effort",
)
"""Request fields that reach the model when its provider has them: how it samples, never
where it runs or who pays (`service_tier`, `store` and the like stay the operator's)."""

_FINISH: dict[str, FinishReason] = {
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
"""OpenAI's finish reason for parley's; `stop` for the others."""

_REFUSED: list[tuple[str, Callable[[ChatCompletionRequest], bool], str]] = [
    ("n", lambda b: b.n not in (None, 1), "a served model gives one answer: n must be 1"),
    ("logprobs", lambda b: bool(b.logprobs), "log probabilities are not served: leave it out"),
    (
        "functions",
        lambda b: b.functions is not None,
        "the legacy `functions` is not served: send them as `tools`",
    ),
    (
        "function_call",
        lambda b: b.function_call is not None,
        "the legacy `function_call` is not served: use `tool_choice`",
    ),
]
"""Fields a served model refuses, each with its test and why."""


async def model_completion(
    body: ChatCompletionRequest, entry: ModelEntry, settings: ServiceSettings
) -> Response:
    """One call of the served model `entry` on the request: its answer, whole or streamed.

    Raises:
        OpenAIError: A field the model cannot take (400), the model cannot be built (503),
            or the provider refused the call (400, 429).
    """
    model = _model_of(entry)
    request = model_request(body, model, settings.max_message_chars)
    completion = Completion(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), entry.key)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        stream = model.open_stream(request)
        with _provider_errors(), _closed_on_error(stream):
            # The first delta before any byte of the answer: a model that fails at once
            # (a bad key, a refused request) answers with an HTTP error, not an error frame.
            first = await anext(stream)
        chunks = _chunks(stream, first, completion, include_usage=include_usage)
        return _ModelStream(chunks, send_timeout=settings.send_timeout)
    with _provider_errors():
        response = await model.complete(request)
    return JSONResponse(_whole(completion, response).model_dump(mode="json"))


def _model_of(entry: ModelEntry) -> ChatModel:
    try:
        return entry.model
    except UserError as exc:  # no key, a missing extra: the operator's to fix, not the client's
        log.error("served model %r cannot be built: %s", entry.key, exc)
        raise OpenAIError(
            f"the model {entry.key!r} is not available: {exc} (the service's configuration)",
            status_code=503,
            code="model_not_available",
        ) from None


# -- the request -------------------------------------------------------------------------------


def model_request(body: ChatCompletionRequest, model: ChatModel, max_chars: int) -> ChatRequest:
    """The model's call for an OpenAI request.

    Raises:
        OpenAIError: A field the model cannot take (400, the field in `param`).
    """
    for field, refused, reason in _REFUSED:
        if refused(body):
            raise bad_request(field, reason)
    messages = conversation(body.messages)
    check_messages(messages, max_chars, ("body", "messages"))
    tools = _tools(body.tools)
    tool_choice = _tool_choice(body.tool_choice, tools)
    response_format = _response_format(body.response_format, model)
    overrides = _sampling(body, model)
    try:
        return model.build_request(messages, tools, tool_choice, response_format, **overrides)
    except UserError as exc:
        raise bad_request("messages", str(exc)) from None


def _tools(tools: list[dict[str, Any]] | None) -> list[ToolSpec]:
    for index, tool in enumerate(tools or []):
        if tool.get("type", "function") != "function":
            raise bad_request(
                f"tools[{index}].type", "only function tools are served (`type: function`)"
            )
    try:
        return to_tool_specs(tools)
    except UserError as exc:
        raise bad_request("tools", str(exc)) from None


def _tool_choice(choice: str | dict[str, Any] | None, tools: list[ToolSpec]) -> str | None:
    if isinstance(choice, dict):
        function = choice.get("function")
        choice = function.get("name") if isinstance(function, dict) else None
        if not isinstance(choice, str):
            raise bad_request(
                "tool_choice",
                "a tool choice is auto, none, required, or "
                '{"type": "function", "function": {"name": ...}}',
            )
    try:
        return check_tool_choice(choice, tools)
    except UserError as exc:
        raise bad_request("tool_choice", str(exc)) from None


def _response_format(given: dict[str, Any] | None, model: ChatModel) -> dict[str, Any] | None:
    kind = (given or {}).get("type", "text")
    if kind == "text":
        return None
    if kind not in ("json_object", "json_schema"):
        raise bad_request(
            "response_format.type", f"{kind!r} is not one of text, json_object, json_schema"
        )
    if "native" not in model.structured_strategies:
        raise bad_request(
            "response_format",
            f"this model ({model.provider}) cannot hold its answer to JSON here; leave "
            "response_format out, or ask for JSON in the messages",
        )
    if kind == "json_object":
        return {"type": "object"}
    schema = ((given or {}).get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict):
        raise bad_request("response_format.json_schema.schema", "a JSON schema (an object)")
    return schema


def _sampling(body: ChatCompletionRequest, model: ChatModel) -> dict[str, Any]:
    fields = {**(body.model_extra or {}), "parallel_tool_calls": body.parallel_tool_calls}
    if fields.get("max_tokens") is None:
        fields["max_tokens"] = fields.get("max_completion_tokens")
    if isinstance(fields.get("stop"), str):
        fields["stop"] = [fields["stop"]]
    known = type(model.parameters).model_fields
    overrides = {
        name: fields[name] for name in SAMPLING if name in known and fields.get(name) is not None
    }
    for name, value in overrides.items():
        try:
            model.parameters.merged(**{name: value})
        except UserError as exc:
            raise bad_request(name, str(exc)) from None
    return overrides


# -- the answer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """What every chunk or answer of one request repeats: its id, time and model."""

    id: str
    created: int
    model: str

    def answer(
        self,
        message: OutputMessage,
        finish_reason: FinishReason,
        usage: Usage | None,
        parley: ParleyRun | None = None,
    ) -> ChatCompletion:
        """A whole answer, `chat.completion`, of the one choice."""
        choice = Choice(message=message, finish_reason=finish_reason)
        return ChatCompletion(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[choice],
            usage=completion_usage(usage),
            parley=parley,
        )

    def chunk(
        self,
        delta: ChunkDelta,
        *,
        finish_reason: FinishReason | None = None,
        parley: ParleyRun | None = None,
    ) -> str:
        """A `chat.completion.chunk` frame of the one choice."""
        choice = ChunkChoice(delta=delta, finish_reason=finish_reason)
        return self._frame([choice], parley=parley)

    def usage_chunk(self, usage: Usage | None) -> str:
        """The frame that reports the usage (no choice), as OpenAI's last chunk."""
        return self._frame([], usage=completion_usage(usage))

    def _frame(
        self,
        choices: list[ChunkChoice],
        *,
        usage: CompletionUsage | None = None,
        parley: ParleyRun | None = None,
    ) -> str:
        chunk = ChatCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=choices,
            usage=usage,
            parley=parley,
        )
        # `finish_reason: null` stays, as OpenAI sends it; fields a chunk lacks are left out.
        absent = {name for name in ("usage", "parley") if getattr(chunk, name) is None}
        return frame(chunk.model_dump(mode="json", exclude=absent))


def _whole(completion: Completion, response: ChatResponse) -> ChatCompletion:
    """The model's whole answer as a `chat.completion`."""
    calls = [_tool_call(call) for call in response.tool_calls]
    message = OutputMessage(
        content=response.text or (None if calls else ""),
        tool_calls=calls or None,
        reasoning_content=response.thinking or None,
    )
    return completion.answer(message, _finish(response), response.usage)


def _tool_call(call: ToolCallBlock) -> MessageToolCall:
    arguments = call.raw_input
    if arguments is None:
        arguments = json.dumps(call.input, ensure_ascii=False)
    return MessageToolCall(id=call.id, function=FunctionCall(name=call.name, arguments=arguments))


def _finish(response: ChatResponse) -> FinishReason:
    if response.tool_calls:
        return "tool_calls"
    return _FINISH.get(response.finish_reason or "stop", "stop")


def completion_usage(usage: Usage | None) -> CompletionUsage:
    """Parley's `Usage` as OpenAI's `usage` of a completion (no usage: zeros)."""
    usage = usage or Usage()
    return CompletionUsage.model_validate(
        {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        }
    )


# -- streams -----------------------------------------------------------------------------------


class _CallIndexes:
    """OpenAI's `index` of each tool call of a stream, by call id, in the order they come."""

    def __init__(self) -> None:
        self.indexes: dict[str, int] = {}

    def delta(self, call: ToolCallBlock) -> ToolCallDelta:
        """The call's delta: id, type and name the first time, then argument text only."""
        index = self.indexes.get(call.id)
        if index is None:
            index = self.indexes[call.id] = len(self.indexes)
            function = FunctionDelta(name=call.name, arguments=call.raw_input or "")
            return ToolCallDelta(index=index, id=call.id, type="function", function=function)
        return ToolCallDelta(index=index, function=FunctionDelta(arguments=call.raw_input or ""))


def _delta(chunk: ChatResponse, calls: _CallIndexes) -> ChunkDelta | None:
    """What a delta chunk of the model adds, as OpenAI's delta (None: nothing it shows)."""
    text: list[str] = []
    thinking: list[str] = []
    tool_calls: list[ToolCallDelta] = []
    for block in chunk.content:
        if isinstance(block, TextBlock):
            text.append(block.text)
        elif isinstance(block, ThinkingBlock) and block.thinking:
            thinking.append(block.thinking)
        elif isinstance(block, ToolCallBlock):
            tool_calls.append(calls.delta(block))
    if not (text or thinking or tool_calls):
        return None  # a signature, an image: nothing an OpenAI delta carries
    return ChunkDelta(
        content="".join(text) if text else None,
        reasoning_content="".join(thinking) if thinking else None,
        tool_calls=tool_calls or None,
    )


async def _chunks(
    stream: ChatStream, first: ChatResponse, completion: Completion, *, include_usage: bool
) -> AsyncIterator[str]:
    calls = _CallIndexes()
    try:
        yield completion.chunk(ChunkDelta(role="assistant", content=""))
        chunk = first
        while not chunk.is_last:
            if (delta := _delta(chunk, calls)) is not None:
                yield completion.chunk(delta)
            chunk = await anext(stream)
    except ParleyError as exc:
        log.warning("served model %r failed mid-stream: %s", completion.model, exc)
        failed = ErrorResponse(error=error_body(502, f"the model failed: {exc}"))
        yield frame(failed.model_dump(mode="json"))
        yield DONE
        return
    finally:
        await stream.aclose()  # a client that left (or an error) stops the provider's call
    yield completion.chunk(ChunkDelta(), finish_reason=_finish(chunk))
    if include_usage:
        yield completion.usage_chunk(chunk.usage)
    yield DONE


@contextlib.contextmanager
def _closed_on_error(stream: ChatStream) -> Iterator[None]:
    try:
        yield
    except BaseException:
        stream.cancel()
        raise


@contextlib.contextmanager
def _provider_errors() -> Iterator[None]:
    """The provider's refusals as OpenAI's errors; other failures go on (502)."""
    try:
        yield
    except ContextLengthError as exc:
        raise OpenAIError(
            str(exc), status_code=400, param="messages", code="context_length_exceeded"
        ) from None
    except ContentFilterError as exc:
        raise OpenAIError(str(exc), status_code=400, code="content_filter") from None
    except RateLimitError as exc:
        wait = exc.retry_after
        headers = {"Retry-After": f"{max(1, round(wait))}"} if wait is not None else None
        message = f"the model's provider is rate limiting: {exc}"
        raise OpenAIError(message, status_code=429, headers=headers) from None
    except (MissingDependencyError, ConfigurationError) as exc:  # no key, no extra installed
        log.error("a served model is not available: %s", exc)
        message = f"the model is not available: {exc} (the service's configuration)"
        raise OpenAIError(message, status_code=503, code="model_not_available") from None


class _ModelStream(TimedStream):
    """A served model's SSE frames, to a client that keeps up.

    A client that takes no frame for `send_timeout` seconds is dropped (its connection
    closed at once), and the model's call stops: nothing stored waits for it.
    """

    def __init__(self, frames: AsyncIterator[str], *, send_timeout: float) -> None:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(frames, send_timeout=send_timeout, headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the frames; drop the client if it does not keep up."""
        try:
            await super().__call__(scope, receive, send)
        except ClientTooSlow as exc:
            log.warning("served model stream: dropped a client that does not read (%s)", exc)
            connection = scope.get(CONNECTION)
            if isinstance(connection, ClientConnection) and connection.can_abort:
                await connection.abort()
        finally:
            await self._close_frames()
