"""The two records that make both conversions exact, under the reserved key `"parley"`.

- The *message record*, in the first Qwen message's `extra["parley"]`: what a `Msg` holds that
  the Qwen messages cannot say (id, time, usage, a tool message's name, metadata keys that
  clash with Qwen's, block order, block fields such as a URL's media type or a thinking
  signature). Only what the plain mapping loses is written.
- The *Qwen record*, in the `Msg`'s `metadata["parley"]`: how the Qwen messages were written
  where parley's canonical form differs (a `[]` for `""`, a local path for a `file://` URL, an
  audio dict, a video's list of sources, several parts in one message, other `extra` values).

A Qwen message carries no id or time: the `Msg` gets an id derived from its position and
content, and the Unix epoch (meaning unknown) as its time; neither is written back.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from parley.compat.qwen._parse import ListField, Parsed
from parley.compat.qwen.schema import ContentItem, Message
from parley.errors import MessageError
from parley.messages import Block, Msg

__all__ = [
    "EPOCH",
    "MsgRecord",
    "QwenRecord",
    "apply_overrides",
    "build_msg",
    "derive_id",
    "msg_record",
    "qwen_record",
    "read_msg_record",
    "read_qwen_record",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The time given to a `Msg` read from a Qwen message, which has none: unknown."""
_EPOCH_ISO = EPOCH.isoformat()


@with_config(ConfigDict(extra="forbid"))
class MsgRecord(TypedDict, total=False):
    """What the Qwen messages of a `Msg` cannot say; see the module docstring."""

    id: str
    created_at: str
    usage: dict[str, Any]
    name: str
    metadata: dict[str, Any]
    order: list[int]  # the Msg block index of each block as the Qwen messages list them
    blocks: list[tuple[int, dict[str, Any]]]  # (Msg block index, fields that differ)


@with_config(ConfigDict(extra="forbid"))
class Fields(TypedDict, total=False):
    """A Qwen message's `name` or `extra`, where they differ from what parley writes."""

    name: str | None
    extra: dict[str, Any] | None


@with_config(ConfigDict(extra="forbid"))
class QwenRecord(TypedDict, total=False):
    """How a `Msg`'s Qwen messages were written; see the module docstring."""

    shape: list[str]  # each message's parts (see _groups.parts)
    lists: list[tuple[int, ListField]]  # fields written as a list where a string would do
    fields: list[tuple[int, Fields]]  # (message index, fields)
    items: list[tuple[int, ListField, int, dict[str, Any]]]  # (message, field, item, item)


_MSG_RECORD = TypeAdapter(MsgRecord)
_QWEN_RECORD = TypeAdapter(QwenRecord)


def read_msg_record(raw: Any) -> MsgRecord | None:
    """The message record in `raw`, or None when it is not one."""
    try:
        return _MSG_RECORD.validate_python(raw)
    except ValidationError:
        return None


def read_qwen_record(raw: Any) -> QwenRecord | None:
    """The Qwen record in `raw`, or None when it is not one."""
    try:
        return _QWEN_RECORD.validate_python(raw)
    except ValidationError:
        return None


