"""`Msg` ↔ Qwen-Agent messages: the mapping, grouping, pairing, records and errors.

The Qwen layouts asserted here are the ones Qwen-Agent 0.0.34 produces and reads
(/tmp/notes/qwen_schema.md): a response is reasoning, text, then one message per call, each call
with `extra={"function_id": ...}`, and each result a function message with the same id.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from parley import Msg
from parley import messages as pm
from parley.compat.qwen import (
    ContentItem,
    FunctionCall,
    Message,
    as_dicts_like,
    from_msgs,
    to_msgs,
)
from parley.errors import MessageError

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def qwen_round_trip(messages: list[Message]) -> None:
    assert from_msgs(to_msgs(messages)) == messages
    dicts = [m.model_dump() for m in messages]
    assert from_msgs(to_msgs(dicts), as_dicts=True) == dicts


def msg_round_trip(msgs: list[Msg]) -> list[Message]:
    written = from_msgs(msgs)
    assert to_msgs(written) == msgs
    assert to_msgs(from_msgs(msgs, as_dicts=True)) == msgs
    return written


def without_record(messages: list[Message]) -> list[dict[str, Any]]:
    """The dumps with parley's record left out, to compare layouts."""
    dumps = []
    for message in messages:
        dump = message.model_dump()
        extra = {k: v for k, v in dump.pop("extra", {}).items() if k != "parley"}
        dumps.append({**dump, "extra": extra} if extra else dump)
    return dumps


# -- Msg → Qwen: the layout -------------------------------------------------------------------


def test_an_assistant_msg_becomes_reasoning_content_then_one_message_per_call() -> None:
    msg = Msg.assistant(
        pm.ThinkingBlock(thinking="two lookups"),
        "Checking.",
        pm.ToolCallBlock(id="call_a", name="get_weather", input={"city": "Paris"}),
        pm.ToolCallBlock(id="call_b", name="get_weather", input={"city": "Rome"}),
    )
    written = msg_round_trip([msg])
    assert without_record(written) == [
        {"role": "assistant", "content": "", "reasoning_content": "two lookups"},
        {"role": "assistant", "content": "Checking."},
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            "extra": {"function_id": "call_a"},
        },
        {
            "role": "assistant",
            "content": "",
            "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            "extra": {"function_id": "call_b"},
        },
    ]
    # Only the first message carries the record, holding only what Qwen cannot say.
    assert written[0].extra == {"parley": {"id": msg.id, "created_at": msg.created_at.isoformat()}}
    assert all("parley" not in (m.extra or {}) for m in written[1:])


def test_a_tool_msg_becomes_one_function_message_per_result() -> None:
    msg = Msg(
        role="tool",
        content=[
            pm.ToolResultBlock(tool_call_id="call_a", name="get_weather", output="18C"),
            pm.ToolResultBlock(tool_call_id="call_b", name="get_weather", output="20C"),
        ],
    )
    written = from_msgs([msg])
    assert without_record(written) == [
        {
            "role": "function",
            "content": "18C",
            "name": "get_weather",
            "extra": {"function_id": "call_a"},
        },
        {
            "role": "function",
            "content": "20C",
            "name": "get_weather",
            "extra": {"function_id": "call_b"},
        },
    ]


@pytest.mark.parametrize(
    ("blocks", "content"),
    [
        ([], ""),
        ([pm.TextBlock(text="hi")], "hi"),
        ([pm.TextBlock(text="")], [ContentItem(text="")]),
        (
            [pm.TextBlock(text="a"), pm.TextBlock(text="b")],
            [ContentItem(text="a"), ContentItem(text="b")],
        ),
        (
            [pm.ImageBlock.from_url("https://x/cat.png")],
            [ContentItem(image="https://x/cat.png")],
        ),
        (
            [pm.AudioBlock(source=pm.Base64Source(media_type="audio/wav", data=PNG))],
            [ContentItem(audio=f"data:audio/wav;base64,{PNG}")],
        ),
        (
            [pm.VideoBlock.from_url("file:///tmp/v.mp4"), pm.FileBlock.from_url("https://x/d.pdf")],
            [ContentItem(video="file:///tmp/v.mp4"), ContentItem(file="https://x/d.pdf")],
        ),
    ],
)
def test_content_blocks_map_to_a_string_or_items(blocks: list[Any], content: object) -> None:
    msg = Msg(role="user", content=blocks, name="ann")
    [written] = msg_round_trip([msg])
    assert (written.role, written.content, written.name) == ("user", content, "ann")


