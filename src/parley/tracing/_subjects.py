"""What the spans read of the objects they trace, as Protocols of tracing's own.

Tracing sits on the floor just above `parley.messages`: the runs, models, tools and indexes
it traces live on the floors above it, so it names here exactly the attributes its spans
read, and the callers pass their own objects (an `AgentRun`, a `ChatModel`, a `Tool`, ...),
which match these shapes as they are. Every member is a read-only property, so a plain
attribute, a class attribute or a property all satisfy it.

A span also reads a few attributes only when they are there (`getattr`): a model's or its
credential's `endpoint()`, a Gemini credential's `vertexai`, an index store's `location` or
`path`. Those are not part of the shapes; any object will do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from parley.messages import Block, Msg, Usage
from parley.messages.blocks import OutputBlock

__all__ = [
    "TracedAgent",
    "TracedAnswer",
    "TracedChatModel",
    "TracedChunk",
    "TracedEmbeddingModel",
    "TracedEmbeddings",
    "TracedHit",
    "TracedMemory",
    "TracedModel",
    "TracedParameters",
    "TracedRequest",
    "TracedRun",
    "TracedTokenCount",
    "TracedTool",
    "TracedVectorSettings",
]


class TracedModel(Protocol):
    """A model as its span names it (a chat or an embedding model, `parley.models`)."""

    @property
    def provider(self) -> str:
        """The provider's name (`openai`, `gemini`, ...)."""
        ...

    @property
    def model(self) -> str:
        """The model's name at the provider."""
        ...

    @property
    def credential(self) -> object:
        """The credential (read for its `endpoint()` and `vertexai`, when it has them)."""
        ...


class TracedChatModel(TracedModel, Protocol):
    """A chat model (`parley.models.ChatModel`)."""

    @property
    def trace_calls(self) -> bool:
        """Whether its calls get a `chat` span of their own (False: a wrapper's)."""
        ...


class TracedParameters(Protocol):
    """A request's generation parameters (`parley.models.Parameters`)."""

    def to_kwargs(self) -> dict[str, Any]:
        """The parameters that are set."""
        ...


class TracedRequest(Protocol):
    """A chat request (`parley.models.ChatRequest`)."""

    @property
    def messages(self) -> Sequence[Msg]:
        """The conversation sent."""
        ...

    @property
    def parameters(self) -> TracedParameters:
        """The generation parameters."""
        ...

    @property
    def response_format(self) -> object:
        """The structured output asked for; None for free text."""
        ...


class TracedAnswer(Protocol):
    """A model's answer, whole or a stream's final chunk (`parley.models.ChatResponse`)."""

    @property
    def id(self) -> str:
        """The answer's id."""
        ...

    @property
    def model(self) -> str | None:
        """The model that answered, as the provider names it."""
        ...

    @property
    def content(self) -> Sequence[Block | OutputBlock]:
        """The answer's blocks."""
        ...

    @property
    def usage(self) -> Usage | None:
        """What the call used."""
        ...

    @property
    def finish_reason(self) -> str | None:
        """Why the answer ended."""
        ...


class TracedMemory(Protocol):
    """A run's memory (`parley.agents.Memory`)."""

    @property
    def thread_id(self) -> str:
        """The conversation's id."""
        ...


class TracedAgent(Protocol):
    """An agent (`parley.agents.Agent`)."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def description(self) -> str:
        """What the agent does ("" when not said)."""
        ...

    @property
    def system_prompt(self) -> str | None:
        """Its instructions."""
        ...

    @property
    def model(self) -> TracedModel:
        """Its chat model."""
        ...


class TracedRun(Protocol):
    """An agent's run (`parley.agents.AgentRun`), read when it starts and when it ends."""

    @property
    def agent(self) -> TracedAgent:
        """The agent running."""
        ...

    @property
    def memory(self) -> TracedMemory:
        """The conversation it runs in."""
        ...

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def status(self) -> str | None:
        """How it ended (None: not yet)."""
        ...

    @property
    def iterations(self) -> int:
        """The model calls it made."""
        ...

    @property
    def usage(self) -> Usage | None:
        """What its model calls used."""
        ...

    @property
    def final(self) -> Msg | None:
        """Its answer."""
        ...

    @property
    def error(self) -> BaseException | None:
        """The error it ended with."""
        ...


class TracedTool(Protocol):
    """A tool (`parley.tools.Tool`)."""

    @property
    def tool_type(self) -> str:
        """The conventions' `gen_ai.tool.type` (`function`, `extension`, ...)."""
        ...

    @property
    def description(self) -> str:
        """What it does."""
        ...


class TracedVectorSettings(Protocol):
    """An embedding model's parameters (`parley.embeddings.EmbeddingParameters`)."""

    @property
    def dimensions(self) -> int | None:
        """The vectors' size asked for; None: the model's own."""
        ...


class TracedEmbeddingModel(TracedModel, Protocol):
    """An embedding model (`parley.embeddings.EmbeddingModel`)."""

    @property
    def parameters(self) -> TracedVectorSettings:
        """Its parameters."""
        ...


class TracedTokenCount(Protocol):
    """What an embedding call used (`parley.embeddings.EmbeddingUsage`)."""

    @property
    def tokens(self) -> int | None:
        """The tokens counted; None when the provider does not count them."""
        ...


class TracedEmbeddings(Protocol):
    """An embedding call's answer (`parley.embeddings.EmbeddingResponse`)."""

    @property
    def embeddings(self) -> Sequence[Sequence[float]]:
        """One vector per input."""
        ...

    @property
    def usage(self) -> TracedTokenCount | None:
        """The tokens counted, when the provider counts them."""
        ...

    @property
    def source(self) -> str:
        """Where the vectors came from: `api` or `cache`."""
        ...


class TracedChunk(Protocol):
    """A passage of an index (`parley.rag.Chunk`)."""

    @property
    def doc_id(self) -> str:
        """Its document's id."""
        ...

    @property
    def index(self) -> int:
        """Its position in the document."""
        ...

    @property
    def source(self) -> str:
        """The document's path or URL."""
        ...


class TracedHit(Protocol):
    """A search's hit (`parley.rag.SearchHit`)."""

    @property
    def chunk(self) -> TracedChunk:
        """The passage found."""
        ...

    @property
    def score(self) -> float:
        """Its score."""
        ...
