"""One AgentScope message <-> the parley messages it holds, losing nothing either way.

AgentScope's Python agent keeps a reply's tool results, and hints for the model, inside the
assistant message; parley keeps tool results in `tool` messages and a hint is a user turn. So an
AgentScope message reads as a *group* of parley messages, and a group writes back as one
AgentScope message:

- a message holding only tool results is one `tool` message;
- otherwise each tool result becomes a `tool` message of its own (parley's agent answers each
  call with one), each hint a `user` message named after the hint's source, and each run of
  other blocks a message of the message's own role.

The first parley message of a group has the AgentScope message's id, metadata and usage; the
others have ids `<id>-<n>` and `metadata['agentscope'] = {'form': ..., 'part_of': <id>}` (with
`'hint': True` for hints), which is how writing finds the group again. In a list, a message of
its own that writing would fold into the one before is marked `{'form': ...}` to stay apart.

Nothing is lost: reading keeps what parley has no place for as a JSON Patch in the first
message's `metadata['agentscope']['patch']`, and writing keeps what AgentScope has no place
for as a JSON Patch in the AgentScope message's `metadata['parley']`. Each side finds its
patch by converting back what it produced, the way the other side will read it, and
comparing: so the round trip is exact by construction, and the patch holds only the loss.
When both want the first message's `metadata['agentscope']` (AgentScope's patch puts the
message's own value there, and the document changed since, so reading needs a patch too), the
patch takes it and rebuilds the whole document, AgentScope's patch included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from parley.compat.agentscope import _patch
from parley.compat.agentscope._common import (
    AS_KEY,
    FORMS,
    PARLEY_KEY,
    Codec,
    Form,
    Head,
    Hint,
    Item,
    WriteContext,
    format_time,
    jsonable,
    require_dict,
)
from parley.compat.agentscope._java import JavaForm
from parley.compat.agentscope._python import PythonForm
from parley.errors import MessageError
from parley.messages import Msg, ToolCallBlock, ToolResultBlock, new_id

__all__ = ["call_names", "groups", "keep_apart", "read_group", "write_group"]

CODECS: dict[Form, Codec] = {"python": PythonForm(), "java": JavaForm()}


# -- markers -------------------------------------------------------------------------------


def marker(msg: Msg, form: Form | None = None) -> dict[str, Any] | None:
    """The message's `metadata['agentscope']` when it is parley's (of `form`, if given)."""
    found = msg.metadata.get(PARLEY_KEY)
    if not isinstance(found, dict) or found.get("form") not in FORMS:
        return None
    return found if form is None or found["form"] == form else None


def _is_hint(msg: Msg, form: Form) -> bool:
    found = marker(msg, form)
    return found is not None and found.get("hint") is True


def _marked(msg: Msg, **fields: Any) -> Msg:
    return msg.model_copy(update={"metadata": {**msg.metadata, PARLEY_KEY: fields}})


# -- reading -------------------------------------------------------------------------------


def read_group(
    data: Any, form: Form, names: Mapping[str, str], defaults: Msg | None = None
) -> list[Msg]:
    """Read one AgentScope message as the parley messages it holds.

    Args:
        data: The message, as a dict.
        form: Its form.
        names: Tool names by call id, from earlier messages, for results that name none.
        defaults: The message whose id and time to take when `data` has none (a new id and
            the current time otherwise).
    """
    doc = require_dict(data, "an AgentScope message")
    clean, kept = _take_patch(doc)
    codec = CODECS[form]
    pieces = _core_read(clean, codec, names, defaults)
    extras = _patch.diff(_core_write(pieces, codec), clean)
    if extras:
        pieces[0] = _marked(pieces[0], **{**(marker(pieces[0]) or {}), "form": form}, patch=extras)
    if kept is None:
        return pieces
    patched = _apply_to_msgs(pieces, kept)
    if extras and patched and _fills_the_marker_slot(kept):
        # The writer saw no marker here and put the message's own `metadata['agentscope']`
        # in its place; the marker exists now because AgentScope changed the message since
        # (a block id, a local time). Both cannot have the slot: the marker takes it, with a
        # patch that rebuilds this whole document, the writer's patch (and with it the
        # message's own value) included, so writing gives this document back.
        whole = _patch.diff(_core_write(patched, codec), doc)
        patched[0] = _marked(patched[0], form=form, patch=whole)
    return patched


def _fills_the_marker_slot(ops: list[Any]) -> bool:
    # `diff` writes `add` only for a key its source lacks.
    slot = f"/0/metadata/{PARLEY_KEY}"
    return any(op.get("op") == "add" and op.get("path") == slot for op in ops)


def _take_patch(data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    metadata = data.get("metadata")
    # A list under the reserved key is parley's patch; anything else is the sender's own data.
    if not isinstance(metadata, dict) or not isinstance(metadata.get(AS_KEY), list):
        return data, None
    rest = {k: v for k, v in metadata.items() if k != AS_KEY}
    return {**data, "metadata": rest}, metadata[AS_KEY]


def _apply_to_msgs(pieces: list[Msg], ops: Any) -> list[Msg]:
    dumped = [p.model_dump(mode="json") for p in pieces]
    patched = _patch.apply(dumped, ops, f"metadata[{AS_KEY!r}]")
    if not isinstance(patched, list):
        raise MessageError(f"metadata[{AS_KEY!r}] must patch a list of messages")
    return [Msg.model_validate(p) for p in patched]


def _core_read(
    data: dict[str, Any], codec: Codec, names: Mapping[str, str], defaults: Msg | None
) -> list[Msg]:
    head = codec.read_head(data)
    if head.id is None:
        head.id = defaults.id if defaults else new_id()
    if head.created_at is None:
        head.created_at = defaults.created_at if defaults else datetime.now(UTC)
    content = data.get("content", [])
    if isinstance(content, str):  # lenient: a bare string, as AgentScope's factories accept
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MessageError(f"content must be a list of blocks, got {type(content).__name__}")
    names = {**names, **_raw_call_names(content)}
    items: list[Item] = []
    for i, b in enumerate(content):
        read = codec.read_item(b, f"content[{i}]", names)
        items.extend(read if isinstance(read, list) else [read])
    return _split(head, items, codec.form)


def _raw_call_names(content: list[Any]) -> dict[str, str]:
    return {
        b["id"]: b["name"]
        for b in content
        if isinstance(b, dict)
        and b.get("type") in ("tool_call", "tool_use")
        and isinstance(b.get("id"), str)
        and isinstance(b.get("name"), str)
    }


def _split(head: Head, items: list[Item], form: Form) -> list[Msg]:
    if items and all(isinstance(i, ToolResultBlock) for i in items):
        runs: list[tuple[str, Any]] = [("tool", items)]
    else:
        runs = _runs(items, head.role)
    msg_id = head.id
    pieces: list[Msg] = []
    for n, (role, content) in enumerate(runs):
        hint = content if isinstance(content, Hint) else None
        fields: dict[str, Any] = {
            "role": role,
            "content": hint.content if hint else content,
            "name": hint.source if hint else head.name,
            "id": msg_id if n == 0 else f"{msg_id}-{n}",
            "metadata": head.metadata if n == 0 else {},
            "created_at": head.created_at,
            "usage": head.usage if n == 0 else None,
        }
        piece = Msg.model_validate(fields)
        if n or hint:
            link = {"part_of": msg_id} if n else {}
            piece = _marked(piece, form=form, **link, **({"hint": True} if hint else {}))
        pieces.append(piece)
    return pieces


def _runs(items: list[Item], role: str) -> list[tuple[str, Any]]:
    runs: list[tuple[str, Any]] = []
    for item in items:
        if isinstance(item, Hint):
            runs.append(("user", item))
        elif isinstance(item, ToolResultBlock):
            runs.append(("tool", [item]))
        elif runs and runs[-1][0] == role and isinstance(runs[-1][1], list):
            runs[-1][1].append(item)
        else:
            runs.append((role, [item]))
    return runs or [(role, [])]


# -- writing -------------------------------------------------------------------------------


def write_group(
    group: list[Msg], form: Form, names: Mapping[str, str], previous: list[Msg]
) -> dict[str, Any]:
    """Write parley messages (one, or a group as `groups` makes them) as one AgentScope message.

    Args:
        group: The messages.
        form: The form to write.
        names: Tool names by call id from earlier messages, as the reader will know them.
        previous: The group written before, in a list (empty for a message on its own).
    """
    codec = CODECS[form]
    out = _core_write(group, codec)
    found = marker(group[0], form)
    if found is not None and "patch" in found:
        out = _patch.apply(out, found["patch"], f"metadata[{PARLEY_KEY!r}]['patch']")
        if not isinstance(out, dict):
            raise MessageError(f"metadata[{PARLEY_KEY!r}]['patch'] must patch a message")
    lost = _lost(out, group, form, (names, previous))
    if not lost:
        return out
    metadata = out.get("metadata")
    if not isinstance(metadata, dict) or AS_KEY in metadata:
        # The patch needs a metadata object of its own: read back what the reader will see.
        out = {**out, "metadata": {k: v for k, v in _as_dict(metadata).items() if k != AS_KEY}}
        lost = _lost(out, group, form, (names, previous))
    return {**out, "metadata": {**out["metadata"], AS_KEY: lost}}


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _lost(
    out: dict[str, Any], group: list[Msg], form: Form, context: tuple[Mapping[str, str], list[Msg]]
) -> Any:
    # Read back as the reader will (in a list: after `previous`), but with the group's own id
    # and time where `out` has none.
    names, previous = context
    back = keep_apart(read_group(out, form, names, group[0]), previous, form)
    wanted = [m.model_dump(mode="json") for m in group]
    return _patch.diff([m.model_dump(mode="json") for m in back], wanted)


def _core_write(group: list[Msg], codec: Codec) -> dict[str, Any]:
    head = group[0]
    ctx = WriteContext(
        msg_id=head.id,
        stamp=format_time(head.created_at),
        answered=frozenset(b.tool_call_id for m in group for b in m.tool_results),
    )
    content: list[dict[str, Any]] = []
    for piece in group:
        if _is_hint(piece, codec.form):
            content.append(codec.write_hint(piece, str(len(content)), ctx))
        else:
            content.extend(codec.write_block(b, str(len(content)), ctx) for b in piece.content)
    metadata = jsonable({k: v for k, v in head.metadata.items() if k not in (AS_KEY, PARLEY_KEY)})
    return codec.write_message(head, content, metadata, _is_hint(head, codec.form))


# -- lists ---------------------------------------------------------------------------------


def groups(msgs: Iterable[Msg], form: Form) -> list[list[Msg]]:
    """Gather parley messages into the groups that are one AgentScope message each.

    Messages read from one AgentScope message go back together. In the Python form, a tool
    message with one result joins the assistant message (not read from AgentScope) whose call
    it answers, as AgentScope's agent keeps results in its reply.
    """
    gathered: list[list[Msg]] = []
    for msg in msgs:
        if gathered and _belongs(msg, gathered[-1], form):
            gathered[-1].append(msg)
        else:
            gathered.append([msg])
    return gathered


def _belongs(msg: Msg, group: list[Msg], form: Form) -> bool:
    head = group[0]
    found = marker(msg)
    if found is not None:
        return found["form"] == form and found.get("part_of") == head.id
    if form != "python" or head.role != "assistant" or marker(head) is not None:
        return False
    if msg.role != "tool" or len(msg.content) != 1:
        return False
    open_calls = {b.id for b in head.tool_calls} - {
        r.tool_call_id for m in group for r in m.tool_results
    }
    return msg.tool_results[0].tool_call_id in open_calls


def keep_apart(pieces: list[Msg], previous: list[Msg], form: Form) -> list[Msg]:
    """Mark the first of `pieces` so that `groups` does not fold it into `previous`.

    A message of its own in AgentScope that `groups` would fold into the message before (a
    single tool result answering its call) is marked `{'form': ...}`, so that it is written
    back as its own message.
    """
    if previous and _belongs(pieces[0], previous, form):
        return [_marked(pieces[0], form=form), *pieces[1:]]
    return pieces


def call_names(msgs: Iterable[Msg]) -> dict[str, str]:
    """Tool names by call id, of the tool calls in `msgs`."""
    return {b.id: b.name for m in msgs for b in m.content if isinstance(b, ToolCallBlock)}
