"""`Msg`: the one message format every part of parley speaks."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Self, TypeVar, get_args, overload

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, TypeAdapter
from pydantic_core import CoreSchema

from parley.errors import MessageError
from parley.messages._base import DictLikeModel, trusted
from parley.messages._roles import split_by_role
from parley.messages.blocks import (
    AudioBlock,
    Block,
    BlockType,
    FileBlock,
    ImageBlock,
    OutputBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from parley.messages.usage import Usage

__all__ = [
    "Msg",
    "MsgList",
    "Role",
    "msgs_from_json",
    "msgs_to_json",
    "new_call_id",
    "new_id",
]

Role = Literal["system", "user", "assistant", "tool"]

B = TypeVar("B", bound=DictLikeModel)


def _id_counter() -> Iterator[int]:
    # A random 64-bit prefix above a 64-bit counter in one int: an id is its 16 bytes in hex.
    return itertools.count(int.from_bytes(os.urandom(8)) << 64)


_ids = _id_counter()


def _renew_ids() -> None:
    global _ids  # noqa: PLW0603  (per-process state, renewed on fork)
    _ids = _id_counter()


os.register_at_fork(after_in_child=_renew_ids)


def new_id() -> str:
    """A new message id: 32 hex digits, unique across processes, ordered within one.

    A random per-process prefix (16 digits, renewed in a forked child) and a counter (16
    digits): as unique as a random id between processes, at a fraction of the cost of reading
    the OS's randomness for every message.
    """
    return next(_ids).to_bytes(16).hex()


def new_call_id() -> str:
    """A tool-call id for a call the provider gave none: `call_` and a whole `new_id()`.

    Never a slice of one: the counter half alone starts over in every process, so two
    processes (or two runs of one conversation) would hand out the same ids.
    """
    return f"call_{new_id()}"


def _now() -> datetime:
    return datetime.now(UTC)


_TEXT_AND_MEDIA = (TextBlock, ImageBlock, AudioBlock, VideoBlock, FileBlock)
_ROLE_CLASSES: dict[str, tuple[type[DictLikeModel], ...]] = {
    "system": _TEXT_AND_MEDIA,
    "user": _TEXT_AND_MEDIA,
    "assistant": (*_TEXT_AND_MEDIA, ThinkingBlock, ToolCallBlock),
    "tool": (ToolResultBlock,),
}


# The same, as exact classes: one set look-up per block instead of `isinstance` through
# pydantic's ABC metaclass, class by class (subclasses still pass, by `isinstance`).
_ROLE_TYPES = {role: frozenset(classes) for role, classes in _ROLE_CLASSES.items()}


def _trusted_blocks(role: str, content: Sequence[Any]) -> list[Any] | None:
    """The blocks for `content` if every part is a str or a block `role` may hold, else None."""
    exact = _ROLE_TYPES[role]
    blocks: list[Any] = []
    for part in content:
        kind = type(part)
        if kind is str:
            blocks.append(trusted(TextBlock, {"type": "text", "text": part}, {"text"}))
        elif kind in exact or isinstance(part, _ROLE_CLASSES[role]):
            blocks.append(part)
        else:
            return None
    if role == "tool" and not blocks:
        return None
    return blocks


def _as_blocks(content: Iterable[str | Block]) -> list[Any]:
    # Strings go in as plain dicts so the one validation of the message builds their blocks in
    # pydantic-core, instead of a separate TextBlock validation per string.
    return [{"type": "text", "text": part} if isinstance(part, str) else part for part in content]


class Msg(DictLikeModel):
    """A message: who speaks (`role`, `name`) and what (`content`, a list of blocks).

    A `str` given as content becomes one text block. Role rules are checked: tool calls and
    thinking only in `assistant` messages, tool results only (and alone) in `tool` messages.

    Example:
        >>> Msg.user("Hello")["role"]
        'user'
    """

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: list[Block] = Field(default_factory=list)
    name: str | None = None
    id: str = Field(default_factory=new_id)
    created_at: datetime = Field(default_factory=_now)
    metadata: dict[str, Any] = Field(default_factory=dict)
    usage: Usage | None = None

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[BaseModel], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # Role rules live in the schema itself (see _roles): checked in pydantic-core, not Python.
        return split_by_role(handler(source))

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def user(cls, *content: str | Block, name: str | None = None, **fields: Any) -> Self:
        """A user message; each `str` becomes a text block, blocks are kept as given."""
        return _make(cls, "user", content, name, fields)

    @classmethod
    def assistant(cls, *content: str | Block, name: str | None = None, **fields: Any) -> Self:
        """An assistant message; each `str` becomes a text block, blocks are kept as given."""
        return _make(cls, "assistant", content, name, fields)

    @classmethod
    def system(cls, *content: str | TextBlock, name: str | None = None, **fields: Any) -> Self:
        """A system message (the instructions)."""
        return _make(cls, "system", content, name, fields)

    @classmethod
    def tool_result(
        cls,
        tool_call_id: str,
        output: str | Sequence[OutputBlock],
        *,
        name: str,
        is_error: bool = False,
        **fields: Any,
    ) -> Self:
        """A tool message answering the call `tool_call_id` of the tool `name`."""
        if type(tool_call_id) is str and type(name) is str and type(output) is str:
            block = trusted(
                ToolResultBlock,
                {
                    "type": "tool_result",
                    "tool_call_id": tool_call_id,
                    "name": name,
                    "output": output,
                    "is_error": bool(is_error),
                },
                {"tool_call_id", "name", "output", "is_error"},
            )
        else:
            block = ToolResultBlock(
                tool_call_id=tool_call_id,
                name=name,
                output=output if isinstance(output, str) else list(output),
                is_error=is_error,
            )
        if fields:
            return cls(role="tool", content=[block], **fields)
        return _assemble(cls, "tool", [block], None)

    # -- helpers ----------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text blocks' text, joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def thinking(self) -> str:
        """The thinking blocks' text, joined by newlines."""
        return "\n".join(b.thinking for b in self.content if isinstance(b, ThinkingBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        """The tool calls in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolCallBlock)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        """The tool results in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolResultBlock)]

    @overload
    def get_blocks(self, block_type: Literal["text"]) -> list[TextBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["thinking"]) -> list[ThinkingBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["image"]) -> list[ImageBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["audio"]) -> list[AudioBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["video"]) -> list[VideoBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["file"]) -> list[FileBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["tool_call"]) -> list[ToolCallBlock]: ...
    @overload
    def get_blocks(self, block_type: Literal["tool_result"]) -> list[ToolResultBlock]: ...
    @overload
    def get_blocks(self, block_type: type[B]) -> list[B]: ...
    @overload
    def get_blocks(self, block_type: None = None) -> list[Block]: ...
    def get_blocks(self, block_type: BlockType | type[DictLikeModel] | None = None) -> list[Any]:
        """The blocks of one type (a `type` tag or a block class), or all blocks when None."""
        if block_type is None:
            return list(self.content)
        if isinstance(block_type, str):
            _check_block_type(block_type)
            return [b for b in self.content if b.type == block_type]
        return [b for b in self.content if isinstance(b, block_type)]

    def has_blocks(self, block_type: BlockType | type[DictLikeModel] | None = None) -> bool:
        """Whether the message holds a block of that type (any block when None)."""
        if block_type is None:
            return bool(self.content)
        if isinstance(block_type, str):
            _check_block_type(block_type)
            return any(b.type == block_type for b in self.content)
        return any(isinstance(b, block_type) for b in self.content)


