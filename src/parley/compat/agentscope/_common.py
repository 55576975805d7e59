"""Pieces both AgentScope forms share: reserved keys, field access, timestamps, read results."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from parley import messages as pm
from parley.errors import MessageError

Form = Literal["python", "java"]
FORMS: tuple[Form, ...] = ("python", "java")

AS_KEY = "parley"
"""The key in an AgentScope message's `metadata` where parley keeps what AgentScope cannot hold."""
PARLEY_KEY = "agentscope"
"""The key in a parley message's `metadata` where parley keeps what it cannot hold of AgentScope."""

ROLES: tuple[pm.Role, ...] = ("system", "user", "assistant", "tool")


@dataclass
class Head:
    """The message-level fields of an AgentScope message, read into parley's terms."""

    role: pm.Role
    name: str | None
    id: Any
    created_at: datetime | None
    metadata: dict[str, Any]
    usage: pm.Usage | None


@dataclass
class Hint:
    """An AgentScope hint block: text or media for the model, from `source`."""

    source: str | None
    content: list[pm.Block] = field(default_factory=list)


Item = pm.Block | Hint


@dataclass(frozen=True)
class WriteContext:
    """What a block writer needs to know of the message it is written into."""

    msg_id: str
    stamp: str
    answered: frozenset[str] = frozenset()


class Codec(Protocol):
    """One AgentScope form: its message and block readers and writers."""

    form: Form

    def read_head(self, data: dict[str, Any]) -> Head:
        """Read the message-level fields."""

    def read_item(self, raw: Any, where: str, names: Mapping[str, str]) -> Item | list[Item]:
        """Read one content block (or the blocks it holds: text with `<think>` spans)."""

    def write_message(
        self,
        head: pm.Msg,
        content: list[dict[str, Any]],
        metadata: dict[str, Any],
        hint_head: bool,
    ) -> dict[str, Any]:
        """Write the message around its written content and metadata."""

    def write_block(self, block: pm.Block, index: str, ctx: WriteContext) -> dict[str, Any]:
        """Write one content block; `index` names it among the message's blocks."""

    def write_hint(self, piece: pm.Msg, index: str, ctx: WriteContext) -> dict[str, Any]:
        """Write a parley message that was an AgentScope hint back as a hint block."""


# -- reading fields ------------------------------------------------------------------------


