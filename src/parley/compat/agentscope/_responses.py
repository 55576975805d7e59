"""AgentScope's model answers: `ChatResponse`, `ChatUsage`, `StructuredResponse`.

Dataclasses of AgentScope's shape, made from parley's answers: content in AgentScope's blocks
(a tool call's `input` a JSON string), usage with `time` in seconds, `finished_reason`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from parley import messages as pm
from parley.compat.agentscope.message import (
    DataBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    blocks_from_parley,
)
from parley.messages import new_id
from parley.models import response as pr

__all__ = [
    "ChatResponse",
    "ChatUsage",
    "FinishedReason",
    "StructuredResponse",
    "chat_response",
    "chat_usage",
]

AnswerBlock = TextBlock | ToolCallBlock | ThinkingBlock | DataBlock


class FinishedReason(StrEnum):
    """Whether an answer came whole or was cut short by cancellation."""

    INTERRUPTED = "interrupted"
    COMPLETED = "completed"


@dataclass
class ChatUsage:
    """A model call's tokens and the seconds it took."""

    input_tokens: int
    output_tokens: int
    time: float
    cache_creation_input_tokens: int = 0
    cache_input_tokens: int = 0
    type: Literal["chat"] = "chat"
    metadata: dict[str, Any] | None = None


@dataclass
class ChatResponse:
    """A model's answer, or one delta of a streamed answer (`is_last=False`)."""

    content: list[AnswerBlock]
    is_last: bool = True
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=lambda: datetime.now().isoformat())
    type: Literal["chat_response"] = "chat_response"
    usage: ChatUsage | None = None
    finished_reason: FinishedReason = FinishedReason.COMPLETED
    metadata: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        # AgentScope's responses read as dicts too (`response["content"]`).
        return getattr(self, key)


@dataclass
class StructuredResponse:
    """What `generate_structured_output` returns: the validated data in `content`."""

    content: dict[str, Any]
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=lambda: datetime.now().isoformat())
    type: Literal["structured_response"] = "structured_response"
    usage: ChatUsage | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    finished_reason: FinishedReason = FinishedReason.COMPLETED


def chat_usage(usage: pm.Usage | None) -> ChatUsage | None:
    """A parley usage in AgentScope's terms."""
    if usage is None:
        return None
    return ChatUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        time=usage.elapsed,
        cache_creation_input_tokens=usage.cache_write_tokens,
        cache_input_tokens=usage.cached_tokens,
    )


def chat_response(
    response: pr.ChatResponse, *, response_id: str, text_id: str, thinking_id: str
) -> ChatResponse:
    """A parley answer (whole or a delta) as AgentScope's."""
    reason = FinishedReason.INTERRUPTED
    if response.finish_reason != "interrupted":
        reason = FinishedReason.COMPLETED
    metadata: dict[str, Any] = {}
    if response.is_last and response.finish_reason is not None:
        metadata["finish_reason"] = response.finish_reason
    return ChatResponse(
        content=blocks_from_parley(response.content, text_id=text_id, thinking_id=thinking_id),
        is_last=response.is_last,
        id=response_id,
        usage=chat_usage(response.usage) if response.is_last else None,
        finished_reason=reason,
        metadata=metadata,
    )
