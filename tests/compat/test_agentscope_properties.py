"""AgentScope conversion properties: nothing lost either way, and only clear errors on bad input."""

from __future__ import annotations

import contextlib
import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parley.compat.agentscope import (
    detect_form,
    msg_from_agentscope,
    msg_to_agentscope,
    msgs_from_agentscope,
    msgs_to_agentscope,
)
from parley.compat.agentscope._patch import apply, diff
from parley.errors import ParleyError
from parley.messages import Msg, ToolResultBlock
from tests.compat.test_agentscope import (
    AS_ASSISTANT,
    AS_DOCUMENTS,
    AS_SYSTEM,
    AS_USER,
)
from tests.strategies import ids, json_values, msgs, names, output_blocks, text, timestamps

FORMS = ("python", "java")
forms = st.sampled_from(FORMS)
props = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    """Messages as a conversation has them: replies with calls, then tool messages answering."""
    out: list[Msg] = []
    for _ in range(draw(st.integers(1, 4))):
        msg = draw(msgs())
        out.append(msg)
        calls = msg.tool_calls
        answered = draw(st.permutations(calls)) if calls else []
        for call in answered[: draw(st.integers(0, len(answered)))]:
            result = ToolResultBlock(
                tool_call_id=call.id,
                name=call.name,
                output=draw(text | st.lists(output_blocks, max_size=2)),
                is_error=draw(st.booleans()),
            )
            extra = [draw(st.builds(ToolResultBlock, tool_call_id=ids, name=names))]
            content = [result, *extra] if draw(st.booleans()) else [result]
            out.append(Msg(role="tool", content=content, id=draw(ids), created_at=draw(timestamps)))
    return out


# -- nothing is lost ---------------------------------------------------------------------------


@props
@given(msgs(), forms)
def test_every_message_survives_each_form(msg: Msg, form: str):
    written = msg_to_agentscope(msg, form)  # type: ignore[arg-type]
    assert detect_form(written) == form
    assert msg_from_agentscope(written) == msg
    assert msg_from_agentscope(written, form) == msg  # type: ignore[arg-type]


@props
@given(msgs(), forms)
def test_writing_is_deterministic_and_reading_it_back_writes_the_same(msg: Msg, form: str):
    written = msg_to_agentscope(msg, form)  # type: ignore[arg-type]
    assert msg_to_agentscope(msg, form) == written  # type: ignore[arg-type]
    assert msg_to_agentscope(msg_from_agentscope(written), form) == written  # type: ignore[arg-type]


@props
@given(conversations(), forms)
def test_every_conversation_survives_each_form(conversation: list[Msg], form: str):
    written = msgs_to_agentscope(conversation, form)  # type: ignore[arg-type]
    assert len(written) <= len(conversation)
    assert msgs_from_agentscope(written) == conversation
    assert msgs_to_agentscope(msgs_from_agentscope(written), form) == written  # type: ignore[arg-type]


@props
@given(msgs(roles=("system", "user", "assistant")))
def test_python_output_has_the_library_keys(msg: Msg):
    written = msg_to_agentscope(msg, "python")
    assert set(written) == set(AS_USER)
    library = {b["type"]: set(b) for doc in (AS_USER, AS_ASSISTANT) for b in doc["content"]}
    for block in written["content"]:
        keys = set(block)
        if block["type"] == "thinking":  # the library keeps a thinking block's extra keys
            keys &= library["thinking"]
        assert keys == library[block["type"]]


_NATIVE_STATES = {
    "tool_call": ["pending", "asking", "allowed", "submitted", "finished"],
    "tool_result": ["success", "error", "interrupted", "denied", "running"],
}


@props
@given(msgs(), st.data())
def test_agentscope_native_fields_survive_parley(msg: Msg, data: st.DataObject):
    """What AgentScope adds (block ids, local times, states) comes back through parley."""
    doc = msg_to_agentscope(msg, "python")
    for block in doc["content"]:
        block["id"] = (
            data.draw(st.uuids()).hex if block["type"] not in _NATIVE_STATES else block["id"]
        )
        block["created_at"] = data.draw(timestamps).replace(tzinfo=None).isoformat()
        if block["type"] in _NATIVE_STATES:
            block["state"] = data.draw(st.sampled_from(_NATIVE_STATES[block["type"]]))
    doc["created_at"] = data.draw(timestamps).replace(tzinfo=None).isoformat()
    doc["finished_reason"] = data.draw(st.sampled_from([None, "completed", "interrupted"]))
    assert msgs_to_agentscope(msgs_from_agentscope([doc])) == [doc]


# -- the patch itself --------------------------------------------------------------------------


@props
@given(json_values, json_values)
def test_a_diff_applied_gives_the_target(src: Any, dst: Any):
    patched = apply(copy.deepcopy(src), diff(src, dst), "test")
    assert patched == dst
    assert type(patched) is type(dst)


def test_diff_keeps_json_types_apart():
    assert diff({"a": 1}, {"a": 1.0}) == [{"op": "replace", "path": "/a", "value": 1.0}]
    assert diff([True], [1]) == [{"op": "replace", "path": "/0", "value": 1}]
    assert diff({"a/b~": 1}, {}) == [{"op": "remove", "path": "/a~1b~0"}]


# -- bad input: only clear errors --------------------------------------------------------------

ALLOWED = (ValidationError, ParleyError)


def has_parley_patch(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("metadata"), dict)
        and (isinstance(data["metadata"].get("parley"), list))
    )