def require_dict(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is a JSON object; otherwise a `MessageError` naming `where`."""
    if not isinstance(value, dict):
        raise MessageError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value


def block_type(raw: Any, where: str) -> str:
    """The `type` tag of a block, checked."""
    tag = require_dict(raw, where).get("type")
    if not isinstance(tag, str):
        raise MessageError(f"{where} needs a string 'type', got {tag!r}")
    return tag


def unknown_block(tag: str, where: str, form: Form, known: tuple[str, ...]) -> MessageError:
    """The error for a block type the form does not have."""
    return MessageError(
        f"{where} has type {tag!r}, which AgentScope's {form} form does not have "
        f"(it has {', '.join(known)})"
    )


def read_role(value: Any, form: Form) -> pm.Role:
    """A role in either case (`USER`, `user`), as parley's role."""
    if isinstance(value, str) and value.lower() in ROLES:
        return ROLES[ROLES.index(value.lower())]
    raise MessageError(
        f"role {value!r} is not an AgentScope role; the {form} form uses "
        + ("SYSTEM, USER, ASSISTANT or TOOL" if form == "java" else "system, user or assistant")
    )


def read_metadata(value: Any) -> dict[str, Any]:
    """Message metadata: a JSON object (null reads as empty), without parley's reserved key."""
    if value is None:
        return {}
    metadata = require_dict(value, "an AgentScope message's metadata")
    return {k: v for k, v in metadata.items() if k != PARLEY_KEY}


def read_usage(value: Any, **names: str) -> pm.Usage | None:
    """A usage object whose keys are named by `names` (parley field -> AgentScope key)."""
    if value is None:
        return None
    usage = require_dict(value, "usage")
    return pm.Usage.model_validate(
        {ours: usage[theirs] for ours, theirs in names.items() if theirs in usage}
    )


def result_name(raw: dict[str, Any], call_id: Any, names: Mapping[str, str]) -> Any:
    """A tool result's tool name: its own, else the name of the call it answers, else ''."""
    name = raw.get("name")
    if name is None and isinstance(call_id, str):
        return names.get(call_id, "")
    return "" if name is None else name


def parse_input(raw: str) -> tuple[dict[str, Any], str | None]:
    """A tool call's raw JSON argument string as parley's (`input`, `raw_input`).

    A JSON object becomes `input` (its formatting, when it differs from parley's own, is kept by
    the patch); anything else is kept as `raw_input` with an empty `input`.
    """
    try:
        parsed = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return {}, raw
    return (parsed, None) if isinstance(parsed, dict) else ({}, raw)


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; such a string stays raw.
    raise ValueError(name)


def dump_input(args: dict[str, Any]) -> str:
    """Parley's tool arguments as the JSON string AgentScope's Python form carries."""
    return json.dumps(jsonable(args), ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """A JSON-ready deep copy of `value`."""
    return to_jsonable_python(value)


# -- media ---------------------------------------------------------------------------------

_FAMILIES: dict[str, type[pm.ImageBlock | pm.AudioBlock | pm.VideoBlock]] = {
    "image/": pm.ImageBlock,
    "audio/": pm.AudioBlock,
    "video/": pm.VideoBlock,
}


def read_source(raw: Any, where: str) -> pm.URLSource | pm.Base64Source:
    """A media source: `url` (a `data:` URL becomes base64) or `base64`."""
    source = require_dict(raw, f"{where}.source")
    kind = source.get("type")
    media_type = source.get("media_type", source.get("mediaType"))
    if kind == "base64":
        return pm.Base64Source.model_validate(
            {"media_type": media_type, "data": source.get("data")}
        )
    if kind != "url":
        raise MessageError(f"{where}.source has type {kind!r}; expected 'url' or 'base64'")
    url = source.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        return pm.source_from_str(url)
    try:
        return pm.URLSource.model_validate({"url": url, "media_type": media_type})
    except ValidationError as exc:
        if any(err["loc"] != ("media_type",) for err in exc.errors()):
            raise
    # A media type parley does not take (AgentScope's 'image/*') is left to the patch.
    return pm.URLSource.model_validate({"url": url})


def media_block(source: pm.URLSource | pm.Base64Source, family: str, filename: Any) -> pm.Block:
    """The parley media block for a source whose AgentScope media type is `family`."""
    for prefix, cls in _FAMILIES.items():
        if family.startswith(prefix):
            return cls(source=source)
    return pm.FileBlock.model_validate({"source": source, "filename": filename})


def source_family(raw: Any) -> str:
    """The media type an AgentScope source states, or '' when it states none."""
    media_type = raw.get("media_type", raw.get("mediaType")) if isinstance(raw, dict) else None
    return media_type if isinstance(media_type, str) else ""


# -- timestamps ----------------------------------------------------------------------------


def parse_time(value: Any, where: str) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime; None when absent.

    A timestamp without a zone is local time: AgentScope writes `datetime.now().isoformat()`
    (Python) and `yyyy-MM-dd HH:mm:ss.SSS` in the system zone (Java).
    """
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise MessageError(f"{where} must be an ISO-8601 timestamp, got {value!r}") from None
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError, OSError):  # years 1 and 9999 may not move: kept
        return moment


def format_time(moment: datetime) -> str:
    """Format as Java's `Instant.toString()` does: UTC, `Z`, 0, 3 or 6 fraction digits.

    `2024-01-15T10:30:00Z` is written back as it was read: no fraction when there is none.
    """
    if moment.tzinfo is None:  # a naive time stays naive, as AgentScope's own
        return moment.isoformat()
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError, OSError):  # cannot move into UTC: kept as it is
        return moment.isoformat()
    text = utc.replace(microsecond=0, tzinfo=None).isoformat()
    micros = utc.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"