def derive_id(index: int, role: str, name: str | None, blocks: list[Any]) -> str:
    """The id of a `Msg` read from Qwen messages: a hash of its position and content."""
    seen = repr((index, role, name, [block.model_dump(exclude_none=False) for block in blocks]))
    return hashlib.blake2b(seen.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# -- Msg → Qwen -------------------------------------------------------------------------------


def msg_record(
    msg: Msg, parsed: list[Block], order: list[int], clashing: dict[str, Any], index: int
) -> dict[str, Any]:
    """What `msg` holds that its Qwen messages, read back as `parsed` blocks, do not say."""
    record: dict[str, Any] = {}
    if msg.id != derive_id(index, msg.role, msg.name, msg.content):
        record["id"] = msg.id
    if (created_at := msg.created_at.isoformat()) != _EPOCH_ISO:
        record["created_at"] = created_at
    if msg.usage is not None:
        record["usage"] = msg.usage.model_dump()
    if msg.role == "tool" and msg.name is not None:
        record["name"] = msg.name
    if clashing:
        record["metadata"] = clashing
    if order != list(range(len(order))):
        record["order"] = order
    if len(parsed) != len(msg.content):
        raise MessageError(f"{len(msg.content)} blocks were written as {len(parsed)}")
    pairs = zip(order, parsed, strict=True)
    diffs = [[i, diff] for i, back in pairs if (diff := _diff(msg.content[i], back))]
    if diffs:
        record["blocks"] = diffs
    return record


def _diff(block: Block, back: Block) -> dict[str, Any]:
    if block == back:
        return {}
    written = block.model_dump(exclude_none=False)
    read = back.model_dump(exclude_none=False)
    return {key: value for key, value in written.items() if read.get(key) != value}


def apply_overrides(messages: list[Message], record: QwenRecord) -> bool:
    """Write the record's names, extras and items over `messages`.

    Returns whether the first message's `extra` was given, so parley's record must not be
    added to it.

    Raises:
        MessageError: The record does not fit the messages.
    """
    try:
        for index, fields in record.get("fields", []):
            for key, value in fields.items():
                setattr(messages[index], key, copy.deepcopy(value))
        for index, where, position, item in record.get("items", []):
            value = getattr(messages[index], where)
            if not isinstance(value, list):
                raise IndexError(position)
            value[position] = ContentItem.model_validate(item)
    except IndexError:
        raise MessageError("the Qwen record does not fit the message") from None
    return any(i == 0 and "extra" in fields for i, fields in record.get("fields", []))


# -- Qwen → Msg -------------------------------------------------------------------------------


def build_msg(parsed: Parsed, record: MsgRecord | None, index: int) -> Msg:
    """The `Msg` for parsed Qwen messages, with the message record applied.

    Raises:
        MessageError: The record does not fit the blocks.
        ValidationError: The record holds values a `Msg` rejects.
    """
    record = record or {}
    blocks = _reorder(parsed.blocks, record.get("order"))
    for i, diff in record.get("blocks", []):
        if not 0 <= i < len(blocks):
            raise MessageError(f"the record changes block {i} of {len(blocks)}")
        block = blocks[i]
        blocks[i] = type(block).model_validate({**block.model_dump(exclude_none=False), **diff})
    name = record.get("name") if parsed.role == "tool" else parsed.name
    fields: dict[str, Any] = {
        "role": parsed.role,
        "content": blocks,
        "name": name,
        "metadata": {**parsed.metadata, **record.get("metadata", {})},
        "created_at": record.get("created_at", EPOCH),
        "usage": record.get("usage"),
        "id": record["id"] if "id" in record else derive_id(index, parsed.role, name, blocks),
    }
    return Msg.model_validate(fields)


def _reorder(blocks: list[Block], order: list[int] | None) -> list[Block]:
    if order is None:
        return list(blocks)
    if sorted(order) != list(range(len(blocks))):
        raise MessageError(
            f"the record orders {len(order)} blocks, the messages hold {len(blocks)}"
        )
    placed: list[Any] = [None] * len(blocks)
    for block, i in zip(blocks, order, strict=True):
        placed[i] = block
    return placed


def qwen_record(
    actual: list[Message], written: list[Message], parsed: Parsed, canonical_shape: list[str]
) -> dict[str, Any]:
    """How `actual` differs from `written`, parley's form of the same `Msg` in that layout."""
    record: dict[str, Any] = {}
    if parsed.shape != canonical_shape:
        record["shape"] = list(parsed.shape)
    if parsed.lists:
        record["lists"] = [list(pair) for pair in parsed.lists]
    fields: list[Any] = []
    items: list[Any] = []
    for i, (have, want) in enumerate(zip(actual, written, strict=True)):
        differ = {
            k: copy.deepcopy(getattr(have, k))
            for k in ("name", "extra")
            if getattr(have, k) != getattr(want, k)
        }
        if differ:
            fields.append([i, differ])
        for where in ("content", "reasoning_content"):
            mine, theirs = getattr(have, where), getattr(want, where)
            if isinstance(mine, list) and isinstance(theirs, list):
                items += [
                    [i, where, j, item.model_dump()]
                    for j, (item, other) in enumerate(zip(mine, theirs, strict=True))
                    if item != other
                ]
    if fields:
        record["fields"] = fields
    if items:
        record["items"] = items
    return record