def test_metadata_goes_to_every_messages_extra() -> None:
    msg = Msg.assistant(
        "hi", pm.ToolCallBlock(id="c1", name="f", input={}), metadata={"trace": "t1", "n": [1]}
    )
    written = msg_round_trip([msg])
    assert written[0].extra is not None
    assert {k: v for k, v in written[0].extra.items() if k != "parley"} == {
        "trace": "t1",
        "n": [1],
    }
    assert written[1].extra == {"function_id": "c1", "trace": "t1", "n": [1]}


def test_what_qwen_cannot_say_travels_in_the_record_and_comes_back() -> None:
    call = pm.ToolCallBlock(id="c1", name="f", input={"a": 1}, raw_input='{"a":1}')
    assistant = Msg.assistant(
        "text first",
        pm.ThinkingBlock(thinking="then thinking", signature="sig", extra={"id": "rs_1"}),
        call,
        pm.ImageBlock(source=pm.URLSource(url="https://x/i", media_type="image/webp")),
        name="bot",
        usage=pm.Usage(input_tokens=5, output_tokens=7, elapsed=0.25),
        metadata={"function_id": "clash", "parley": "mine", "keep": True},
        created_at=datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    )
    tool = Msg(
        role="tool",
        name="runner",
        content=[
            pm.ToolResultBlock(
                tool_call_id="c1",
                name="f",
                output=[
                    pm.TextBlock(text="x"),
                    pm.FileBlock.from_url("https://x/r.csv", "text/csv"),
                ],
                is_error=True,
            )
        ],
    )
    written = msg_round_trip([assistant, tool])
    assert written[2].function_call == FunctionCall("f", '{"a":1}')  # the raw string
    record = written[0].extra["parley"]  # type: ignore[index]
    assert record["order"] == [1, 0, 3, 2]
    assert record["metadata"] == {"function_id": "clash", "parley": "mine"}
    assert record["usage"]["input_tokens"] == 5
    assert written[0].extra["keep"] is True  # type: ignore[index]
    assert written[3].extra["parley"]["name"] == "runner"  # type: ignore[index]


def test_a_msg_read_from_qwen_writes_no_record() -> None:
    messages = [
        Message("user", "hi"),
        Message("assistant", "", reasoning_content="hmm", extra={"model": "qwen"}),
        Message("assistant", "hello", extra={"model": "qwen"}),
    ]
    msgs = to_msgs(messages)
    assert [m.id for m in msgs] == [m.id for m in to_msgs(messages)]  # derived, stable
    assert {m.created_at for m in msgs} == {EPOCH}
    assert from_msgs(msgs) == messages
    assert msgs[1].metadata == {"model": "qwen"}


# -- Qwen → Msg: grouping ---------------------------------------------------------------------


def nous_response() -> list[Message]:
    """Qwen-Agent's output for reasoning, text and two calls (its nous tool-call format)."""
    return [
        Message("assistant", "", reasoning_content="I need two lookups.", extra={}),
        Message("assistant", [ContentItem(text="Let me check.\n")], extra={}),
        Message(
            "assistant",
            [],
            function_call=FunctionCall("get_weather", '{"city": "Paris"}'),
            extra={"function_id": "1"},
        ),
        Message(
            "assistant",
            [],
            function_call=FunctionCall("get_weather", '{"city": "Rome"}'),
            extra={"function_id": "2"},
        ),
    ]


