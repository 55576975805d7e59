"""The Qwen-Agent schema: behaviours recorded from qwen_agent 0.0.34 (/tmp/notes/qwen_schema.md).

Where parley deliberately differs (malformed input raising a ValidationError rather than a
TypeError), the test says so.
"""

from __future__ import annotations

import inspect
import json

import pytest
from pydantic import ValidationError

from parley.compat import qwen
from parley.compat.qwen import (
    ContentItem,
    FunctionCall,
    Message,
    ModelResponse,
    Usage,
)
from parley.errors import MessageError, ToolArgumentsError

EXACTLY_ONE = "Exactly one of 'text', 'image', 'file', 'audio', or 'video' must be provided."


def test_constants_have_qwen_agents_values() -> None:
    assert (qwen.ROLE, qwen.CONTENT, qwen.REASONING_CONTENT, qwen.NAME) == (
        "role",
        "content",
        "reasoning_content",
        "name",
    )
    assert (qwen.SYSTEM, qwen.USER, qwen.ASSISTANT, qwen.FUNCTION) == (
        "system",
        "user",
        "assistant",
        "function",
    )
    assert (qwen.TEXT, qwen.FILE, qwen.IMAGE, qwen.AUDIO, qwen.VIDEO) == (
        "text",
        "file",
        "image",
        "audio",
        "video",
    )
    assert qwen.DEFAULT_SYSTEM_MESSAGE == ""


# -- dict-style access ------------------------------------------------------------------------


def test_getitem_reads_fields_and_properties() -> None:
    msg = Message("user", "hi")
    assert msg["role"] == "user"
    assert msg["name"] is None
    item = ContentItem(image="https://x/y.png")
    assert (item["type"], item["value"]) == ("image", "https://x/y.png")


def test_getitem_of_a_missing_key_raises_attribute_error_and_key_error() -> None:
    msg = Message("user", "hi")
    with pytest.raises(AttributeError):
        msg["nope"]
    with pytest.raises(KeyError):
        msg["nope"]


def test_get_returns_the_default_for_missing_or_falsy_values() -> None:
    msg = Message("assistant", "", reasoning_content="")
    assert msg.get("nope", "d") == "d"
    assert msg.get("content", "d") == "d"
    assert msg.get("reasoning_content", "d") == "d"
    assert msg.get("name") is None
    assert Message("user", "hi").get("content", "d") == "hi"
    assert ContentItem(text="a").get("type") == "text"


def test_setitem_sets_fields_without_validation_like_qwen_agent() -> None:
    msg = Message("user", "hi")
    msg["content"] = "x"
    assert msg.content == "x"
    msg["role"] = "bogus"  # Qwen-Agent does not validate assignments either
    assert msg.role == "bogus"


def test_setitem_of_an_unknown_key_raises_qwen_agents_value_error() -> None:
    with pytest.raises(ValueError, match='"Message" object has no field "newattr"') as info:
        Message("user", "hi")["newattr"] = 1
    assert isinstance(info.value, MessageError)


def test_in_iter_eq_and_hash_behave_as_pydantic_models() -> None:
    msg = Message("user", "hi")
    assert "content" not in msg  # pydantic iterates (name, value) pairs, as in Qwen-Agent
    assert dict(msg)["function_call"] is None
    assert msg == Message(role="user", content="hi")
    assert msg != Message("user", "ho")
    with pytest.raises(TypeError):
        hash(msg)


def test_dumps_leave_out_none_and_str_is_the_dump() -> None:
    msg = Message(
        "assistant", "hi", function_call=FunctionCall("f", "{}"), extra={"function_id": "1"}
    )
    assert msg.model_dump_json() == (
        '{"role":"assistant","content":"hi","function_call":{"name":"f","arguments":"{}"},'
        '"extra":{"function_id":"1"}}'
    )
    assert str(Message("user", "hi")) == "{'role': 'user', 'content': 'hi'}"
    assert Message("user", "hi").model_dump(exclude_none=False)["name"] is None
    assert json.loads(Message("user", "hi").model_dump_json(exclude_none=False))["extra"] is None


def test_reprs_show_the_dump() -> None:
    assert repr(Message("user", "hi")) == "Message({'role': 'user', 'content': 'hi'})"
    assert repr(FunctionCall("f", "{}")) == "FunctionCall({'name': 'f', 'arguments': '{}'})"
    assert repr(ContentItem(text="a")) == "ContentItem({'text': 'a'})"
    nested = Message("user", [ContentItem(text="a"), ContentItem(image="http://x/y.png")])
    assert repr(nested) == (
        "Message({'role': 'user', 'content': [{'text': 'a'}, {'image': 'http://x/y.png'}]})"
    )


# -- FunctionCall -----------------------------------------------------------------------------


