"""Property tests: both round trips are exact, and arbitrary input fails only in known ways."""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parley.compat.qwen import (
    ContentItem,
    FunctionCall,
    Message,
    ModelResponse,
    Usage,
    from_msgs,
    to_msgs,
)
from parley.compat.qwen._groups import Tracker, generated_call_id
from parley.errors import MessageError, ParleyError
from parley.messages import Msg, ToolCallBlock, ToolResultBlock
from tests.strategies import json_objects, json_values, media_blocks, msgs, names, text

SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])

# -- Msg → Qwen → Msg -------------------------------------------------------------------------


def _arguments_are_json(msgs: list[Msg]) -> bool:
    for call in (call for msg in msgs for call in msg.tool_calls):
        if call.raw_input is None:
            continue
        try:
            json.loads(call.raw_input)
        except ValueError:
            return False
    return True


def assert_msgs_survive(given_msgs: list[Msg]) -> None:
    assert to_msgs(from_msgs(given_msgs)) == given_msgs
    as_json = [m.model_dump(mode="json") for m in from_msgs(given_msgs)]
    if not _arguments_are_json(given_msgs):
        # A model's malformed arguments come out as they were written; read back as dicts
        # (messages a user gives), seed 001's validator refuses them, saying why.
        with pytest.raises(ValidationError, match="must be a JSON string"):
            to_msgs(from_msgs(given_msgs, as_dicts=True))
        return
    assert to_msgs(from_msgs(given_msgs, as_dicts=True)) == given_msgs
    assert to_msgs(json.loads(json.dumps(as_json))) == given_msgs


# Every media form parley holds: storage locations, videos given by their frames.
all_media = media_blocks(storage=True, frames=True)


@SETTINGS
@given(st.lists(msgs(media=all_media), max_size=6))
def test_any_msg_list_survives_qwen_and_back(given_msgs: list[Msg]) -> None:
    assert_msgs_survive(given_msgs)


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    """Messages where tool results answer calls made earlier, some with generated-style ids."""
    made: list[str] = []
    out = []
    for msg in draw(st.lists(msgs(("user", "assistant", "tool"), media=all_media), max_size=7)):
        blocks = [_rewire(draw, block, msg, made) for block in msg.content]
        out.append(msg.model_copy(update={"content": blocks}))
    return out


def _rewire(draw: st.DrawFn, block: Any, msg: Msg, made: list[str]) -> Any:
    if isinstance(block, ToolCallBlock):
        # Sometimes an id a Qwen call without function_id would get at some position.
        new_id = generated_call_id(draw(st.integers(0, 14)))
        if draw(st.booleans()) and new_id not in {b.id for b in msg.tool_calls}:
            block = block.model_copy(update={"id": new_id})
        made.append(block.id)
    elif isinstance(block, ToolResultBlock) and made:
        block = block.model_copy(update={"tool_call_id": draw(st.sampled_from(made))})
    return block


@SETTINGS
@given(conversations())
def test_conversations_survive_qwen_and_back(given_msgs: list[Msg]) -> None:
    assert_msgs_survive(given_msgs)


_parts = st.sampled_from(["r", "c", "f", "rc", "cf", "rcf"])
_indexes = st.integers(0, 3)
_fields = st.sampled_from(["content", "reasoning_content"])
qwen_record_like = st.fixed_dictionaries(
    {},
    optional={
        "shape": st.lists(_parts, max_size=3),
        "lists": st.lists(st.tuples(_indexes, _fields).map(list), max_size=2),
        "fields": st.lists(
            st.tuples(
                _indexes,
                st.fixed_dictionaries(
                    {}, optional={"name": st.none() | names, "extra": st.none() | json_objects}
                ),
            ).map(list),
            max_size=2,
        ),
        "items": st.lists(
            st.tuples(_indexes, _fields, _indexes, st.just({"text": "x"})).map(list),
            max_size=2,
        ),
    },
)


@st.composite
def msgs_with_reserved_keys(draw: st.DrawFn) -> Msg:
    """Messages whose metadata uses the keys parley and Qwen reserve."""
    msg = draw(msgs())
    reserved = draw(
        st.dictionaries(
            st.sampled_from(["parley", "function_id"]), json_values | qwen_record_like, max_size=2
        )
    )
    return msg.model_copy(update={"metadata": {**msg.metadata, **reserved}})