def test_one_response_groups_into_one_assistant_msg_followed_by_its_results() -> None:
    messages = [
        Message("user", "weather in Paris and Rome?"),
        *nous_response(),
        Message("function", "18C", name="get_weather", extra={"function_id": "1"}),
        Message("function", "20C", name="get_weather", extra={"function_id": "2"}),
        Message("assistant", "Paris 18C, Rome 20C."),
    ]
    user, assistant, tool, answer = to_msgs(messages)
    assert assistant.content == [
        pm.ThinkingBlock(thinking="I need two lookups."),
        pm.TextBlock(text="Let me check.\n"),
        pm.ToolCallBlock(id="1", name="get_weather", input={"city": "Paris"}),
        pm.ToolCallBlock(id="2", name="get_weather", input={"city": "Rome"}),
    ]
    assert tool.content == [
        pm.ToolResultBlock(tool_call_id="1", name="get_weather", output="18C"),
        pm.ToolResultBlock(tool_call_id="2", name="get_weather", output="20C"),
    ]
    assert (user.text, answer.text) == ("weather in Paris and Rome?", "Paris 18C, Rome 20C.")
    qwen_round_trip(messages)


@pytest.mark.parametrize(
    ("parts", "groups"),
    [
        (["c", "c"], 2),  # two texts are two answers
        (["r", "c", "f", "f"], 1),
        (["c", "r"], 2),  # reasoning after text starts a new response
        (["f", "c"], 2),
        (["r", "f"], 1),
        (["f", "f", "f"], 1),
        (["r", "r"], 2),
    ],
)
def test_assistant_messages_group_while_they_keep_the_response_order(
    parts: list[str], groups: int
) -> None:
    messages = []
    for i, part in enumerate(parts):
        if part == "r":
            messages.append(Message("assistant", "", reasoning_content=f"r{i}"))
        elif part == "c":
            messages.append(Message("assistant", f"c{i}"))
        else:
            call = FunctionCall("f", "{}")
            messages.append(
                Message("assistant", "", function_call=call, extra={"function_id": f"{i}"})
            )
    assert len(to_msgs(messages)) == groups
    qwen_round_trip(messages)


def test_different_names_are_different_speakers() -> None:
    messages = [
        Message("assistant", "", reasoning_content="r", name="a"),
        Message("assistant", "text", name="b"),
    ]
    assert [m.name for m in to_msgs(messages)] == ["a", "b"]
    qwen_round_trip(messages)


def test_a_message_holding_several_parts_comes_back_as_one() -> None:
    merged = Message(
        "assistant",
        "I'll look.",
        reasoning_content="think",
        function_call=FunctionCall("f", '{"q": 1}'),
        extra={"function_id": "x"},
    )
    [msg] = to_msgs([merged])
    assert [b.type for b in msg.content] == ["thinking", "text", "tool_call"]
    qwen_round_trip([merged])


def test_consecutive_msgs_that_would_merge_are_kept_apart() -> None:
    # Two Msgs whose Qwen forms would read as one response: the record key marks the start.
    messages = [
        Message("assistant", "", reasoning_content="thinking"),
        Message("assistant", "answer", extra={"parley": {}}),
    ]
    msgs = to_msgs(messages)
    assert len(msgs) == 2
    assert from_msgs(msgs) == messages
    assert from_msgs(msgs[:1]) + from_msgs(msgs[1:]) != messages  # positions feed the ids
    split = [Msg.assistant(pm.ThinkingBlock(thinking="t")), Msg.assistant("a")]
    assert len(to_msgs(from_msgs(split))) == 2


# -- pairing calls and results ----------------------------------------------------------------


