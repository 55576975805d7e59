"""AgentScope 2.x's message classes, as `agentscope.message` spells them.

Code written for AgentScope builds its messages with these (`Msg(name, content, role)` and
its blocks) and reads model answers in them: a tool call's `input` is the JSON string the
model wrote, media are `DataBlock`s with a `Base64Source` or `URLSource`. They are plain
pydantic models of AgentScope's shape; `to_parley` turns a conversation into parley's
`Msg`s (through the JSON converters of `parley.compat.agentscope`), `blocks_from_parley`
turns an answer's blocks back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, Self, TypeAlias

from pydantic import AnyUrl, BaseModel, ConfigDict, Field, field_serializer, model_validator

from parley import messages as pm
from parley.errors import UserError
from parley.messages import new_id

__all__ = [
    "AssistantMsg",
    "Base64Source",
    "ContentBlock",
    "DataBlock",
    "HintBlock",
    "Msg",
    "SystemMsg",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolCallState",
    "ToolResultBlock",
    "ToolResultState",
    "URLSource",
    "Usage",
    "UserMsg",
    "blocks_from_parley",
    "to_parley",
]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class TextBlock(BaseModel):
    """Text."""

    type: Literal["text"] = "text"
    text: str
    id: str = Field(default_factory=new_id)
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = None


class ThinkingBlock(BaseModel):
    """The model's reasoning; providers' extra fields (Anthropic's `signature`) are kept."""

    model_config = ConfigDict(extra="allow")
    type: Literal["thinking"] = "thinking"
    thinking: str
    id: str = Field(default_factory=new_id)
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = None


class Base64Source(BaseModel):
    """Media bytes, base64-encoded, with their media type."""

    type: Literal["base64"] = "base64"
    data: str
    media_type: str


class URLSource(BaseModel):
    """Media at a URL, with their media type."""

    type: Literal["url"] = "url"
    url: AnyUrl
    media_type: str

    @field_serializer("url")
    def _url_text(self, url: AnyUrl) -> str:
        return str(url)


class DataBlock(BaseModel):
    """Media (image, audio, video, other files) from bytes or a URL."""

    type: Literal["data"] = "data"
    id: str = Field(default_factory=new_id)
    source: Base64Source | URLSource
    name: str | None = None
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = None


class HintBlock(BaseModel):
    """An instruction for the model, sent to it as a user message."""

    type: Literal["hint"] = "hint"
    hint: str | list[TextBlock | DataBlock]
    id: str = Field(default_factory=new_id)
    source: str | None = None
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = Field(default_factory=_now)


class ToolCallState(StrEnum):
    """Where a tool call stands."""

    PENDING = "pending"
    ASKING = "asking"
    ALLOWED = "allowed"
    SUBMITTED = "submitted"
    FINISHED = "finished"


class ToolCallBlock(BaseModel):
    """A tool call; `input` is the arguments' JSON string as the model wrote it."""

    model_config = ConfigDict(use_enum_values=True, extra="allow")
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: str
    state: ToolCallState = ToolCallState.PENDING
    suggested_rules: list[Any] = Field(default_factory=list)
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = None


class ToolResultState(StrEnum):
    """How a tool's run ended (or that it runs)."""

    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    DENIED = "denied"
    RUNNING = "running"


class ToolResultBlock(BaseModel):
    """A tool's answer to the call with the same `id`."""

    model_config = ConfigDict(use_enum_values=True)
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    output: str | list[TextBlock | DataBlock]
    state: ToolResultState = ToolResultState.RUNNING
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=_now)
    finished_at: str | None = None


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | HintBlock | ToolCallBlock | ToolResultBlock | DataBlock
)


class Usage(BaseModel):
    """A message's token usage."""

    input_tokens: int
    output_tokens: int
    cache_input_tokens: int = 0
    cache_creation_input_tokens: int = 0


_ROLE_BLOCKS = {"user": ("text", "data"), "system": ("text",)}