@SETTINGS
@given(st.lists(msgs_with_reserved_keys(), max_size=4))
def test_reserved_metadata_keys_survive_qwen_and_back(given_msgs: list[Msg]) -> None:
    assert_msgs_survive(given_msgs)


# -- Qwen → Msg → Qwen ------------------------------------------------------------------------

_b64 = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
_paths = st.sampled_from(
    ["cat.png", "./pics/a b.jpg", "../up.wav", "/tmp/x.mp4", "~/docs/r.pdf", "dir/frame_1.jpg"]
)
_urls = st.sampled_from(
    [
        "https://example.com/a.png",
        "http://h.test:8080/x?y=1",
        "file:///tmp/z.mp4",
        "HTTPS://X.io/b",
        # DashScope's uploads, and other providers' storage.
        "oss://dashscope-instant/abc/2025-01-01/x.png",
        "s3://bucket/k.wav",
        "gs://bucket/o.mp4",
    ]
)


def media_strings(family: str) -> st.SearchStrategy[str]:
    """A URL, a base64 data URL of that media family, or a local path."""
    data = st.builds(
        lambda sub, b: f"data:{family}/{sub};base64,{b}", st.sampled_from(["png", "x-y"]), _b64
    )
    return _urls | _paths | data


_formats = (
    st.sampled_from(["wav", "mp3", "mp4", "x-custom+json", "not a subtype"]) | text | json_values
)
_extras = {"format": _formats, "duration": json_values, "quality": json_values}


def media_dicts(family: str) -> st.SearchStrategy[dict[str, Any]]:
    """Media as dicts: under `data` or `url`, with a format (a media subtype or not) and more."""
    located = st.sampled_from(["data", "url"]).flatmap(
        lambda key: st.fixed_dictionaries({key: media_strings(family)}, optional=_extras)
    )
    # OpenAI's input_audio: bare base64 data named by its format.
    others = {key: value for key, value in _extras.items() if key != "format"}
    bare = st.fixed_dictionaries({"data": _b64.filter(bool), "format": _formats}, optional=others)
    return located | bare


def media_items() -> st.SearchStrategy[ContentItem]:
    audio = media_strings("audio") | media_dicts("audio")
    frames = st.lists(_urls | _paths | media_strings("image"), min_size=1, max_size=3)
    sources = st.lists(media_dicts("video"), min_size=1, max_size=2)
    video = media_strings("video") | frames | sources
    return st.one_of(
        st.builds(ContentItem, image=media_strings("image")),
        st.builds(ContentItem, file=media_strings("application") | media_strings("image")),
        st.builds(ContentItem, audio=audio),
        st.builds(ContentItem, video=video),
    )