def test_calls_without_function_id_get_generated_ids_not_written_back() -> None:
    messages = [
        Message("user", "go"),
        Message("assistant", "", function_call=FunctionCall("a", "{}")),
        Message("assistant", "", function_call=FunctionCall("b", "{}")),
        Message("function", "B", name="b"),
        Message("function", "A", name="a"),
    ]
    _, assistant, tool = to_msgs(messages)
    ids = [call.id for call in assistant.tool_calls]
    assert ids == ["call_qwen_1", "call_qwen_2"]
    assert [(r.tool_call_id, r.output) for r in tool.tool_results] == [
        ("call_qwen_2", "B"),  # paired by name
        ("call_qwen_1", "A"),
    ]
    assert to_msgs(messages) == [*to_msgs(messages)]  # deterministic
    qwen_round_trip(messages)


def test_qwen_agents_default_function_id_pairs_with_a_call_that_had_none() -> None:
    # FnCallAgent answers a call without function_id with extra={"function_id": "1"}.
    messages = [
        Message("assistant", "", function_call=FunctionCall("f", "{}")),
        Message("function", "done", name="f", extra={"function_id": "1"}),
    ]
    assistant, tool = to_msgs(messages)
    assert tool.tool_results[0].tool_call_id == assistant.tool_calls[0].id
    qwen_round_trip(messages)


def test_a_result_without_a_name_is_refused_as_seed_001_says() -> None:
    with pytest.raises(ValidationError, match="function message must have a name"):
        to_msgs([{"role": "function", "content": "found"}])


def test_a_result_for_a_call_before_the_list_keeps_its_id() -> None:
    messages = [Message("function", "late", name="f", extra={"function_id": "call_9"})]
    [tool] = to_msgs(messages)
    assert tool.tool_results[0].tool_call_id == "call_9"
    qwen_round_trip(messages)


def test_repeated_function_ids_pair_with_the_latest_pending_call() -> None:
    # Qwen-Agent's nous ids restart at "1" in every response.
    turn = [
        Message("assistant", "", function_call=FunctionCall("f", "{}"), extra={"function_id": "1"}),
        Message("function", "r", name="f", extra={"function_id": "1"}),
    ]
    msgs = to_msgs([*turn, *turn])
    assert [m.role for m in msgs] == ["assistant", "tool", "assistant", "tool"]
    qwen_round_trip([*turn, *turn])


# -- Qwen forms that come back unchanged ------------------------------------------------------


def test_paths_audio_dicts_and_frame_lists_come_back_unchanged() -> None:
    items = [
        ContentItem(image="cat.png"),
        ContentItem(image="./pics/dog.jpg"),
        ContentItem(file="~/docs/report.pdf"),
        ContentItem(audio={"data": "speech.wav", "format": "wav"}),
        ContentItem(video=["frame1.jpg", "frame2.jpg"]),
        ContentItem(text="a", image=""),
    ]
    messages = [Message("user", items)]
    [msg] = to_msgs(messages)
    cwd = Path.cwd()
    image, dog, report, audio, video, text = msg.content
    assert image == pm.ImageBlock(source=pm.URLSource(url=(cwd / "cat.png").as_uri()))
    assert dog == pm.ImageBlock(source=pm.URLSource(url=(cwd / "pics/dog.jpg").as_uri()))
    home = Path(os.path.expanduser("~"))
    assert report == pm.FileBlock(source=pm.URLSource(url=(home / "docs/report.pdf").as_uri()))
    wav = pm.URLSource(url=(cwd / "speech.wav").as_uri(), media_type="audio/wav")
    assert audio == pm.AudioBlock(source=wav)
    frames = [pm.URLSource(url=(cwd / f"frame{i}.jpg").as_uri()) for i in (1, 2)]
    assert video == pm.VideoBlock.from_frames(frames)
    assert text == pm.TextBlock(text="a")
    qwen_round_trip(messages)