class Msg(BaseModel):
    """A message: who sent it (`name`, `role`) and its content blocks.

    A plain string as `content` becomes one `TextBlock`. A user message holds text and data
    blocks only, a system message text only, as AgentScope checks.
    """

    name: str
    content: list[ContentBlock]
    role: Literal["user", "assistant", "system"]
    id: str = Field(default_factory=new_id)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=lambda: datetime.now().isoformat())
    usage: Usage | None = None
    finished_at: str | None = None
    finished_reason: str | None = None
    structured_output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_content(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("content"), str):
            return {**data, "content": [TextBlock(text=data["content"])]}
        return data

    @model_validator(mode="after")
    def _role_content(self) -> Self:
        allowed = _ROLE_BLOCKS.get(self.role)
        if allowed is not None:
            for block in self.content:
                if block.type not in allowed:
                    raise ValueError(
                        f"a {self.role} message holds {' and '.join(allowed)} blocks only, "
                        f"not {block.type}"
                    )
        return self

    def get_text_content(self, separator: str = "\n") -> str | None:
        """The text blocks' text joined by `separator`; None when there is none."""
        texts = [b.text for b in self.content if isinstance(b, TextBlock)]
        return separator.join(texts) if texts else None

    def get_content_blocks(self, block_type: str | list[str] | None = None) -> list[ContentBlock]:
        """The content blocks, those of `block_type` (a type or a list of types) only if given."""
        if block_type is None:
            return list(self.content)
        kinds = [block_type] if isinstance(block_type, str) else block_type
        return [b for b in self.content if b.type in kinds]

    def has_content_blocks(self, block_type: str | list[str] | None = None) -> bool:
        """Whether the message has blocks (of `block_type`, if given)."""
        return bool(self.get_content_blocks(block_type))


def _made(name: str, content: Any, role: str, fields: dict[str, Any]) -> Msg:
    # AgentScope's shorthands take None for "the default" (a new id, the time now).
    given = {key: value for key, value in fields.items() if value is not None}
    return Msg.model_validate({"name": name, "content": content, "role": role, **given})


def UserMsg(name: str, content: str | list[ContentBlock], **kwargs: Any) -> Msg:  # noqa: N802
    """A user message (AgentScope's shorthand)."""
    return _made(name, content, "user", kwargs)


def AssistantMsg(name: str, content: str | list[ContentBlock], **kwargs: Any) -> Msg:  # noqa: N802
    """An assistant message (AgentScope's shorthand)."""
    return _made(name, content, "assistant", kwargs)


def SystemMsg(name: str, content: str | list[TextBlock], **kwargs: Any) -> Msg:  # noqa: N802
    """A system message (AgentScope's shorthand)."""
    return _made(name, content, "system", kwargs)


# -- to and from parley ---------------------------------------------------------------------


def to_parley(messages: Sequence[Msg | pm.Msg | dict[str, Any]]) -> list[pm.Msg]:
    """A conversation of AgentScope messages (or their JSON, or parley's) as parley's.

    Raises:
        UserError: An item is none of these.
    """
    from parley.compat.agentscope import msgs_from_agentscope  # noqa: PLC0415  (a cycle)

    converted: list[pm.Msg] = []
    for item in messages:
        if isinstance(item, pm.Msg):
            converted.append(item)
        elif isinstance(item, Msg | dict):
            data = item.model_dump(mode="json") if isinstance(item, Msg) else item
            converted.extend(msgs_from_agentscope([data], form="python"))
        else:
            raise UserError(
                "messages must be a list of agentscope Msg (parley.compat.agentscope.message"
                f".Msg), their JSON dicts, or parley Msg; got {type(item).__name__}"
            )
    return converted


def blocks_from_parley(
    blocks: Sequence[pm.Block], *, text_id: str, thinking_id: str
) -> list[TextBlock | ToolCallBlock | ThinkingBlock | DataBlock]:
    """An answer's (or a stream delta's) parley blocks as AgentScope's.

    Text and thinking take the ids given, the same in every delta and the whole, as
    AgentScope's providers give them; a tool call's `input` is its JSON string (the piece
    that came, in a delta).
    """
    out: list[TextBlock | ToolCallBlock | ThinkingBlock | DataBlock] = []
    for block in blocks:
        if isinstance(block, pm.TextBlock):
            out.append(TextBlock(text=block.text, id=text_id))
        elif isinstance(block, pm.ThinkingBlock):
            fields: dict[str, Any] = {"thinking": block.thinking, "id": thinking_id}
            if block.signature:
                fields["signature"] = block.signature  # an extra field, as in AgentScope
            thought = ThinkingBlock.model_validate(fields)
            out.append(thought)
        elif isinstance(block, pm.ToolCallBlock):
            raw = block.raw_input
            if raw is None:
                raw = json.dumps(block.input, ensure_ascii=False) if block.input else ""
            out.append(ToolCallBlock(id=block.id, name=block.name, input=raw))
        elif isinstance(block, pm.ImageBlock | pm.AudioBlock | pm.VideoBlock | pm.FileBlock):
            out.append(_data_block(block))
    return out


def _data_block(block: pm.ImageBlock | pm.AudioBlock | pm.VideoBlock | pm.FileBlock) -> DataBlock:
    from parley.compat.agentscope import msg_to_agentscope  # noqa: PLC0415  (a cycle)

    written = msg_to_agentscope(pm.Msg(role="assistant", content=[block]), form="python")
    return DataBlock.model_validate(written["content"][0])