_empty_siblings = st.fixed_dictionaries(
    {}, optional={"image": st.just(""), "audio": st.just({}), "video": st.just([])}
)
text_items = st.builds(lambda t, empty: ContentItem(text=t, **empty), text, _empty_siblings)
contents = text | st.lists(text_items | media_items(), max_size=3)
reasonings = text | st.lists(text_items, max_size=2)
_extra_keys = st.sampled_from(["model", "k", "parley", "function_id"]) | text
extras = st.none() | st.dictionaries(_extra_keys, json_values, max_size=3)
_call_extras = st.none() | st.dictionaries(
    st.sampled_from(["model", "parley"]) | text, json_values, max_size=2
)
_objects = json_objects.map(lambda o: json.dumps(o, ensure_ascii=False))
json_arguments = _objects | json_objects.map(json.dumps)
# As a model may write them: a prefix while streaming, or not JSON at all.
arguments = json_arguments | _objects.map(lambda s: s[: len(s) // 2]) | text


@st.composite
def qwen_messages(draw: st.DrawFn) -> Message:
    """Any valid Qwen message that parley can hold, in any of Qwen-Agent's forms."""
    role = draw(st.sampled_from(["system", "user", "assistant", "assistant", "function"]))
    name = draw(st.none() | names)
    content = draw(contents)
    if role == "function":
        name = draw(names)  # seed 001: a function message has a name
    if role in ("system", "user"):
        return Message(role, content, name=name, extra=draw(extras))
    function_id = draw(st.none() | st.sampled_from(["1", "2", "call_a"]) | names)
    if role == "function":
        extra = draw(_call_extras)
        if function_id is not None:
            extra = {**(extra or {}), "function_id": function_id}
        return Message(role, content, name=name, extra=extra)
    reasoning = draw(st.none() | reasonings)
    if not draw(st.booleans()):
        return Message(role, content, reasoning, name, extra=draw(extras))
    extra = draw(_call_extras)
    if function_id is not None:
        extra = {**(extra or {}), "function_id": function_id}
    call = FunctionCall(draw(names), draw(json_arguments))  # seed 001: arguments are JSON
    return Message(role, content, reasoning, name, call, extra)


def answerable(messages: list[Message]) -> list[Message]:
    """Give function messages that no call could answer an id (and a name when they need one)."""
    tracker = Tracker()
    for i, message in enumerate(messages):
        function_id = (message.extra or {}).get("function_id")
        if message.role == "assistant" and message.function_call is not None:
            call_id = function_id or generated_call_id(i)
            tracker.add(call_id, message.function_call.name, explicit=function_id is not None)
        elif message.role == "function" and tracker.answer(function_id, message.name) is None:
            message.extra = {**(message.extra or {}), "function_id": function_id or "orphan"}
            message.name = message.name or "tool"
    return messages


qwen_lists = st.lists(qwen_messages(), max_size=8).map(answerable)


@SETTINGS
@given(qwen_lists)
def test_any_qwen_list_survives_msg_and_back(messages: list[Message]) -> None:
    assert from_msgs(to_msgs(messages)) == messages
    dicts = [m.model_dump() for m in messages]
    assert from_msgs(to_msgs(dicts), as_dicts=True) == dicts


@SETTINGS
@given(qwen_lists)
def test_msgs_read_from_qwen_survive_qwen_and_back(messages: list[Message]) -> None:
    assert_msgs_survive(to_msgs(messages))


@st.composite
def loose_messages(draw: st.DrawFn) -> Message:
    """Schema-valid Qwen messages with any fields on any role, some of which parley refuses."""
    function_ids = json_values | names
    role = draw(st.sampled_from(["system", "user", "assistant", "function"]))
    return Message(
        role,
        draw(contents),
        draw(st.none() | reasonings | st.lists(text_items | media_items(), max_size=2)),
        draw(names if role == "function" else st.none() | names),
        draw(st.none() | st.builds(FunctionCall.partial, name=names, arguments=arguments)),
        draw(st.none() | st.dictionaries(_extra_keys, function_ids, max_size=3)),
    )


@SETTINGS
@given(st.lists(loose_messages(), max_size=6))
def test_valid_qwen_lists_convert_exactly_or_raise_message_error(messages: list[Message]) -> None:
    try:
        msgs = to_msgs(messages)
    except MessageError:
        return
    assert from_msgs(msgs) == messages
    assert to_msgs(from_msgs(msgs)) == msgs


# -- fuzz -------------------------------------------------------------------------------------

_roles = st.sampled_from(["system", "user", "assistant", "function", "tool"])
qwen_shaped = st.fixed_dictionaries(
    {"role": _roles, "content": json_values},
    optional={
        "reasoning_content": json_values,
        "name": json_values,
        "function_call": json_values | st.fixed_dictionaries({"name": text, "arguments": text}),
        "extra": json_values | json_objects,
    },
)
anything = json_values | st.lists(qwen_shaped | json_values, max_size=4)


def fails_cleanly(call: Any, value: object) -> None:
    with contextlib.suppress(ValidationError, ParleyError):
        call(value)


@SETTINGS
@given(anything | qwen_shaped)
def test_arbitrary_json_raises_only_validation_or_parley_errors(value: object) -> None:
    for parse in (
        Message.model_validate,
        ContentItem.model_validate,
        FunctionCall.model_validate,
        Usage.model_validate,
        ModelResponse.model_validate,
        to_msgs,
        from_msgs,
    ):
        fails_cleanly(parse, value)


@SETTINGS
@given(st.lists(qwen_shaped, max_size=5))
def test_qwen_shaped_lists_convert_or_fail_cleanly(value: list[dict[str, Any]]) -> None:
    fails_cleanly(to_msgs, value)
    fails_cleanly(lambda v: Message.model_validate_json(json.dumps(v[0] if v else {})), value)