# The media forms of Qwen-Agent's schema: the block holds the media (every frame, the type a
# `format` names), the Qwen record the exact value.
MEDIA_FORMS = [
    pytest.param(
        {"audio": {"data": "https://x.test/a.mp3", "format": "mp3", "duration": 3.5}},
        pm.AudioBlock(source=pm.URLSource(url="https://x.test/a.mp3", media_type="audio/mp3")),
        id="audio dict, data and format",
    ),
    pytest.param(
        {"audio": {"url": "oss://bucket/a.wav", "duration": 2, "format": "wav"}},
        pm.AudioBlock(source=pm.URLSource(url="oss://bucket/a.wav", media_type="audio/wav")),
        id="audio dict, url (seed 001's form)",
    ),
    pytest.param(
        {"audio": {"data": PNG, "format": "wav"}},
        pm.AudioBlock(source=pm.Base64Source(media_type="audio/wav", data=PNG)),
        id="audio dict, bare base64 (OpenAI's input_audio)",
    ),
    pytest.param(
        {"audio": {"data": f"data:audio/flac;base64,{PNG}", "format": "wav"}},
        pm.AudioBlock(source=pm.Base64Source(media_type="audio/flac", data=PNG)),
        id="audio dict, data URL",
    ),
    pytest.param(
        {"audio": {"data": "https://x.test/a", "format": "not a subtype"}},
        pm.AudioBlock(source=pm.URLSource(url="https://x.test/a")),
        id="audio dict, a format that names no media type",
    ),
    pytest.param(
        {"audio": {"data": "https://x.test/a", "format": "wav²\n"}},
        pm.AudioBlock(source=pm.URLSource(url="https://x.test/a")),
        id="audio dict, a format with what no media type holds",
    ),
    pytest.param(
        {"video": [f"data:image/png;base64,{PNG}", "oss://b/f2.jpg", "https://x.test/f3.jpg"]},
        pm.VideoBlock.from_frames(
            [
                pm.Base64Source(media_type="image/png", data=PNG),
                pm.URLSource(url="oss://b/f2.jpg"),
                pm.URLSource(url="https://x.test/f3.jpg"),
            ]
        ),
        id="video frames",
    ),
    pytest.param(
        {
            "video": [
                {"url": "https://x.test/v720.mp4", "quality": "720p", "format": "mp4"},
                {"url": "https://x.test/v1080.mp4", "quality": "1080p", "format": "mp4"},
            ]
        },
        pm.VideoBlock(source=pm.URLSource(url="https://x.test/v720.mp4", media_type="video/mp4")),
        id="video sources (seed 001's form): the first",
    ),
    # Each kind of media at a storage location: the block holds the bare URL.
    *(
        pytest.param({kind: url}, block(source=pm.URLSource(url=url)), id=f"{kind} at oss://")
        for kind, block, url in [
            ("image", pm.ImageBlock, "oss://dashscope-instant/abc/2025/cat.png"),
            ("audio", pm.AudioBlock, "oss://bucket/a.wav"),
            ("video", pm.VideoBlock, "oss://bucket/v.mp4"),
            ("file", pm.FileBlock, "oss://bucket/doc.pdf"),
        ]
    ),
]


@pytest.mark.parametrize(("item", "block"), MEDIA_FORMS)
def test_qwens_media_forms_read_into_blocks_and_come_back_exactly(
    item: dict[str, Any], block: Any
) -> None:
    messages = [
        Message("user", [ContentItem(**item)]),
        Message("function", [ContentItem(**item)], name="f", extra={"function_id": "c"}),
    ]
    user, tool = to_msgs(messages)
    assert user.content == [block]
    assert tool.tool_results[0].output == [block]
    qwen_round_trip(messages)
    # The Msgs read survive Qwen and back too.
    msg_round_trip([user, tool])


def test_frames_and_storage_locations_are_written_as_qwen_agent_takes_them() -> None:
    video = pm.VideoBlock.from_frames(["oss://b/f1.jpg", f"data:image/png;base64,{PNG}"])
    image = pm.ImageBlock.from_url("oss://b/cat.png")
    [written] = msg_round_trip([Msg.user(video, image)])
    assert written.content == [
        ContentItem(video=["oss://b/f1.jpg", f"data:image/png;base64,{PNG}"]),
        ContentItem(image="oss://b/cat.png"),
    ]
    assert written.extra is not None
    assert set(written.extra) == {"parley"}