def test_function_call_positional_and_keyword() -> None:
    call = FunctionCall("get_weather", '{"city": "Beijing"}')
    assert (call.name, call.arguments) == ("get_weather", '{"city": "Beijing"}')
    assert call == FunctionCall(name="get_weather", arguments='{"city": "Beijing"}')


def test_function_call_arguments_must_be_a_json_string_unless_partial() -> None:
    with pytest.raises(ValidationError, match="string_type"):
        FunctionCall.model_validate({"name": "f", "arguments": {"a": 1}})
    with pytest.raises(ValidationError, match="must be a JSON string"):
        FunctionCall("f", '{"city": "Par')
    partial = FunctionCall.partial("f", '{"city": "Par')  # a streaming prefix
    assert partial.arguments == '{"city": "Par'


def test_function_call_malformed_input_raises_validation_error_not_type_error() -> None:
    # Qwen-Agent raises TypeError here (its __init__ has fixed parameters).
    with pytest.raises(ValidationError, match="arguments"):
        FunctionCall.model_validate({"name": "f"})
    with pytest.raises(ValidationError, match="extra_forbidden"):
        FunctionCall.model_validate({"name": "f", "arguments": "{}", "x": 1})


def test_get_parsed_arguments_parses_a_json_object() -> None:
    assert FunctionCall("f", '{"a": [1, 2]}').get_parsed_arguments() == {"a": [1, 2]}


@pytest.mark.parametrize("arguments", ['{"a": ', "[1, 2]", "3", ""])
def test_get_parsed_arguments_rejects_what_is_not_a_json_object(arguments: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        FunctionCall.partial("search", arguments).get_parsed_arguments()
    assert info.value.tool_name == "search"


def test_add_argument_returns_a_new_call() -> None:
    call = FunctionCall("f", '{"a": 1}')
    added = call.add_argument("city", "北京")
    assert added.arguments == '{"a": 1, "city": "北京"}'  # ensure_ascii=False, as seed 001
    assert call.arguments == '{"a": 1}'
    assert added.name == "f"


# -- ContentItem ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"text": ""}, "text"),
        ({"text": "a"}, "text"),
        ({"image": "https://x/y.png"}, "image"),
        ({"file": "doc.pdf"}, "file"),
        ({"audio": "a.wav"}, "audio"),
        ({"video": "v.mp4"}, "video"),
        ({"text": "", "image": ""}, "text"),  # an empty image is not counted
        ({"text": "a", "image": ""}, "text"),
    ],
)
def test_content_item_accepts_exactly_one_provided_field(fields: dict[str, str], kind: str) -> None:
    item = ContentItem(**fields)
    assert item.type == kind
    assert item.model_dump() == fields


@pytest.mark.parametrize(
    "fields",
    [{}, {"image": ""}, {"text": "a", "image": "b"}, {"image": "a", "file": "b"}, {"video": []}],
)
def test_content_item_rejects_zero_or_several_fields(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match=EXACTLY_ONE):
        ContentItem.model_validate(fields)


def test_content_item_positional_order_is_text_image_file_audio_video() -> None:
    assert ContentItem("a").text == "a"
    assert ContentItem(None, "i.png").image == "i.png"
    assert ContentItem(None, None, None, None, "v.mp4").video == "v.mp4"


def test_content_item_type_and_value_for_each_form() -> None:
    audio = ContentItem(audio={"data": "b64", "format": "wav"})
    assert audio.get_type_and_value() == ("audio", {"data": "b64", "format": "wav"})
    video = ContentItem(video=["a.jpg", "b.jpg"])
    assert (video.type, video.value) == ("video", ["a.jpg", "b.jpg"])
    # Qwen-Agent fails to unpack here; parley returns the one provided field.
    assert ContentItem(text="a", image="").get_type_and_value() == ("text", "a")


def test_content_item_built_without_validation_says_what_is_wrong() -> None:
    with pytest.raises(MessageError, match="exactly one field"):
        ContentItem.model_construct(text="a", image="b").get_type_and_value()


def test_content_item_unknown_keys_raise_validation_error() -> None:
    # Qwen-Agent raises TypeError (custom __init__).
    with pytest.raises(ValidationError, match="extra_forbidden"):
        ContentItem.model_validate({"text": "a", "foo": 1})


def test_content_item_helpers_from_seed_001() -> None:
    assert ContentItem(image="x.png").is_media_content()
    assert ContentItem(video=["a.jpg"]).is_media_content()
    assert not ContentItem(file="doc.pdf").is_media_content()
    assert not ContentItem(text="x").is_media_content()
    assert ContentItem(image="https://x/Y.PNG").get_file_extension() == "png"
    assert ContentItem(file="archive.tar.gz").get_file_extension() == "gz"
    assert ContentItem(file="README").get_file_extension() is None
    assert ContentItem(audio="a.wav").get_file_extension() is None
    assert ContentItem(text="a.b").get_file_extension() is None


