"""What a chat model returns: `ChatResponse` (whole or a stream delta) and its usage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from parley.messages import Block, Msg, ToolCallBlock, Usage, new_id
from parley.messages._base import DictLikeModel

__all__ = [
    "CONTAINER",
    "PAUSED",
    "ChatResponse",
    "ChatUsage",
    "FinishReason",
    "StructuredResponse",
]

PAUSED = "paused"
"""The `metadata` key a provider sets to True on an answer whose turn the model paused rather
than ended (`ChatResponse.paused`); the assistant `Msg` made from it keeps the mark."""

CONTAINER = "container"
"""The `metadata` key holding the id of the container the answer's server tools ran in
(Anthropic's code execution); the assistant `Msg` keeps it, so that a paused turn's
continuation runs in the same container."""

ChatUsage = Usage
"""A model call's usage: input, output and cached tokens, and the seconds it took."""

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "interrupted", "error"]
"""Why the model stopped: its natural end, the token limit, to call tools, a content filter,
the caller cancelled the stream (`interrupted`), or the provider reported an error."""


class ChatResponse(DictLikeModel):
    """A model's answer, or one delta of a streamed answer.

    A streamed call yields deltas (`is_last=False`) that carry only what is new, then one chunk
    with `is_last=True` that carries the whole content, the usage and the finish reason.
    """

    model_config = ConfigDict(extra="forbid")

    content: list[Block] = Field(default_factory=list)
    is_last: bool = True
    usage: ChatUsage | None = None
    finish_reason: FinishReason | None = None
    id: str = Field(default_factory=new_id)
    model: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text blocks' text, joined without separators (deltas concatenate)."""
        return "".join(b.text for b in self.content if b.type == "text")

    @property
    def thinking(self) -> str:
        """The thinking blocks' text, joined without separators."""
        return "".join(b.thinking for b in self.content if b.type == "thinking")

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        """The tool calls, in order."""
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    @property
    def paused(self) -> bool:
        """Whether the model paused its turn instead of ending it (`metadata["paused"]`).

        The answer is complete as far as it goes (`finish_reason` is `stop`), but the model
        has more to say: send the conversation back with this answer as its last message,
        unchanged, and the model continues the same turn. Anthropic's `pause_turn` stop
        reason is one (a long turn of server tools such as web search); an agent continues
        such a turn itself. Only the final chunk of a stream carries it.
        """
        return self.metadata.get(PAUSED) is True

    def to_msg(self, *, name: str | None = None) -> Msg:
        """The assistant message this response makes, usage included.

        Its `metadata` has the response's id and model, `paused: True` for a paused turn, and
        the `container` its server tools ran in, if any.
        """
        metadata: dict[str, Any] = {"response_id": self.id}
        if self.model:
            metadata["model"] = self.model
        if self.paused:
            metadata[PAUSED] = True
        if container := self.metadata.get(CONTAINER):
            metadata[CONTAINER] = container
        return Msg(
            role="assistant",
            content=list(self.content),
            name=name,
            usage=self.usage,
            metadata=metadata,
        )


class StructuredResponse(BaseModel):
    """The result of `generate_structured_output`: a validated object and how it was made.

    `content` is the validated data as a dict; `parsed` is the pydantic model instance when
    the schema was a model class.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    content: dict[str, Any]
    parsed: Any = None
    usage: ChatUsage = Field(default_factory=ChatUsage)
    response: ChatResponse
    strategy: str = Field(description="How the output was obtained: forced, auto, or text.")
    attempts: int = 1