def test_data_urls_become_base64_sources() -> None:
    messages = [Message("user", [ContentItem(image=f"data:image/png;base64,{PNG}")])]
    [msg] = to_msgs(messages)
    assert msg.content == [pm.ImageBlock(source=pm.Base64Source(media_type="image/png", data=PNG))]
    assert msg.metadata == {}
    qwen_round_trip(messages)


def test_arguments_keep_their_exact_string() -> None:
    for arguments in ['{"city":"Paris"}', '{"city": "Par', "[1]", "", '{"a": 1}']:
        # As a model wrote them (not JSON for some): built as parley builds a model's calls.
        call = FunctionCall.partial("f", arguments)
        messages = [Message("assistant", "", function_call=call)]
        [msg] = to_msgs(messages)
        block = msg.tool_calls[0]
        canonical = arguments == '{"a": 1}'
        assert block.raw_input == (None if canonical else arguments)
        assert from_msgs(to_msgs(messages)) == messages
        if arguments.startswith(('{"city":"', "[", '{"a')):
            qwen_round_trip(messages)  # dicts too: valid JSON, as seed 001 asks of given calls
    assert to_msgs(messages)[0].tool_calls[0].input == {"a": 1}


def test_nous_layout_details_survive() -> None:
    messages = nous_response()
    [msg] = to_msgs(messages)
    assert "parley" in msg.metadata  # the [] contents and empty extras differ from canonical
    qwen_round_trip(messages)


# -- records that do not fit are kept as data -------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "garbage",
        {},
        {"id": 5},
        {"created_at": "1970-01-01T00:00:00+00:00"},  # what parley would not write
        {"blocks": [[7, {"text": "x"}]]},
        {"order": [1, 0]},
        {"order": [0]},
        {"metadata": {"parley": {"shape": ["c"]}}},
    ],
)
def test_a_qwen_extra_parley_value_that_is_not_parleys_record_comes_back(value: object) -> None:
    messages = [
        Message("user", [ContentItem(text="a"), ContentItem(text="b")], extra={"parley": value})
    ]
    qwen_round_trip(messages)


@pytest.mark.parametrize(
    "value",
    [
        "mine",
        {"shape": ["f"]},
        {"lists": [[0, "content"]]},
        {"fields": [[0, {"name": "x"}]]},
        {"items": [[0, "content", 0, {"image": "cat.png"}]]},
        {"items": [[3, "content", 0, {"text": "x"}]]},
        {"fields": [[0, {"extra": {"parley": {"id": "forged"}}}]]},
    ],
)
def test_a_msg_metadata_parley_value_that_does_not_fit_comes_back(value: object) -> None:
    msgs = [Msg.user("a", name="ann", metadata={"parley": value})]
    msg_round_trip(msgs)


def test_a_record_giving_metadata_parley_that_parley_would_follow_is_kept_as_data() -> None:
    # {"lists": ...} is a Qwen record parley would follow, so parley would never have put it
    # in a message record's metadata: the record is kept as data instead.
    forged = {"metadata": {"parley": {"lists": [[0, "content"]]}}}
    messages = [Message("user", "a", extra={"parley": forged})]
    [msg] = to_msgs(messages)
    assert msg.metadata["parley"] == {"fields": [[0, {"extra": {"parley": forged}}]]}
    qwen_round_trip(messages)


def test_a_qwen_record_that_would_merge_with_the_message_before_is_not_followed() -> None:
    thinking, answer = to_msgs(
        [
            Message("assistant", "", reasoning_content="thinking"),
            Message("assistant", "answer", extra={"parley": {}}),
        ]
    )
    # Dropping the first message's extra would make it continue the reasoning message.
    answer.metadata["parley"] = {"fields": [[0, {"extra": None}]]}
    msg_round_trip([thinking, answer])


