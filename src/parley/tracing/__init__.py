"""OpenTelemetry tracing of runs, model calls, tools, embeddings and retrieval.

Off by default, at next to no cost: with no tracer provider to take them, no span is made and
OpenTelemetry is not even imported. On through the standard variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_TRACES_EXPORTER=otlp|console`, `OTEL_SERVICE_NAME`,
...), `PARLEY_TRACING=true`, `configure()`, the service's `tracing` setting or
`parley serve --tracing`: parley then sets a global SDK tracer provider exporting over
OTLP/HTTP, once per process. A global provider the application set is used as it is;
`use_tracer_provider` gives parley one without making it global. See docs/tracing.md.

The spans follow OpenTelemetry's GenAI semantic conventions:

```
HTTP request (FastAPI's instrumentation, in the service)
└── invoke_agent {agent}         gen_ai.agent.name, gen_ai.conversation.id (the thread),
    │                            parley.run.id, parley.run.status, usage and cost
    ├── chat {model}             provider, request parameters, response model and id, usage,
    │                            finish reasons, streaming, time to first chunk
    ├── execute_tool {tool}      gen_ai.tool.name, .call.id, .type; error.type on failure
    │   ├── retrieval {index}    gen_ai.data_source.id, top_k, mode, hits
    │   │   └── embeddings {model}
    │   └── invoke_agent {other} an agent the tool runs
    └── chat {model}
```

Prompts, answers, tool arguments and results are recorded only when asked for
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, `PARLEY_TRACING_CONTENT=true` or
`configure(capture_content=True)`), as `gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.system_instructions`, `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`.

Context and async generators: an `AgentRun` is an async generator its caller iterates, so
the caller's context is current while it runs. Each span therefore names its parent
explicitly (the context captured when the run or call was made), and the run's span is made
current only around work that does not yield: opening the model's stream, and the task its
tools run in. A stream's pump task runs in its `chat` span's context, so HTTP client
instrumentation nests the provider's requests under it.

The rest of this module is the hooks parley's own modules call; each is a cheap no-op when
tracing is off. Tracing sits below the runs, models, tools and indexes it traces, so the
hooks take them as small Protocols of its own (`parley.tracing._subjects`) naming what the
spans read, and never import the floors above. To trace your own code, use OpenTelemetry's
API: parley's spans nest in yours.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from parley.tracing._setup import (
    capture_content,
    configure,
    instrument_app,
    use_tracer_provider,
)
from parley.tracing._setup import tracer as _tracer

if TYPE_CHECKING:
    from parley.messages import Msg, ToolCallBlock, ToolResultBlock
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
    "AgentTrace",
    "ChatScope",
    "EmbeddingsScope",
    "EvalScope",
    "RetrievalScope",
    "StreamTrace",
    "ToolScope",
    "agent_run",
    "attached",
    "capture_content",
    "chat_call",
    "chat_stream",
    "configure",
    "embeddings",
    "error_type",
    "eval_case",
    "instrument_app",
    "note_batches",
    "retrieval",
    "task_context",
    "tool_call",
    "use_tracer_provider",
]

E = TypeVar("E")
D = TypeVar("D")


class _Scope:
    """A span around an await (a no-op here; `parley.tracing._spans` has the live ones)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


class ChatScope(_Scope):
    """A whole-answer model call's span."""

    def response(self, response: TracedAnswer) -> None:
        """Record the answer: model, id, usage, finish reason (and content, when asked)."""


class ToolScope(_Scope):
    """A tool call's span."""

    def failed(self, kind: str, message: str, error: BaseException | None = None) -> None:
        """Mark the call failed: `kind` is its `error.type`, `error` the exception if any."""

    def result(self, result: ToolResultBlock) -> None:
        """Record the result (its content, when asked)."""


class EmbeddingsScope(_Scope):
    """An embedding call's span."""

    def response(self, response: TracedEmbeddings) -> None:
        """Record the vectors' size, the tokens and where they came from."""


class RetrievalScope(_Scope):
    """A search's span."""

    def hits(self, hits: Sequence[TracedHit]) -> None:
        """Record how many passages were found (and which, when content is asked for)."""


class EvalScope(_Scope):
    """An evaluation case's span (`parley.evals`): the target's run and its verdicts."""

    trace_id: str | None = None
    """The span's trace id (32 hex digits); None when tracing is off."""

    def result(
        self, *, passed: bool, score: float, attempts: int, error: BaseException | None
    ) -> None:
        """Record the case's outcome (and the error its target ended with)."""


_OFF_CHAT = ChatScope()
_OFF_TOOL = ToolScope()
_OFF_EMBEDDINGS = EmbeddingsScope()
_OFF_RETRIEVAL = RetrievalScope()
_OFF_EVAL = EvalScope()
_NO_CONTEXT: contextlib.nullcontext[None] = contextlib.nullcontext()  # reusable, unlike most