def read_back_if_accepted(data: Any) -> None:
    """Read `data`; when parley accepts it, writing it back must give `data` again.

    Unless it holds a patch of parley's that no longer fits it (ops of a patch that does not
    apply are skipped, so they cannot come back).
    """
    try:
        msg = msg_from_agentscope(data)
    except ALLOWED:
        pass
    else:
        if not has_parley_patch(data):
            assert msg_to_agentscope(msg, detect_form(data)) == data
    try:
        read = msgs_from_agentscope([data, data])
    except ALLOWED:
        pass
    else:
        if not has_parley_patch(data):
            assert msgs_to_agentscope(read, detect_form(data)) == [data, data]


@props
@given(json_values)
def test_arbitrary_json_raises_only_clear_errors(data: Any):
    read_back_if_accepted(data)
    with pytest.raises(ALLOWED):
        msgs_from_agentscope(data if not isinstance(data, list) else {"not": "a list"})


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*path, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += _paths(value, (*path, index))
    return found


def _mutate(doc: Any, data: st.DataObject) -> Any:
    path = data.draw(st.sampled_from(_paths(doc)))
    if not path:
        return data.draw(json_values)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "delete":
        del parent[path[-1]]
    elif action == "add" and isinstance(parent, dict):
        parent[data.draw(text | st.sampled_from(["type", "role", "metadata", "parley"]))] = (
            data.draw(json_values)
        )
    else:
        parent[path[-1]] = data.draw(json_values | st.sampled_from(["", "USER", "tool_use", 0]))
    return doc


@st.composite
def near_messages(draw: st.DrawFn) -> Any:
    """Real and parley-written AgentScope messages with one to three things broken."""
    seeds = [*AS_DOCUMENTS, st.just(None)]
    base = draw(st.sampled_from(seeds[:-1])) if draw(st.booleans()) else None
    if base is None:
        base = msg_to_agentscope(draw(msgs()), draw(forms))
    doc = copy.deepcopy(base)
    data = draw(st.data())
    for _ in range(draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    return doc


@props
@given(near_messages())
def test_almost_messages_raise_only_clear_errors(doc: Any):
    read_back_if_accepted(doc)


ops = st.fixed_dictionaries(
    {
        "op": st.sampled_from(["add", "remove", "replace", "test", "move"]),
        "path": st.sampled_from(["", "/0", "/0/name", "/0/content/0", "/0/content/-", "/1/x/y"])
        | text,
    },
    optional={"value": json_values},
)


@props
@given(msgs(), forms, st.lists(ops, max_size=4) | json_values)
def test_foreign_patches_raise_only_clear_errors(msg: Msg, form: str, patch: Any):
    doc = msg_to_agentscope(msg, form)  # type: ignore[arg-type]
    assume(isinstance(doc.get("metadata"), dict))
    doc["metadata"]["parley"] = patch
    with contextlib.suppress(ALLOWED):
        msg_from_agentscope(doc)


@props
@given(msgs(), forms, st.lists(ops, max_size=4) | json_values)
def test_foreign_parley_side_patches_raise_only_clear_errors(msg: Msg, form: str, patch: Any):
    marked = msg.model_copy(
        update={"metadata": {**msg.metadata, "agentscope": {"form": form, "patch": patch}}}
    )
    with contextlib.suppress(ALLOWED):
        msg_to_agentscope(marked, form)  # type: ignore[arg-type]


@pytest.mark.parametrize("doc", [AS_SYSTEM, AS_USER], ids=["system", "user"])
def test_a_document_read_twice_in_a_list_comes_back_twice(doc: dict[str, Any]):
    assert msgs_to_agentscope(msgs_from_agentscope([doc, doc])) == [doc, doc]


# -- examples the properties found, kept -------------------------------------------------------


def test_agentscopes_user_message_with_a_java_role_comes_back_as_it_was():
    """Found by `test_almost_messages_raise_only_clear_errors`.

    Read as Java (the role is upper case), the message keeps its Python-form block keys in
    parley's patch; the patch rebuilt from the written document listed the same ops in another
    order (the document's keys were in another order), so writing took it for a change and
    added a patch of its own to the metadata.
    """
    doc = copy.deepcopy(AS_USER)
    doc["role"] = "USER"
    read_back_if_accepted(doc)
    assert msg_to_agentscope(msg_from_agentscope(doc), "java")["metadata"] == {}


def test_a_diff_does_not_depend_on_the_order_of_keys():
    src, dst = {"a": 1, "b": 2, "x": 0}, {"b": 3, "c": 4, "a": 1}
    reordered = diff(dict(reversed(src.items())), dict(reversed(dst.items())))
    assert reordered == diff(src, dst)


def test_a_message_changed_by_agentscope_keeps_its_own_agentscope_metadata():
    """Found by `test_agentscope_native_fields_survive_parley`.

    The message's own `metadata['agentscope']` went to AgentScope in parley's patch; once
    AgentScope wrote its local time, reading needed that slot for a patch of its own, and the
    value put back there took the place of the patch: the local time was lost.
    """
    msg = Msg(
        role="system",
        content=[],
        id="0",
        metadata={"agentscope": None},
        created_at=datetime(2000, 1, 1, tzinfo=UTC),
    )
    doc = msg_to_agentscope(msg, "python")
    doc["created_at"] = "2000-01-01T00:00:00"  # AgentScope writes local time
    read = msgs_from_agentscope([doc])
    assert msgs_to_agentscope(read) == [doc]
    assert msgs_from_agentscope(msgs_to_agentscope(read)) == read
    assert read[0].name is None  # what parley's own patch puts back is still put back