M = TypeVar("M", bound=Msg)


def _make(
    cls: type[M], role: Role, content: Sequence[Any], name: str | None, fields: dict[str, Any]
) -> M:
    # The constructors are on every hot path; when all parts are strings or blocks this role
    # may hold (already validated), the message is assembled without a second pass. Anything
    # else goes through full validation, which also words the errors.
    if not fields and (name is None or type(name) is str):
        blocks = _trusted_blocks(role, content)
        if blocks is not None:
            return _assemble(cls, role, blocks, name)
    return cls(role=role, content=_as_blocks(content), name=name, **fields)


_utc_now = datetime.now


def _assemble(cls: type[M], role: Role, blocks: list[Any], name: str | None) -> M:
    """A message of blocks known to be valid in a `role` message, with a new id and time."""
    values: dict[str, Any] = {
        "role": role,
        "content": blocks,
        "name": name,
        "id": next(_ids).to_bytes(16).hex(),  # new_id(), without the call
        "created_at": _utc_now(UTC),
        "metadata": {},
        "usage": None,
    }
    return trusted(cls, values, {"role", "content", "name"})


_BLOCK_TYPES = frozenset(get_args(BlockType))


def _check_block_type(block_type: str) -> None:
    if block_type not in _BLOCK_TYPES:
        raise MessageError(
            f"unknown block type {block_type!r}; expected one of {sorted(_BLOCK_TYPES)}"
        )


MsgList: TypeAdapter[list[Msg]] = TypeAdapter(list[Msg], config=ConfigDict(cache_strings="keys"))
"""Validates and dumps lists of messages: `MsgList.validate_json(...)`, `dump_json(...)`."""


def msgs_to_json(msgs: Sequence[Msg]) -> str:
    """Dump messages to a JSON array, leaving out `None` fields."""
    return MsgList.dump_json(list(msgs), exclude_none=True).decode()


def msgs_from_json(data: str | bytes) -> list[Msg]:
    """Parse a JSON array of messages; each block comes back as its concrete class."""
    return MsgList.validate_json(data)
