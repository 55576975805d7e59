"""Lists of Qwen-Agent messages to and from lists of `Msg`, exactly both ways.

See the package docstring for the mapping. Each conversion checks the other: a record found
under the reserved key is used only when converting back would reproduce its input; otherwise
it is kept as plain data, so nothing is lost either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any, Literal, overload

from pydantic import TypeAdapter, ValidationError

from parley.compat.qwen._groups import FID, KEY, Context, Tracker, continues
from parley.compat.qwen._parse import parse_group
from parley.compat.qwen._records import (
    MsgRecord,
    QwenRecord,
    apply_overrides,
    build_msg,
    msg_record,
    qwen_record,
    read_msg_record,
    read_qwen_record,
)
from parley.compat.qwen._render import canonical_shape, render
from parley.compat.qwen.schema import Message
from parley.errors import MessageError
from parley.messages import Msg, MsgList

__all__ = ["as_dicts_like", "from_msgs", "to_msgs"]

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_FAILED = (MessageError, ValidationError)


def as_dicts_like(messages: Sequence[Any]) -> bool:
    """Whether output should be dicts for this input, by Qwen-Agent's rule: all dicts, not empty.

    Qwen-Agent answers dicts with dicts and `Message`s with `Message`s::

        msgs = to_msgs(messages)
        ...
        return from_msgs(reply, as_dicts=as_dicts_like(messages))
    """
    return bool(messages) and all(isinstance(m, Mapping) for m in messages)


def to_msgs(messages: Iterable[Message | Mapping[str, Any]]) -> list[Msg]:
    """Convert Qwen-Agent messages (`Message`s or dicts in its shape, mixed) to `Msg`s.

    Consecutive assistant messages forming one response (reasoning, text, function calls)
    become one assistant `Msg`; consecutive function messages become one tool `Msg`.

    Raises:
        ValidationError: An item is not a Qwen message.
        MessageError: The messages hold what a `Msg` cannot (the text says which and why).
    """
    qwen = _MESSAGES.validate_python(messages)
    tracker = Tracker()
    msgs = []
    for start, group in _groups(qwen):
        ctx = Context(start, qwen[start - 1] if start else None, tracker)
        try:
            msgs.append(read_group(group, ctx))
        except _FAILED as exc:
            raise MessageError(f"Qwen message {start} ({group[0].role}): {exc}") from exc
        tracker = ctx.tracker
    return msgs


@overload
def from_msgs(
    msgs: Iterable[Msg | Mapping[str, Any]], *, as_dicts: Literal[False] = False
) -> list[Message]: ...
@overload
def from_msgs(
    msgs: Iterable[Msg | Mapping[str, Any]], *, as_dicts: Literal[True]
) -> list[dict[str, Any]]: ...
@overload
def from_msgs(
    msgs: Iterable[Msg | Mapping[str, Any]], *, as_dicts: bool
) -> list[Message] | list[dict[str, Any]]: ...
def from_msgs(
    msgs: Iterable[Msg | Mapping[str, Any]], *, as_dicts: bool = False
) -> list[Message] | list[dict[str, Any]]:
    """Convert `Msg`s (or their dicts) to Qwen-Agent messages, or to their dicts.

    An assistant `Msg` becomes Qwen-Agent's response layout: a reasoning message, a content
    message, then one message per tool call; a tool `Msg` one function message per result.
    Use `as_dicts=as_dicts_like(original_input)` to answer in the caller's form.

    Raises:
        ValidationError: An item is not a `Msg`.
        MessageError: A tool call's input cannot be written as JSON.
    """
    qwen: list[Message] = []
    tracker = Tracker()
    for msg in MsgList.validate_python(msgs):
        ctx = Context(len(qwen), qwen[-1] if qwen else None, tracker)
        group = _honoured(msg, ctx) if KEY in msg.metadata else None
        qwen += group if group is not None else write_group(msg, ctx, None, consume_key=False)
        tracker = ctx.tracker
    return [m.model_dump() for m in qwen] if as_dicts else qwen


def _groups(messages: list[Message]) -> Iterator[tuple[int, list[Message]]]:
    start = 0
    for i in range(1, len(messages) + 1):
        if i == len(messages) or not continues(messages[i - 1], messages[i]):
            yield start, messages[start:i]
            start = i


def _one_group(previous: Message | None, group: list[Message]) -> bool:
    starts = previous is None or not continues(previous, group[0])
    return starts and all(continues(a, b) for a, b in pairwise(group))


# -- Msg → Qwen -------------------------------------------------------------------------------


def write_group(
    msg: Msg, ctx: Context, record: QwenRecord | None, *, consume_key: bool
) -> list[Message]:
    """Write one `Msg` as Qwen messages, laid out and overridden by a Qwen record if given.

    `consume_key` says the `Msg`'s `metadata["parley"]` is that record; otherwise it is
    ordinary data and travels in the message record. Updates `ctx.tracker`.
    """
    metadata = {k: v for k, v in msg.metadata.items() if k not in (FID, KEY)}
    clashing = {k: v for k, v in msg.metadata.items() if k == FID or (k == KEY and not consume_key)}
    record = record or {}
    lists = {(i, where) for i, where in record.get("lists", [])}
    rendered = render(msg, ctx.index, metadata, record.get("shape"), lists)
    messages = rendered.messages
    first_given = apply_overrides(messages, record)
    parsed = parse_group(messages, ctx)
    own = msg_record(msg, parsed.blocks, rendered.order, clashing, ctx.index)
    starts_anyway = ctx.previous is None or not continues(ctx.previous, messages[0])
    if not first_given and (own or not starts_anyway):
        messages[0].extra = {**(messages[0].extra or {}), KEY: own}
    return messages


def _honoured(msg: Msg, ctx: Context) -> list[Message] | None:
    """The Qwen messages its Qwen record describes, if reading them back gives `msg` exactly.

    On success `ctx.tracker` moves on; otherwise nothing changes and None is returned.
    """
    record = read_qwen_record(msg.metadata[KEY])
    if record is None:
        return None
    try:
        group = write_group(msg, ctx.trial(), record, consume_key=True)
        if not _one_group(ctx.previous, group):
            return None
        check = ctx.trial()
        if read_group(group, check) != msg:
            return None
    except _FAILED:
        return None
    ctx.tracker = check.tracker
    return group


# -- Qwen → Msg -------------------------------------------------------------------------------


def read_group(group: list[Message], ctx: Context) -> Msg:
    """Read one group of Qwen messages as a `Msg`; updates `ctx.tracker`.

    Raises:
        MessageError: The messages hold what a `Msg` cannot.
        ValidationError: Likewise, found by `Msg`'s own validation.
    """
    before = ctx.tracker.copy()
    extra = group[0].extra or {}
    record = read_msg_record(extra[KEY]) if KEY in extra else None
    if record is not None:
        msg = _read(group, ctx, record, before)
        if msg is not None:
            return msg
        ctx.tracker = before.copy()
    msg = _read(group, ctx, None, before)
    assert msg is not None  # without a record, failures raise
    return msg


def _read(
    group: list[Message], ctx: Context, record: MsgRecord | None, before: Tracker
) -> Msg | None:
    parsed = parse_group(group, ctx)
    try:
        msg = build_msg(parsed, record, ctx.index)
        # What parley would write for this Msg, in the layout found: the differences are
        # what the Qwen record must keep.
        trial = Context(ctx.index, ctx.previous, before.copy())
        layout: QwenRecord = {"shape": parsed.shape, "lists": parsed.lists}
        written = write_group(msg, trial, layout, consume_key=False)
    except _FAILED:
        if record is None:
            raise
        return None
    own = qwen_record(group, written, parsed, canonical_shape(msg))
    # A record that gave the Msg a metadata["parley"] of its own is only what parley writes
    # when that value is not a Qwen record it would follow.
    if (
        record is not None
        and KEY in record.get("metadata", {})
        and (own or _honoured(msg, Context(ctx.index, ctx.previous, before.copy())) is not None)
    ):
        return None
    if own:
        msg.metadata[KEY] = own
    return msg