# -- Message ----------------------------------------------------------------------------------


def test_message_positional_order() -> None:
    call = FunctionCall("f", "{}")
    msg = Message("assistant", "c", "r", "bot", call, {"k": 1})
    assert (msg.role, msg.content, msg.reasoning_content, msg.name) == (
        "assistant",
        "c",
        "r",
        "bot",
    )
    assert (msg.function_call, msg.extra) == (call, {"k": 1})


def test_signatures_show_the_positional_parameters() -> None:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    message = inspect.signature(Message).parameters
    assert [n for n, p in message.items() if p.kind == positional] == [
        "role",
        "content",
        "reasoning_content",
        "name",
        "function_call",
        "extra",
    ]
    assert message["content"].default == ""  # seed 001
    assert list(inspect.signature(FunctionCall).parameters) == ["name", "arguments"]
    assert all(
        p.kind == inspect.Parameter.KEYWORD_ONLY
        for p in inspect.signature(Usage).parameters.values()
    )


def test_message_none_content_becomes_empty_string() -> None:
    assert Message("assistant", None).content == ""
    assert Message.model_validate({"role": "user", "content": None}).content == ""


def test_message_rejects_other_roles_with_qwen_agents_text() -> None:
    with pytest.raises(ValidationError, match="tool must be one of user,assistant,system,function"):
        Message("tool", "x")


def test_message_requires_a_role_and_defaults_content_to_empty() -> None:
    # Seed 001 gives content a default of ''; Qwen-Agent 0.0.34 itself requires it.
    assert Message.model_validate({"role": "user"}).content == ""
    assert Message(role="assistant").content == ""
    with pytest.raises(ValidationError, match="role"):
        Message.model_validate({"content": "x"})


def test_message_drops_unknown_keys_like_qwen_agent() -> None:
    assert Message.model_validate({"role": "user", "content": "x", "foo": 1}).model_dump() == {
        "role": "user",
        "content": "x",
    }


def test_message_coerces_dicts_to_items_and_calls() -> None:
    msg = Message.model_validate(
        {
            "role": "assistant",
            "content": [{"text": "a"}, {"image": "http://x/y.png"}],
            "function_call": {"name": "f", "arguments": "{}"},
        }
    )
    assert msg.content == [ContentItem(text="a"), ContentItem(image="http://x/y.png")]
    assert msg.function_call == FunctionCall("f", "{}")


def test_message_keeps_an_empty_extra_in_dumps() -> None:
    msg = Message("assistant", "", reasoning_content="r", extra={})
    assert msg.model_dump() == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r",
        "extra": {},
    }


def test_message_positional_mistakes_are_type_errors() -> None:
    with pytest.raises(TypeError, match="at most 6"):
        Message("user", "a", None, None, None, None, "extra")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'role'"):
        Message("user", "a", role="system")  # type: ignore[misc]


def test_message_helpers_from_seed_001() -> None:
    mixed = Message("user", [ContentItem(text="look"), ContentItem(file="doc.pdf")])
    assert mixed.is_multimodal()
    assert not Message("user", [ContentItem(text="a")]).is_multimodal()
    assert not Message("user", "just text").is_multimodal()
    texts = Message("user", [ContentItem(text="a"), ContentItem(text=""), ContentItem(text="b")])
    assert texts.get_text_content() == "a\nb"
    assert Message("user", "plain").get_text_content() == "plain"


# -- Usage and ModelResponse ------------------------------------------------------------------


def test_usages_add_up() -> None:
    total = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3, cost=0.5) + Usage(
        prompt_tokens=10, completion_tokens=20, total_tokens=30
    )
    assert total == Usage(prompt_tokens=11, completion_tokens=22, total_tokens=33, cost=0.5)
    assert sum([Usage(total_tokens=2), Usage(total_tokens=3)], Usage()).total_tokens == 5
    assert sum([Usage(total_tokens=2), Usage(total_tokens=3)]).total_tokens == 5  # type: ignore[attr-defined]
    assert (Usage() + Usage()).cost == 0  # seed 001: an unknown cost counts as 0
    with pytest.raises(TypeError):
        1 + Usage()  # type: ignore[operator]


def test_model_response_content_and_calls() -> None:
    response = ModelResponse(
        messages=[
            Message("assistant", "", function_call=FunctionCall("a", "{}")),
            Message("assistant", "", function_call=FunctionCall("b", "{}")),
            Message("assistant", [ContentItem(text="x"), ContentItem(text="y")]),
        ],
        usage=Usage(total_tokens=3),
        model="qwen-max",
    )
    assert response.get_content() == "x\ny"
    assert [call.name for call in response.get_function_calls()] == ["a", "b"]
    assert ModelResponse(messages=[]).get_content() == ""
    assert response["usage"]["total_tokens"] == 3
    parsed = ModelResponse.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    assert parsed.messages == [Message("user", "hi")]
