"""What a conversion would lose, kept as a JSON Patch (RFC 6902) and put back later.

`diff(src, dst)` lists the `add` / `remove` / `replace` operations that turn the JSON document
`src` into `dst`, in an order that depends on the documents' values only (object keys sorted),
so equal documents give equal patches; `apply(doc, ops)` performs them. Both sides of a
conversion compare the document they were given with the one they would rebuild from the
converted message, and keep only the difference.

A patch may be applied to a message edited since it was made (a block removed, blocks
reordered). So that the ops of one content block never land on another, the ops under each
block (`/content/<i>/...`, `/<n>/content/<i>/...`) follow `test` ops on the block's `type`
and, for tool blocks, its call id. The tests and the ops after them form a section; a section
whose test fails is skipped instead of failing the whole patch. An op whose path no longer
exists is skipped too. Ops outside blocks come first, unguarded.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from parley.errors import MessageError

__all__ = ["apply", "diff"]

Op = dict[str, Any]

# The first-level content block an op belongs to, for the guarding tests.
_BLOCK = re.compile(r"^(?:/\d+)?/content/\d+(?=/|$)")
_GUARD_KEYS = ("type", "id", "tool_call_id")
# Tuples, not sets: the values tested come from input and may be unhashable.
_TOOL_BLOCKS = ("tool_call", "tool_use", "tool_result")
_OPS = ("add", "remove", "replace", "test")


def diff(src: Any, dst: Any) -> list[Op]:
    """The ops that turn `src` into `dst`, block ops guarded by tests (empty when equal)."""
    ops: list[Op] = []
    _diff(src, dst, "", ops)
    return _guarded(ops, src)


def _same(a: Any, b: Any) -> bool:
    # JSON equality: 1, 1.0 and True differ, unlike Python's ==.
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _diff(src: Any, dst: Any, path: str, ops: list[Op]) -> None:
    if _same(src, dst):
        return
    if isinstance(src, dict) and isinstance(dst, dict):
        # Keys in sorted order: a JSON object has none of its own, so two equal documents
        # whose keys were inserted in another order (one rebuilt by applying a patch) give
        # the same patch. Otherwise a message read, written and read again carries a
        # reordered patch, which writing takes for a change and records as a loss.
        ops.extend(
            {"op": "remove", "path": f"{path}/{_escape(k)}"}
            for k in sorted(src, key=str)
            if k not in dst
        )
        for key in sorted(dst, key=str):
            if key in src:
                _diff(src[key], dst[key], f"{path}/{_escape(key)}", ops)
            else:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": dst[key]})
    elif isinstance(src, list) and isinstance(dst, list) and len(src) == len(dst):
        for i, (old, new) in enumerate(zip(src, dst, strict=True)):
            _diff(old, new, f"{path}/{i}", ops)
    else:
        ops.append({"op": "replace", "path": path, "value": dst})


def _guarded(ops: list[Op], src: Any) -> list[Op]:
    free: list[Op] = []
    sections: dict[str, list[Op]] = {}
    for op in ops:
        match = _BLOCK.match(op["path"])
        block = _resolve(src, match.group(0)) if match else None
        tests = _tests(match.group(0), block) if match else []
        if not tests:
            free.append(op)
            continue
        section = sections.setdefault(match.group(0), tests)  # type: ignore[union-attr]
        section.append(op)
    return free + [op for section in sections.values() for op in section]


def _tests(path: str, block: Any) -> list[Op]:
    if not isinstance(block, dict):
        return []
    # Other blocks' ids are made up from their position, so testing them adds nothing.
    keys = _GUARD_KEYS if block.get("type") in _TOOL_BLOCKS else ("type",)
    return [
        {"op": "test", "path": f"{path}/{key}", "value": block[key]}
        for key in keys
        if isinstance(block.get(key), str)
    ]


# -- applying ----------------------------------------------------------------------------------


class _MissingPathError(Exception):
    """A path that does not exist in the document: the op is skipped."""


def apply(doc: Any, ops: Any, where: str) -> Any:
    """Apply `ops` to `doc` (changed in place) and return the result.

    Args:
        doc: A JSON document built for this purpose; it is modified.
        ops: The patch, as read from a message: checked here.
        where: Where the patch was found, for error messages.

    Raises:
        MessageError: `ops` is not a list of well-formed operations.
    """
    if not isinstance(ops, list):
        raise MessageError(f"{where} must be a JSON Patch (a list of operations)")
    skipping = after_test = False
    for op in ops:
        kind, tokens, value = _checked(op, where)
        if kind == "test":
            if not after_test:  # a new section starts
                skipping = False
            after_test = True
            skipping = skipping or not _holds(doc, tokens, value)
            continue
        after_test = False
        if not skipping:
            # A missing path: the message changed since the patch was made, and what the op
            # would have put back is gone with it.
            with contextlib.suppress(_MissingPathError):
                doc = _apply_one(doc, kind, tokens, _clone(value))
    return doc


def _checked(op: Any, where: str) -> tuple[str, list[str], Any]:
    kind = op.get("op") if isinstance(op, dict) else None
    path = op.get("path") if isinstance(op, dict) else None
    if (
        kind not in _OPS
        or not isinstance(path, str)
        or (path and not path.startswith("/"))
        or (kind != "remove" and "value" not in op)
    ):
        raise MessageError(
            f"{where} holds {op!r}, which is not a JSON Patch operation "
            "({'op': 'add' | 'remove' | 'replace' | 'test', 'path': '/...', 'value': ...})"
        )
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    return kind, tokens, op.get("value")


def _clone(value: Any) -> Any:
    # Values are copied in, so that later ops never change the patch they came from.
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _resolve(doc: Any, path: str) -> Any:
    try:
        return _walk(doc, [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]])
    except _MissingPathError:
        return None


def _walk(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = _child(doc, token)
    return doc


def _child(doc: Any, token: str) -> Any:
    if isinstance(doc, dict):
        if token in doc:
            return doc[token]
    elif isinstance(doc, list):
        index = _index(token, len(doc) - 1)
        return doc[index]
    raise _MissingPathError


def _index(token: str, last: int) -> int:
    if not token.isdigit() or (token != "0" and token.startswith("0")) or int(token) > last:
        raise _MissingPathError
    return int(token)


def _holds(doc: Any, tokens: list[str], value: Any) -> bool:
    try:
        return _same(_walk(doc, tokens), value)
    except _MissingPathError:
        return False


def _apply_one(doc: Any, kind: str, tokens: list[str], value: Any) -> Any:
    if not tokens:
        if kind == "remove":
            raise _MissingPathError
        return value
    parent = _walk(doc, tokens[:-1])
    key = tokens[-1]
    if isinstance(parent, dict):
        if kind != "add" and key not in parent:
            raise _MissingPathError
        if kind == "remove":
            del parent[key]
        else:
            parent[key] = value
    elif isinstance(parent, list):
        _apply_to_list(parent, kind, key, value)
    else:
        raise _MissingPathError
    return doc


def _apply_to_list(parent: list[Any], kind: str, key: str, value: Any) -> None:
    if kind == "add":
        index = len(parent) if key == "-" else _index(key, len(parent))
        parent.insert(index, value)
        return
    index = _index(key, len(parent) - 1)
    if kind == "remove":
        del parent[index]
    else:
        parent[index] = value
