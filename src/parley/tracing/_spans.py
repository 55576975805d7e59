"""The live spans: what each records, by the GenAI semantic conventions' names.

Imported only when tracing is on (it imports OpenTelemetry). Each span checks
`is_recording()` before building attributes past the ones a sampler decides on, so a span a
sampler drops costs its creation and no more.

`error.type` values: an exception's qualified class name (`parley.errors.RateLimitError`,
`ValueError`); for tools also `tool_not_found`, `invalid_arguments` and `timeout`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as ga
from opentelemetry.semconv.attributes import (
    error_attributes,
    exception_attributes,
    server_attributes,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from parley.tracing import (
    ChatScope,
    EmbeddingsScope,
    EvalScope,
    RetrievalScope,
    ToolScope,
    error_type,
)
from parley.tracing._content import dumps, messages, parts, split_system
from parley.tracing._setup import capture_content

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from parley.messages import Msg, ToolCallBlock, ToolResultBlock, Usage
    from parley.tracing._subjects import (
        TracedAnswer,
        TracedChatModel,
        TracedEmbeddingModel,
        TracedEmbeddings,
        TracedHit,
        TracedRequest,
        TracedRun,
        TracedTool,
    )

__all__ = [
    "AgentSpan",
    "ChatCallSpan",
    "ContextOnly",
    "EmbeddingsSpan",
    "EvalSpan",
    "RetrievalSpan",
    "StreamSpan",
    "ToolSpan",
    "note",
]

OPERATION = ga.GenAiOperationNameValues
E = TypeVar("E")
D = TypeVar("D")

# parley's provider names → (gen_ai.provider.name, the older gen_ai.system): the conventions'
# values where they have one; other providers keep parley's name in both.
_PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("openai", "openai"),
    "anthropic": ("anthropic", "anthropic"),
    "gemini": ("gcp.gemini", "gemini"),
    "deepseek": ("deepseek", "deepseek"),
    "xai": ("x_ai", "xai"),
    "moonshot": ("moonshot_ai", "moonshot_ai"),
    "azure_openai": ("azure.ai.openai", "az.ai.openai"),
}
_VERTEX = ("gcp.vertex_ai", "vertex_ai")

# Request parameters → attributes (the providers' own names where they share one).
_PARAMETERS = {
    "temperature": ga.GEN_AI_REQUEST_TEMPERATURE,
    "top_p": ga.GEN_AI_REQUEST_TOP_P,
    "top_k": ga.GEN_AI_REQUEST_TOP_K,
    "max_tokens": ga.GEN_AI_REQUEST_MAX_TOKENS,
    "seed": ga.GEN_AI_REQUEST_SEED,
    "frequency_penalty": ga.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": ga.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "stop": ga.GEN_AI_REQUEST_STOP_SEQUENCES,
}

RUN_ID = "parley.run.id"
RUN_STATUS = "parley.run.status"
RUN_ITERATIONS = "parley.run.iterations"
COST = "parley.usage.cost"
"""What the calls cost, in the model card's currency (when the price is known)."""


# -- shared pieces ------------------------------------------------------------------------------


WITHHELD = "not recorded: content capture is off"
"""An exception's message where its text may not be recorded."""


def fail(span: Span, kind: str, message: str, error: BaseException | None = None) -> None:
    """Mark `span` failed: status ERROR, `error.type`, and the exception as an event.

    With content capture off the message and the traceback stay out of the span: a tool's
    error quotes its arguments (`boom: <argument>`), a provider's may quote the prompt, and
    a traceback holds both. The event then has the exception's type and a generic message.
    """
    span.set_attribute(error_attributes.ERROR_TYPE, kind)
    if capture_content():
        if error is not None:
            span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, message))
        return
    if error is not None:
        span.add_event(
            "exception",
            {
                exception_attributes.EXCEPTION_TYPE: error_type(error),
                exception_attributes.EXCEPTION_MESSAGE: WITHHELD,
            },
        )
    span.set_status(Status(StatusCode.ERROR, f"{kind} ({WITHHELD})"))


def fail_by(span: Span, error: BaseException) -> None:
    """Mark `span` failed by an exception: its class is the `error.type`."""
    fail(span, error_type(error), str(error) or type(error).__name__, error)