def test_a_tool_call_input_that_is_not_json_raises_message_error() -> None:
    msg = Msg.assistant(pm.ToolCallBlock(id="c", name="f", input={"when": {1, 2}}))
    with pytest.raises(MessageError, match="cannot be written as JSON"):
        from_msgs([msg])


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        (
            [Message("user", [ContentItem(image="data:image/png;base64,@@@")])],
            "not valid base64",
        ),
        ([Message("user", [ContentItem(image="data:image/png,abc")])], "data: URL"),
        ([Message("user", [ContentItem(image="ftp://bucket/cat.png")])], "ftp://"),
        ([Message("function", "x", name="f")], "no earlier function_call"),
        (
            [Message("user", "x", function_call=FunctionCall("f", "{}"))],
            "user message cannot hold function_call",
        ),
        ([Message("system", "x", reasoning_content="r")], "cannot hold reasoning_content"),
        (
            [Message("assistant", "", reasoning_content=[ContentItem(image="https://x/i.png")])],
            "reasoning_content can only hold text",
        ),
        (
            [
                Message(
                    "assistant", "", function_call=FunctionCall("f", "{}"), extra={"function_id": 1}
                )
            ],
            "must be a string",
        ),
        ([Message("user", [ContentItem(audio={"format": "wav"})])], "'data' or 'url' string"),
        ([Message("user", [ContentItem(audio={"data": 3})])], "'data' or 'url' string"),
        ([Message("user", [ContentItem(video=[1, 2])])], "its frames .* or its sources"),
        ([Message("user", [ContentItem(video=["a.jpg", {"url": "b"}])])], "or its sources"),
        ([Message("user", [ContentItem(video=["a.jpg", ""])])], "non-empty strings"),
        ([Message("user", [ContentItem(video=[{"quality": "hd"}])])], "'data' or 'url'"),
        (
            [Message("user", [ContentItem(video=[f"data:video/mp4;base64,{PNG}"])])],
            "frames are images",
        ),
        ([Message("user", [ContentItem(video=["ftp://x/f.jpg"])])], "video frame 'ftp:"),
        ([Message("user", [ContentItem(image=f"data:audio/wav;base64,{PNG}")])], "image/"),
    ],
)
def test_bad_qwen_input_raises_a_message_error_naming_the_message(
    messages: list[Message], match: str
) -> None:
    with pytest.raises(MessageError, match=match) as info:
        to_msgs([Message("user", "first"), *messages])
    assert str(info.value).startswith("Qwen message 1 ")


@pytest.mark.parametrize("value", ["abc", 42, None, {"role": "user"}, [{"role": "tool"}]])
def test_what_is_not_a_list_of_qwen_messages_raises_validation_error(value: object) -> None:
    with pytest.raises(ValidationError):
        to_msgs(value)  # type: ignore[arg-type]


def test_from_msgs_rejects_what_is_not_a_msg() -> None:
    with pytest.raises(ValidationError):
        from_msgs([{"role": "function", "content": "x"}])  # type: ignore[list-item]


# -- dicts in, dicts out ----------------------------------------------------------------------


def test_as_dicts_like_follows_qwen_agent() -> None:
    assert as_dicts_like([{"role": "user", "content": "hi"}])
    assert not as_dicts_like([{"role": "user", "content": "hi"}, Message("user", "x")])
    assert not as_dicts_like([Message("user", "x")])
    assert not as_dicts_like([])


def test_dicts_and_models_mix_and_answer_in_kind() -> None:
    given: list[Any] = [{"role": "user", "content": "hi"}, Message("assistant", "hello")]
    msgs = to_msgs(given)
    assert [m.text for m in msgs] == ["hi", "hello"]
    dicts = [{"role": "user", "content": "hi"}]
    answer = from_msgs(to_msgs(dicts), as_dicts=as_dicts_like(dicts))
    assert answer == dicts
    assert isinstance(from_msgs(msgs, as_dicts=as_dicts_like(given))[0], Message)
