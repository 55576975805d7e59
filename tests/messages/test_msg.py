"""Msg: construction, role rules, dict-style access, JSON round trips and helpers."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parley import Msg
from parley.errors import MessageError, ParleyError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    MsgList,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    Usage,
    VideoBlock,
    msgs_from_json,
    msgs_to_json,
    source_from_str,
)
from tests.strategies import json_values, media_blocks, msgs

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def call(call_id: str = "call_1", name: str = "get_weather", **args: Any) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=args or {"city": "Paris"})


# -- construction ----------------------------------------------------------------------------


def test_string_content_becomes_one_text_block() -> None:
    msg = Msg(role="user", content="hello")
    assert msg.content == [TextBlock(text="hello")]
    assert Msg.model_validate({"role": "user", "content": "hi"}).content == [TextBlock(text="hi")]
    assert Msg.model_validate_json('{"role":"user","content":"hi"}').text == "hi"


def test_constructors_set_roles_and_wrap_strings() -> None:
    image = ImageBlock.from_url("https://example.com/cat.jpg")
    user = Msg.user("look", image, name="ann")
    assert (user.role, user.name, user.content) == ("user", "ann", [TextBlock(text="look"), image])
    assert Msg.system("be brief").role == "system"
    named = Msg.system("be brief", name="moderator")  # a name went through **fields twice
    assert (named.role, named.name, named.text) == ("system", "moderator", "be brief")
    assistant = Msg.assistant("checking", call())
    assert assistant.role == "assistant"
    assert assistant.tool_calls == [call()]
    result = Msg.tool_result("call_1", "sunny", name="get_weather", is_error=True)
    assert result.role == "tool"
    assert result.tool_results == [
        ToolResultBlock(tool_call_id="call_1", name="get_weather", output="sunny", is_error=True)
    ]


def test_each_message_gets_its_own_id_and_an_aware_timestamp() -> None:
    # The constructors' fast path and validation (a field given: metadata) alike.
    first, second = Msg.user("a"), Msg.user("a", metadata={})
    assert first.id != second.id
    for msg in (first, second):
        assert re.fullmatch("[0-9a-f]{32}", msg.id)
        assert msg.created_at.tzinfo is UTC
    assert first.metadata == {}
    first.metadata["k"] = 1
    assert second.metadata == {}  # no shared mutable default


def test_extra_fields_are_rejected_with_their_name() -> None:
    with pytest.raises(ValidationError, match="colour"):
        Msg.model_validate({"role": "user", "content": [], "colour": "red"})


# -- role rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "block", "hint"),
    [
        ("user", call(), "tool calls come from the model"),
        ("system", call(), "Msg.assistant"),
        ("user", ThinkingBlock(thinking="hmm"), "reasoning comes from the model"),
        ("user", ToolResultBlock(tool_call_id="c", name="f"), "Msg.tool_result"),
        ("assistant", ToolResultBlock(tool_call_id="c", name="f"), "an assistant message"),
        ("tool", TextBlock(text="x"), "holds only tool_result blocks"),
    ],
)
def test_misplaced_blocks_are_refused_with_a_fix(role: str, block: Any, hint: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Msg(role=role, content=[block])  # type: ignore[arg-type]
    assert hint in str(caught.value)
    assert f"a {block.type} block cannot be in" in str(caught.value)


def test_role_rules_hold_for_json_input_too() -> None:
    data = {"role": "user", "content": [{"type": "tool_call", "id": "1", "name": "f"}]}
    with pytest.raises(ValidationError, match="cannot be in a user message"):
        Msg.model_validate_json(json.dumps(data))


def test_tool_message_needs_a_result_and_text_is_not_one() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        Msg(role="tool", content=[])
    with pytest.raises(ValidationError, match="holds only tool_result blocks"):
        Msg(role="tool", content="plain text")


def test_unknown_role_and_block_type_name_the_choices() -> None:
    with pytest.raises(ValidationError, match="'system', 'user', 'assistant', 'tool'"):
        Msg.model_validate({"role": "robot", "content": []})
    with pytest.raises(ValidationError, match="'text', 'thinking'"):
        Msg.model_validate({"role": "user", "content": [{"type": "gif"}]})


# -- sources and media -------------------------------------------------------------------------


def test_sources_accept_web_and_file_urls_and_storage_locations_and_refuse_others() -> None:
    assert URLSource(url="https://a.test/x.png").url == "https://a.test/x.png"
    assert URLSource(url="file:///tmp/x.wav").url == "file:///tmp/x.wav"
    # Providers' storage locations, opaque to parley (DashScope's uploads, buckets).
    for url in ("oss://dashscope-instant/k/cat.png", "s3://b/x.wav", "gs://b/a.mp3", "OSS://b/c"):
        assert URLSource(url=url).url == url
        assert source_from_str(url) == URLSource(url=url)
        assert ImageBlock.from_url(url).source == URLSource(url=url)
    for bad in ("ftp://a.test/x", "cat.jpg", "oss://", "oss:/b/c", "s3x://b/c"):
        with pytest.raises(ValidationError, match="url"):
            URLSource(url=bad)


def test_base64_sources_check_their_data_and_media_type() -> None:
    source = Base64Source(media_type="image/png", data=PNG)
    assert source.to_bytes().startswith(b"\x89PNG")
    assert source.to_data_url() == f"data:image/png;base64,{PNG}"
    with pytest.raises(ValidationError, match="not valid base64"):
        Base64Source(media_type="image/png", data="not base64!")
    with pytest.raises(ValidationError, match="media_type"):
        Base64Source(media_type="png", data=PNG)


def test_source_from_str_reads_urls_data_urls_and_paths(tmp_path: Path) -> None:
    assert source_from_str("https://a.test/x") == URLSource(url="https://a.test/x")
    assert source_from_str(f"data:image/png;base64,{PNG}") == Base64Source(
        media_type="image/png", data=PNG
    )
    local = tmp_path / "x.png"
    assert source_from_str(str(local)) == URLSource(url=local.as_uri())
    with pytest.raises(MessageError, match="not a URL"):
        source_from_str("just words")
    with pytest.raises(MessageError, match="data:<media type>;base64"):
        source_from_str("data:image/png,rawbytes")


def test_media_blocks_take_a_string_source_and_check_the_family(tmp_path: Path) -> None:
    assert ImageBlock(source="https://a.test/i.png").source == URLSource(url="https://a.test/i.png")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"needs a image/\* media type"):
        ImageBlock(source=Base64Source(media_type="audio/wav", data=PNG))
    assert AudioBlock.from_bytes(b"RIFF", "audio/wav").source.media_type == "audio/wav"
    assert VideoBlock.from_url("https://a.test/v.mp4", "video/mp4").source.media_type == "video/mp4"
    # Files may be of any type.
    assert FileBlock.from_bytes(b"%PDF", "application/pdf").source.type == "base64"

    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF-1.4")
    by_url = FileBlock.from_path(path)
    assert by_url.source == URLSource(url=path.as_uri(), media_type="application/pdf")
    inline = FileBlock.from_path(path, inline=True)
    assert isinstance(inline.source, Base64Source)
    assert inline.source.to_bytes() == b"%PDF-1.4"
    assert ImageBlock.from_url(f"data:image/png;base64,{PNG}").source.type == "base64"


def test_a_video_may_be_given_by_its_frames(tmp_path: Path) -> None:
    first = tmp_path / "f1.jpg"
    frames = [str(first), "https://a.test/f2.jpg", f"data:image/png;base64,{PNG}"]
    video = VideoBlock.from_frames(frames)
    assert video.frames == [
        URLSource(url=first.as_uri()),
        URLSource(url="https://a.test/f2.jpg"),
        Base64Source(media_type="image/png", data=PNG),
    ]
    # The first frame is the source too, for code that reads only the source.
    assert video.source == URLSource(url=first.as_uri())
    assert VideoBlock.model_validate_json(video.model_dump_json()) == video
    assert VideoBlock.model_validate({"frames": frames}) == video
    assert VideoBlock.model_validate({"source": frames[0], "frames": frames}) == video
    # A video by one source has no frames, and dumps none.
    assert "frames" not in VideoBlock.from_url("https://a.test/v.mp4").model_dump()


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"frames": []}, "at least one frame"),
        ({"frames": [f"data:video/mp4;base64,{PNG}"]}, "frames are images: frame 0"),
        (
            {"frames": ["https://a/1.jpg", URLSource(url="https://a/2", media_type="audio/wav")]},
            "frame 1 is 'audio/wav'",
        ),
        ({"source": "https://a.test/v.mp4", "frames": ["https://a.test/1.jpg"]}, "first frame"),
        ({"frames": ["just words"]}, "not a URL"),
    ],
)
def test_bad_frames_are_refused_saying_why(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        VideoBlock.model_validate(fields)


# -- dict-style access and dumps ---------------------------------------------------------------


def test_dict_style_access_reads_and_writes_fields() -> None:
    msg = Msg.user("hi")
    assert msg["role"] == "user"
    assert msg["content"][0]["text"] == "hi"
    msg["name"] = "bob"
    assert msg.name == "bob"
    assert msg.get("name") == "bob"
    # As in Qwen-Agent, get() falls back on a missing *or falsy* value.
    assert msg.get("usage", "none") == "none"
    assert msg.get("metadata", {"d": 1}) == {"d": 1}
    assert msg.get("nope", 3) == 3


def test_missing_keys_raise_both_key_and_attribute_error() -> None:
    msg = Msg.user("hi")
    with pytest.raises(KeyError):
        msg["nope"]
    with pytest.raises(AttributeError):
        msg["nope"]
    with pytest.raises(KeyError):
        msg["nope"] = 1


def test_dumps_omit_none_unless_asked() -> None:
    msg = Msg.user("hi")
    assert "name" not in msg.model_dump()
    assert "usage" not in json.loads(msg.model_dump_json())
    assert msg.model_dump(exclude_none=False)["name"] is None
    assert json.loads(msg.model_dump_json(exclude_none=False))["usage"] is None
    assert str(msg) == str(msg.model_dump())


def test_json_keeps_each_blocks_concrete_class() -> None:
    blocks: list[Any] = [
        TextBlock(text="t"),
        ThinkingBlock(thinking="why", signature="sig", extra={"id": "rs_1"}),
        ImageBlock.from_url("https://a.test/i.png", "image/png"),
        AudioBlock.from_bytes(b"RIFF", "audio/wav"),
        VideoBlock.from_url("file:///v.mp4"),
        FileBlock(source=URLSource(url="https://a.test/f.pdf"), filename="f.pdf"),
        ToolCallBlock(id="c", name="f", input={"a": [1, {"b": None}]}, raw_input='{"a": [1'),
    ]
    msg = Msg.assistant(*blocks, usage=Usage(input_tokens=3, output_tokens=4))
    back = Msg.model_validate_json(msg.model_dump_json())
    assert back == msg
    assert [type(b) for b in back.content] == [type(b) for b in blocks]
    # None inside a tool's input is data, not an absent field: it survives.
    assert back.tool_calls[0].input == {"a": [1, {"b": None}]}


def test_tool_result_output_may_hold_media() -> None:
    output = [TextBlock(text="chart:"), ImageBlock.from_bytes(b"\x89PNG", "image/png")]
    msg = Msg.tool_result("c1", output, name="plot")
    back = Msg.model_validate_json(msg.model_dump_json())
    assert back.tool_results[0].output == output
    assert back.tool_results[0].text == "chart:"


def test_message_lists_round_trip_through_json() -> None:
    conversation = [
        Msg.system("s"),
        Msg.user("u"),
        Msg.assistant(call()),
        Msg.tool_result("call_1", "ok", name="get_weather"),
    ]
    assert msgs_from_json(msgs_to_json(conversation)) == conversation
    assert b'"name":null' not in MsgList.dump_json(conversation, exclude_none=True)


@settings(max_examples=300, deadline=None)
@given(msgs() | msgs(media=media_blocks(storage=True, frames=True)))
def test_every_valid_msg_survives_json(msg: Msg) -> None:
    back = Msg.model_validate_json(msg.model_dump_json())
    assert back == msg
    assert [type(b) for b in back.content] == [type(b) for b in msg.content]
    assert Msg.model_validate(msg.model_dump()) == msg


# -- helpers -----------------------------------------------------------------------------------


def test_text_thinking_and_block_queries() -> None:
    msg = Msg.assistant(
        ThinkingBlock(thinking="a"),
        "one",
        call("c1"),
        "two",
        call("c2"),
        ThinkingBlock(thinking="b"),
    )
    assert msg.text == "one\ntwo"
    assert msg.thinking == "a\nb"
    assert [c.id for c in msg.tool_calls] == ["c1", "c2"]
    assert [b.text for b in msg.get_blocks("text")] == ["one", "two"]
    assert msg.get_blocks(ToolCallBlock) == msg.tool_calls
    assert len(msg.get_blocks()) == 6
    assert msg.has_blocks("thinking")
    assert not msg.has_blocks("image")
    assert not msg.has_blocks(ImageBlock)
    assert not Msg.user().has_blocks()
    with pytest.raises(MessageError, match="unknown block type 'txt'"):
        msg.get_blocks("txt")  # type: ignore[call-overload]


def test_usage_adds_up() -> None:
    first = Usage(input_tokens=10, output_tokens=2, cached_tokens=4, elapsed=0.5)
    second = Usage(input_tokens=1, output_tokens=3, elapsed=0.25)
    total = first + second
    assert total == Usage(input_tokens=11, output_tokens=5, cached_tokens=4, elapsed=0.75)
    assert total.total_tokens == 16
    assert sum([first, second], Usage()) == total
    assert sum([first, second]) == total  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Usage(input_tokens=-1)


def golden_conversation() -> list[Msg]:
    fixed: dict[str, Any] = {
        "id": "0" * 31 + "1",
        "created_at": datetime(2024, 1, 15, 10, 30, 0, 123456, tzinfo=UTC),
    }
    chart = [TextBlock(text="chart:"), ImageBlock.from_bytes(b"\x89PNG", "image/png")]
    return [
        Msg.system("be brief", **fixed),
        Msg.user("look", ImageBlock.from_url("https://a.test/i.png"), name="ann", **fixed),
        Msg.assistant(
            ThinkingBlock(thinking="why", signature="sig", extra={"id": "rs_1"}),
            "calling",
            ToolCallBlock(id="c1", name="f", input={"a": [1, {"b": None}]}, raw_input='{"a"'),
            usage=Usage(input_tokens=3, output_tokens=4, elapsed=0.5),
            **fixed,
        ),
        Msg.tool_result("c1", chart, name="f", **fixed),
        Msg.user(
            AudioBlock.from_bytes(b"RIFF", "audio/wav"),
            VideoBlock.from_frames(["https://a.test/1.jpg", f"data:image/png;base64,{PNG}"]),
            FileBlock(
                source=URLSource(url="oss://bucket/f.pdf", media_type="application/pdf"),
                filename="f.pdf",
            ),
            metadata={"k": [1, "v"]},
            **fixed,
        ),
        Msg.tool_result("c2", "boom", name="g", is_error=True, **fixed),
    ]


# What stored threads and the service's replies hold, written by the release before the
# dump path was made faster: the same bytes still.
GOLDEN_JSON = (Path(__file__).parent / "data" / "golden.jsonl").read_text().splitlines()


def test_json_is_byte_for_byte_the_same() -> None:
    conversation = golden_conversation()
    assert [msg.model_dump_json() for msg in conversation] == GOLDEN_JSON
    assert msgs_to_json(conversation) == f"[{','.join(GOLDEN_JSON)}]"
    for msg, text in zip(conversation, GOLDEN_JSON, strict=True):
        assert msg.model_dump(mode="json") == json.loads(text)
        assert Msg.model_validate_json(text).model_dump_json() == text


def test_created_at_round_trips_with_its_zone() -> None:
    when = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    msg = Msg.user("x", created_at=when)
    assert json.loads(msg.model_dump_json())["created_at"] == "2024-01-15T10:30:00Z"
    assert Msg.model_validate_json(msg.model_dump_json()).created_at == when


# -- fuzz --------------------------------------------------------------------------------------

almost_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]) | json_values},
    optional={
        "content": json_values
        | st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(
                        ["text", "image", "tool_call", "tool_result", "thinking"]
                    )
                },
                optional={
                    "text": json_values,
                    "source": json_values
                    | st.fixed_dictionaries({"type": st.just("url"), "url": json_values}),
                    "id": json_values,
                    "name": json_values,
                    "input": json_values,
                    "output": json_values,
                },
            ),
            max_size=3,
        ),
        "name": json_values,
        "created_at": json_values,
        "metadata": json_values,
        "usage": json_values,
    },
)


@settings(max_examples=500, deadline=None)
@given(json_values | almost_messages)
def test_arbitrary_json_raises_only_validation_errors(data: Any) -> None:
    for parse in (Msg.model_validate, lambda d: Msg.model_validate_json(json.dumps(d))):
        try:
            msg = parse(data)
        except (ValidationError, ParleyError):
            continue
        assert isinstance(msg, Msg)
        assert Msg.model_validate_json(msg.model_dump_json()) == msg