def _provider(model: Any) -> tuple[str, str]:
    name = str(model.provider)
    if name == "gemini" and getattr(model.credential, "vertexai", False):
        return _VERTEX
    return _PROVIDERS.get(name, (name, name))


def _server(model: Any) -> dict[str, Any]:
    """`server.address` and `server.port` of the model's endpoint, when it has one."""
    for owner in (model, model.credential):
        endpoint = getattr(owner, "endpoint", None)
        if callable(endpoint):
            try:
                url = endpoint()
            except Exception:  # a misconfigured endpoint fails the call itself, not its span
                return {}
            break
    else:
        return {}
    if not isinstance(url, str) or not url:
        return {}
    split = urlsplit(url if "://" in url else f"http://{url}")
    if not split.hostname:
        return {}
    port = split.port or (443 if split.scheme == "https" else 80)
    return {server_attributes.SERVER_ADDRESS: split.hostname, server_attributes.SERVER_PORT: port}


def _model_attributes(operation: str, model: Any) -> dict[str, Any]:
    """What a sampler may decide on: the operation, the provider, the model, the server."""
    provider, system = _provider(model)
    return {
        ga.GEN_AI_OPERATION_NAME: operation,
        ga.GEN_AI_PROVIDER_NAME: provider,
        ga.GEN_AI_SYSTEM: system,
        ga.GEN_AI_REQUEST_MODEL: model.model,
        **_server(model),
    }