class StreamTrace(Protocol):
    """What a `ChatStream` holds of its span (the span covers opening to final chunk)."""

    context: contextvars.Context
    """The context its pump task runs in: the stream's span current."""

    def watch(self, open_source: Callable[[], AsyncIterator[D]]) -> Callable[[], AsyncIterator[D]]:
        """`open_source`, timing the first chunk."""
        ...

    def end(self, final: TracedAnswer, error: BaseException | None = None) -> None:
        """End the span with the final chunk (and the error that ended the stream)."""
        ...


class AgentTrace(Protocol):
    """What an `AgentRun` holds of its span."""

    def wrap(self, events: AsyncGenerator[E, None]) -> AsyncGenerator[E, None]:
        """The run's events, inside its span (started on the first, ended with the last)."""
        ...

    def attached(self) -> contextlib.AbstractContextManager[None]:
        """The run's span current, for work that does not yield."""
        ...

    def task_context(self) -> contextvars.Context | None:
        """A context for a task of the run's (its span current); None before the span."""
        ...


def error_type(error: BaseException) -> str:
    """An exception as a span's `error.type`: its class, qualified outside the builtins."""
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _live() -> Any:
    """The live spans' module (it imports OpenTelemetry: only when tracing is on)."""
    from parley.tracing import _spans  # noqa: PLC0415

    return _spans


# -- hooks --------------------------------------------------------------------------------------


def agent_run(run: TracedRun, input_msgs: Sequence[Msg]) -> AgentTrace | None:
    """The span of a run (`invoke_agent`), its parent the context current now; None: off."""
    found = _tracer()
    if found is None:
        return None
    trace: AgentTrace = _live().AgentSpan(found, run, input_msgs)
    return trace


def attached(trace: AgentTrace | None) -> contextlib.AbstractContextManager[None]:
    """The run's span current for the block (which must not yield); nothing when None."""
    return _NO_CONTEXT if trace is None else trace.attached()


def task_context(trace: AgentTrace | None) -> contextvars.Context | None:
    """A context for a task the run starts (its tools); None (the caller's) when untraced."""
    return None if trace is None else trace.task_context()


def chat_call(model: TracedChatModel, request: TracedRequest) -> ChatScope:
    """The span of a whole-answer call (`chat {model}`), current inside the `with` block."""
    found = _tracer()
    if found is None or not model.trace_calls:
        return _OFF_CHAT
    scope: ChatScope = _live().ChatCallSpan(found, model, request)
    return scope


def chat_stream(model: TracedChatModel, request: TracedRequest) -> StreamTrace | None:
    """The span of a streamed call, from now to its final chunk; None when off.

    A model whose calls are not traced (a wrapper around a traced one) still gets its
    stream's context, so its inner model's span nests where the stream was opened.
    """
    found = _tracer()
    if found is None:
        return None
    spans = _live()
    if not model.trace_calls:
        passing: StreamTrace = spans.ContextOnly()
        return passing
    trace: StreamTrace = spans.StreamSpan(found, model, request)
    return trace


def tool_call(call: ToolCallBlock, tool: TracedTool | None) -> ToolScope:
    """The span of a tool call (`execute_tool {tool}`), current while the tool runs."""
    found = _tracer()
    if found is None:
        return _OFF_TOOL
    scope: ToolScope = _live().ToolSpan(found, call, tool)
    return scope


def embeddings(
    model: TracedEmbeddingModel, inputs: Sequence[Any], overrides: Mapping[str, Any]
) -> EmbeddingsScope:
    """The span of an embedding call (`embeddings {model}`)."""
    found = _tracer()
    if found is None:
        return _OFF_EMBEDDINGS
    scope: EmbeddingsScope = _live().EmbeddingsSpan(found, model, inputs, overrides)
    return scope


def note_batches(count: int) -> None:
    """Record on the current embedding span how many requests the call took."""
    if _tracer() is not None:
        _live().note("parley.embeddings.batches", count)


def retrieval(store: object, query: str, mode: str, top_k: int) -> RetrievalScope:
    """The span of a search of an index (`retrieval {index}`).

    The index is named by its store's `location` (PostgreSQL) or `path` (SQLite), else by
    the store's class.
    """
    found = _tracer()
    if found is None:
        return _OFF_RETRIEVAL
    scope: RetrievalScope = _live().RetrievalSpan(found, store, query, mode, top_k)
    return scope


def eval_case(dataset: str, case: str) -> EvalScope:
    """The span of one evaluation case (`parley.eval {case}`), current inside the `with`."""
    found = _tracer()
    if found is None:
        return _OFF_EVAL
    scope: EvalScope = _live().EvalSpan(found, dataset, case)
    return scope