def _usage(span: Span, usage: Usage | None) -> None:
    if usage is None:
        return
    span.set_attribute(ga.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(ga.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
    span.set_attribute(ga.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens)
    if usage.cache_write_tokens:
        span.set_attribute(ga.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_write_tokens)
    if usage.cost is not None:
        span.set_attribute(COST, usage.cost)


def _current(span: Span, parent: Context | None = None) -> Context:
    return trace.set_span_in_context(span, parent)


def _in_context(context: Context) -> contextvars.Context:
    """A copy of this task's context in which `context` is OpenTelemetry's current one.

    For a task to run in (`create_task(..., context=...)`): it is never detached, as the
    copy ends with the task.
    """
    copied = contextvars.copy_context()
    copied.run(otel_context.attach, context)
    return copied


def note(name: str, value: Any) -> None:
    """Set an attribute on the current span, if it records."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(name, value)


class _Live:
    """A span current for a `with` block around awaits (never across a `yield`)."""

    span: Span

    def __init__(self) -> None:
        self._token: contextvars.Token[Context] | None = None

    def __enter__(self) -> Any:
        self._token = otel_context.attach(_current(self.span))
        return self

    def __exit__(self, *exc_info: object) -> None:
        error = exc_info[1]
        assert self._token is not None  # entered
        otel_context.detach(self._token)
        # A cancellation is no failure: the span just ends.
        if isinstance(error, Exception):
            fail_by(self.span, error)
        self.span.end()


# -- the agent's run ----------------------------------------------------------------------------


class AgentSpan:
    """`invoke_agent {agent}`: a run from its first event to its last (see `AgentTrace`)."""

    def __init__(self, tracer: Tracer, run: TracedRun, input_msgs: Sequence[Msg]) -> None:
        self._tracer = tracer
        self._run = run
        self._input = list(input_msgs)
        self._parent = otel_context.get_current()  # where the run was made: its caller's
        self._context: Context | None = None  # the run's span in its parent, once started

    async def wrap(self, events: AsyncGenerator[E, None]) -> AsyncGenerator[E, None]:
        """The run's events inside its span; no context is attached across the `yield`."""
        span = self._start()
        try:
            async with contextlib.aclosing(events) as inner:
                async for event in inner:
                    yield event
        except BaseException as error:
            self._end(span, error)
            raise
        self._end(span, None)

    @contextlib.contextmanager
    def attached(self) -> Iterator[None]:
        """The run's span current for a block that does not yield."""
        if self._context is None:
            yield
            return
        token = otel_context.attach(self._context)
        try:
            yield
        finally:
            otel_context.detach(token)

    def task_context(self) -> contextvars.Context | None:
        """A context for a task of the run's, its span current."""
        return None if self._context is None else _in_context(self._context)

    def _start(self) -> Span:
        run = self._run
        agent = run.agent
        attributes = {
            ga.GEN_AI_OPERATION_NAME: OPERATION.INVOKE_AGENT.value,
            ga.GEN_AI_AGENT_NAME: agent.name,
            ga.GEN_AI_CONVERSATION_ID: run.memory.thread_id,
            ga.GEN_AI_REQUEST_MODEL: agent.model.model,
            ga.GEN_AI_PROVIDER_NAME: _provider(agent.model)[0],
            RUN_ID: run.run_id,
        }
        span = self._tracer.start_span(
            f"invoke_agent {agent.name}",
            context=self._parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        if span.is_recording():
            if agent.description:
                span.set_attribute(ga.GEN_AI_AGENT_DESCRIPTION, agent.description)
            if capture_content():
                self._record_input(span)
        self._context = _current(span, self._parent)
        return span

    def _record_input(self, span: Span) -> None:
        agent = self._run.agent
        if agent.system_prompt:
            system = [{"type": "text", "content": agent.system_prompt}]
            span.set_attribute(ga.GEN_AI_SYSTEM_INSTRUCTIONS, dumps(system))
        if self._input:
            span.set_attribute(ga.GEN_AI_INPUT_MESSAGES, dumps(messages(self._input)))

    def _end(self, span: Span, error: BaseException | None) -> None:
        run = self._run
        if span.is_recording():
            span.set_attribute(RUN_STATUS, run.status or "interrupted")
            span.set_attribute(RUN_ITERATIONS, run.iterations)
            _usage(span, run.usage)
            if capture_content() and run.final is not None:
                span.set_attribute(ga.GEN_AI_OUTPUT_MESSAGES, dumps(messages([run.final])))
        failure = run.error if run.error is not None else error
        # The consumer leaving (GeneratorExit) or cancelling ends the run, it does not fail it.
        if isinstance(failure, Exception):
            fail_by(span, failure)
        span.end()


# -- model calls --------------------------------------------------------------------------------


class _ChatRecorder:
    """What a `chat` span records of its request and its answer."""

    span: Span

    def _record_request(self, request: TracedRequest, streaming: bool) -> None:
        span = self.span
        span.set_attribute(ga.GEN_AI_REQUEST_STREAM, streaming)
        if request.response_format is not None:
            span.set_attribute(ga.GEN_AI_OUTPUT_TYPE, "json")
        parameters = request.parameters.to_kwargs()
        for name, value in parameters.items():
            attribute = _PARAMETERS.get(name)
            if attribute is not None and isinstance(value, str | bool | int | float | list):
                span.set_attribute(attribute, value)
        choices = parameters.get("n")
        if isinstance(choices, int) and choices != 1:
            span.set_attribute(ga.GEN_AI_REQUEST_CHOICE_COUNT, choices)
        if capture_content():
            system, conversation = split_system(request.messages)
            if system:
                instructions = parts(b for msg in system for b in msg.content)
                span.set_attribute(ga.GEN_AI_SYSTEM_INSTRUCTIONS, dumps(instructions))
            span.set_attribute(ga.GEN_AI_INPUT_MESSAGES, dumps(messages(conversation)))

    def _record_response(self, response: TracedAnswer) -> None:
        span = self.span
        if not span.is_recording():
            return
        if response.model:
            span.set_attribute(ga.GEN_AI_RESPONSE_MODEL, response.model)
        span.set_attribute(ga.GEN_AI_RESPONSE_ID, response.id)
        if response.finish_reason is not None:
            span.set_attribute(ga.GEN_AI_RESPONSE_FINISH_REASONS, [response.finish_reason])
        _usage(span, response.usage)
        if capture_content():
            output = {"role": "assistant", "parts": parts(response.content)}
            if response.finish_reason is not None:
                output["finish_reason"] = response.finish_reason
            span.set_attribute(ga.GEN_AI_OUTPUT_MESSAGES, dumps([output]))


def _start_chat(tracer: Tracer, model: TracedChatModel, parent: Context) -> Span:
    return tracer.start_span(
        f"chat {model.model}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=_model_attributes(OPERATION.CHAT.value, model),
    )


class ChatCallSpan(_Live, _ChatRecorder, ChatScope):
    """`chat {model}` around a whole-answer call (retries included)."""

    def __init__(self, tracer: Tracer, model: TracedChatModel, request: TracedRequest) -> None:
        super().__init__()
        self.span = _start_chat(tracer, model, otel_context.get_current())
        if self.span.is_recording():
            self._record_request(request, streaming=False)

    def response(self, response: TracedAnswer) -> None:
        """Record the answer."""
        self._record_response(response)


class StreamSpan(_ChatRecorder):
    """`chat {model}` of a stream: from its opening to its final chunk or cancellation."""

    def __init__(self, tracer: Tracer, model: TracedChatModel, request: TracedRequest) -> None:
        parent = otel_context.get_current()
        self.span = _start_chat(tracer, model, parent)
        self._requested: float | None = None  # when the pump first opened the provider's stream
        self._first: float | None = None  # seconds from then to the first delta
        self._ended = False
        self.context = _in_context(_current(self.span, parent))
        if self.span.is_recording():
            self._record_request(request, streaming=True)

    def watch(self, open_source: Callable[[], AsyncIterator[D]]) -> Callable[[], AsyncIterator[D]]:
        """`open_source`, noting when the first delta arrives (in the pump's task)."""
        return lambda: self._timed(open_source())

    async def _timed(self, source: AsyncIterator[D]) -> AsyncIterator[D]:
        requested = self._requested = self._requested or time.monotonic()  # retries: the first
        try:
            async for delta in source:
                if self._first is None:
                    self._first = time.monotonic() - requested
                yield delta
        finally:
            closer = getattr(source, "aclose", None)  # the provider's connection
            if closer is not None:
                await closer()

    def end(self, final: TracedAnswer, error: BaseException | None = None) -> None:
        """End the span with the final chunk; `error` when the stream failed."""
        if self._ended:
            return
        self._ended = True
        span = self.span
        if self._first is not None and span.is_recording():
            span.set_attribute(ga.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, self._first)
        self._record_response(final)
        if isinstance(error, Exception):
            fail_by(span, error)
        span.end()


class ContextOnly:
    """A stream of a model whose calls are not traced: only the context it was opened in."""

    def __init__(self) -> None:
        self.context = contextvars.copy_context()

    def watch(self, open_source: Callable[[], AsyncIterator[D]]) -> Callable[[], AsyncIterator[D]]:
        """`open_source` as it is."""
        return open_source

    def end(self, final: TracedAnswer, error: BaseException | None = None) -> None:
        """Nothing to end."""


# -- tools --------------------------------------------------------------------------------------


class ToolSpan(_Live, ToolScope):
    """`execute_tool {tool}`: one call, current while the tool runs (so agents it runs nest)."""

    def __init__(self, tracer: Tracer, call: ToolCallBlock, tool: TracedTool | None) -> None:
        super().__init__()
        attributes = {
            ga.GEN_AI_OPERATION_NAME: OPERATION.EXECUTE_TOOL.value,
            ga.GEN_AI_TOOL_NAME: call.name,
            ga.GEN_AI_TOOL_CALL_ID: call.id,
            ga.GEN_AI_TOOL_TYPE: tool.tool_type if tool is not None else "function",
        }
        self.span = tracer.start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        if self.span.is_recording():
            if tool is not None and tool.description:
                self.span.set_attribute(ga.GEN_AI_TOOL_DESCRIPTION, tool.description)
            if capture_content():
                arguments = call.raw_input if call.raw_input is not None else dumps(call.input)
                self.span.set_attribute(ga.GEN_AI_TOOL_CALL_ARGUMENTS, arguments)

    def failed(self, kind: str, message: str, error: BaseException | None = None) -> None:
        """Mark the call failed."""
        fail(self.span, kind, message, error)

    def result(self, result: ToolResultBlock) -> None:
        """Record the result, when content is asked for and the call succeeded."""
        if not result.is_error and self.span.is_recording() and capture_content():
            self.span.set_attribute(ga.GEN_AI_TOOL_CALL_RESULT, result.text)


# -- embeddings and retrieval -------------------------------------------------------------------


class EmbeddingsSpan(_Live, EmbeddingsScope):
    """`embeddings {model}`: one call, its batches and retries inside."""

    def __init__(
        self,
        tracer: Tracer,
        model: TracedEmbeddingModel,
        inputs: Sequence[Any],
        overrides: Mapping[str, Any],
    ) -> None:
        super().__init__()
        self.span = tracer.start_span(
            f"embeddings {model.model}",
            kind=SpanKind.CLIENT,
            attributes=_model_attributes(OPERATION.EMBEDDINGS.value, model),
        )
        if self.span.is_recording():
            self.span.set_attribute("parley.embeddings.inputs", len(inputs))
            dimensions = overrides.get("dimensions", model.parameters.dimensions)
            if isinstance(dimensions, int):
                self.span.set_attribute(ga.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, dimensions)

    def response(self, response: TracedEmbeddings) -> None:
        """Record the vectors' size, the tokens counted and where the vectors came from."""
        span = self.span
        if not span.is_recording():
            return
        if response.embeddings:
            span.set_attribute(ga.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, len(response.embeddings[0]))
        if response.usage is not None and response.usage.tokens is not None:
            span.set_attribute(ga.GEN_AI_USAGE_INPUT_TOKENS, response.usage.tokens)
        span.set_attribute("parley.embeddings.source", response.source)


def data_source(store: object) -> str:
    """The index's name: a PostgreSQL store's location (no password), an SQLite file's path."""
    location = getattr(store, "location", None)
    if isinstance(location, str):
        return location
    path = getattr(store, "path", None)
    return str(path) if path is not None else type(store).__name__


class RetrievalSpan(_Live, RetrievalScope):
    """`retrieval {index}`: one search (its query's embedding inside)."""

    def __init__(self, tracer: Tracer, store: object, query: str, mode: str, top_k: int) -> None:
        super().__init__()
        source = data_source(store)
        attributes = {
            ga.GEN_AI_OPERATION_NAME: OPERATION.RETRIEVAL.value,
            ga.GEN_AI_DATA_SOURCE_ID: source,
        }
        self.span = tracer.start_span(
            f"retrieval {source}", kind=SpanKind.CLIENT, attributes=attributes
        )
        if self.span.is_recording():
            self.span.set_attribute(ga.GEN_AI_REQUEST_TOP_K, top_k)
            self.span.set_attribute("parley.retrieval.mode", mode)
            if capture_content():
                self.span.set_attribute(ga.GEN_AI_RETRIEVAL_QUERY_TEXT, query)

    def hits(self, hits: Sequence[TracedHit]) -> None:
        """Record how many passages were found (their ids and scores, with content)."""
        span = self.span
        if not span.is_recording():
            return
        span.set_attribute("parley.retrieval.hits", len(hits))
        if capture_content():
            documents = [
                {
                    "id": f"{hit.chunk.doc_id}#{hit.chunk.index}",
                    "score": hit.score,
                    "source": hit.chunk.source,
                }
                for hit in hits
            ]
            span.set_attribute(ga.GEN_AI_RETRIEVAL_DOCUMENTS, dumps(documents))


# -- evaluations --------------------------------------------------------------------------------


class EvalSpan(_Live, EvalScope):
    """`parley.eval {case}`: one evaluation case, the target's run (its spans) beneath."""

    def __init__(self, tracer: Tracer, dataset: str, case: str) -> None:
        super().__init__()
        attributes = {"parley.eval.dataset": dataset, "parley.eval.case": case}
        self.span = tracer.start_span(
            f"parley.eval {case}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        context = self.span.get_span_context()
        self.trace_id = format(context.trace_id, "032x") if context.is_valid else None

    def result(
        self, *, passed: bool, score: float, attempts: int, error: BaseException | None
    ) -> None:
        """Record the verdict; a target that raised fails the span."""
        span = self.span
        if span.is_recording():
            span.set_attribute("parley.eval.passed", passed)
            span.set_attribute("parley.eval.score", score)
            span.set_attribute("parley.eval.attempts", attempts)
        if error is not None:
            fail_by(span, error)
