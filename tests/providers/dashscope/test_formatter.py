"""The DashScope formatters: exact native payloads for every kind of block, on both endpoints."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from parley import Msg
from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from parley.providers.dashscope import DashScopeChatFormatter, DashScopeMultiAgentFormatter
from tests.providers._samples import (
    CALLS,
    CALLS_AS_CHAT_COMPLETIONS,
    PNG,
    TOOL_MEDIA,
    WAV,
    images_three_ways,
)


def text(*msgs: Msg, **options: Any) -> list[dict[str, Any]]:
    return DashScopeChatFormatter(**options).format(list(msgs))


def multimodal(*msgs: Msg, **options: Any) -> list[dict[str, Any]]:
    return DashScopeChatFormatter(multimodal=True, **options).format(list(msgs))


# -- text generation --------------------------------------------------------------------------


def test_text_roles_as_strings() -> None:
    assert text(
        Msg.system("Be brief."),
        Msg.user("Hi", "there", name="Ann"),
        Msg.assistant("Hello!", name="bot"),
    ) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi\nthere"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_tool_calls_and_results() -> None:
    assert text(
        CALLS,
        Msg.tool_result("c1", "Sunny", name="weather"),
        Msg.tool_result("c2", [TextBlock(text="12:00")], name="time", is_error=True),
    ) == [
        CALLS_AS_CHAT_COMPLETIONS,
        {"role": "tool", "content": "Sunny", "tool_call_id": "c1", "name": "weather"},
        {"role": "tool", "content": "12:00", "tool_call_id": "c2", "name": "time"},
    ]


def test_an_assistant_with_only_tool_calls_has_empty_content() -> None:
    msg = Msg.assistant(ToolCallBlock(id="c1", name="f", input={}))
    assert text(msg)[0]["content"] == ""


def test_thinking_is_dropped_unless_asked_for() -> None:
    msg = Msg.assistant(ThinkingBlock(thinking="plan"), "Answer.")
    assert text(msg) == [{"role": "assistant", "content": "Answer."}]
    assert text(msg, send_thinking=True) == [
        {"role": "assistant", "content": "Answer.", "reasoning_content": "plan"}
    ]


def test_continue_final_marks_a_trailing_assistant_text_partial() -> None:
    msgs = (Msg.user("Count"), Msg.assistant("1, 2,"))
    assert text(*msgs)[-1] == {"role": "assistant", "content": "1, 2,"}  # not by default
    assert text(*msgs, continue_final=True)[-1] == {
        "role": "assistant",
        "content": "1, 2,",
        "partial": True,
    }
    # Only the last message, and not a turn of tool calls (those wait for results).
    assert "partial" not in text(Msg.assistant("a"), Msg.user("b"), continue_final=True)[0]
    call = Msg.assistant(ToolCallBlock(id="c1", name="f", input={}))
    assert "partial" not in text(call, continue_final=True)[0]
    # It survives the switch to the multimodal endpoint.
    formatter = DashScopeChatFormatter(continue_final=True)
    switched = formatter.for_endpoint(multimodal=True, inline_local_files=True)
    assert switched.format(list(msgs))[-1]["partial"] is True


@pytest.mark.parametrize(
    "block",
    [
        ImageBlock.from_url("https://example.com/a.png"),
        AudioBlock.from_url("https://example.com/a.wav"),
        VideoBlock.from_url("https://example.com/a.mp4"),
    ],
)
def test_media_needs_the_multimodal_endpoint(block: Any) -> None:
    with pytest.raises(MessageError, match="multimodal endpoint"):
        text(Msg.user("Look", block))


def test_text_documents_are_sent_as_text(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\nBuy milk.")
    inline = FileBlock(
        source=Base64Source(
            media_type="application/json", data=base64.b64encode(b'{"a": 1}').decode()
        ),
        filename="data.json",
    )
    assert text(Msg.user("Read these.", FileBlock.from_path(path), inline)) == [
        {
            "role": "user",
            "content": "Read these.\n[file: notes.md]\n# Notes\nBuy milk.\n"
            '[file: data.json]\n{"a": 1}',
        }
    ]


def test_other_documents_are_refused_clearly() -> None:
    pdf = FileBlock(source=Base64Source(media_type="application/pdf", data=PNG), filename="a.pdf")
    with pytest.raises(MessageError, match="take no application/pdf files"):
        text(Msg.user(pdf))


def test_system_media_is_refused() -> None:
    msg = Msg(role="system", content=[ImageBlock.from_url("https://example.com/a.png")])
    with pytest.raises(MessageError, match="only text in system"):
        multimodal(msg)


# -- multimodal generation ----------------------------------------------------------------------


def test_multimodal_content_is_a_list_of_parts(tmp_path: Path) -> None:
    assert multimodal(
        Msg.system("Describe."),
        images_three_ways(tmp_path),
        Msg.assistant("A cat."),
    ) == [
        {"role": "system", "content": [{"text": "Describe."}]},
        {
            "role": "user",
            "content": [
                {"text": "Look:"},
                {"image": "https://example.com/cat.png"},
                {"image": f"data:image/png;base64,{PNG}"},
                {"image": f"data:image/png;base64,{PNG}"},
            ],
        },
        {"role": "assistant", "content": "A cat."},
    ]


def test_audio_and_video(tmp_path: Path) -> None:
    path = tmp_path / "hello.mp3"
    path.write_bytes(b"ID3 fake")
    mp3 = base64.b64encode(b"ID3 fake").decode()
    msg = Msg.user(
        AudioBlock(source=Base64Source(media_type="audio/wav", data=WAV)),
        AudioBlock.from_path(path),
        AudioBlock.from_url("https://example.com/a.wav"),
        VideoBlock.from_url("https://example.com/v.mp4"),
    )
    assert multimodal(msg)[0]["content"] == [
        {"audio": f"data:audio/wav;base64,{WAV}"},
        {"audio": f"data:audio/mpeg;base64,{mp3}"},
        {"audio": "https://example.com/a.wav"},
        {"video": "https://example.com/v.mp4"},
    ]


def test_local_files_stay_file_urls_for_the_sdk_to_upload(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"fake video")
    msg = Msg.user(VideoBlock.from_path(path))
    assert multimodal(msg, inline_local_files=False)[0]["content"] == [{"video": path.as_uri()}]


def test_missing_local_file_is_a_message_error(tmp_path: Path) -> None:
    with pytest.raises(MessageError, match="cannot read"):
        multimodal(Msg.user(ImageBlock.from_path(tmp_path / "gone.png")))


def test_tool_media_goes_in_a_user_message_after_the_tool_messages() -> None:
    out = multimodal(*TOOL_MEDIA)
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "user", "user"]
    assert out[1] == {
        "role": "tool",
        "content": "Here it is.\n[1 media item(s) returned; attached in the next user message]",
        "tool_call_id": "c1",
        "name": "snap",
    }
    assert out[3] == {
        "role": "user",
        "content": [
            {"text": "Media returned by `snap` (c1):"},
            {"image": f"data:image/png;base64,{PNG}"},
        ],
    }
    assert out[4] == {"role": "user", "content": [{"text": "Thanks"}]}


def test_media_the_assistant_made_goes_in_a_user_message() -> None:
    image = ImageBlock(source=Base64Source(media_type="image/png", data=PNG))
    out = multimodal(Msg.assistant("Drawn:", image), Msg.user("Nice"))
    assert out == [
        {"role": "assistant", "content": "Drawn:"},
        {
            "role": "user",
            "content": [
                {"text": "Media from the assistant's previous turn:"},
                {"image": f"data:image/png;base64,{PNG}"},
            ],
        },
        {"role": "user", "content": [{"text": "Nice"}]},
    ]


# -- several agents -----------------------------------------------------------------------------


def test_multi_agent_formatter_folds_other_agents() -> None:
    msgs = [
        Msg.system("You are Bob."),
        Msg.user("Tabs or spaces?"),
        Msg.assistant("Tabs.", name="alice"),
        Msg.assistant("Spaces.", name="bob"),
        Msg.assistant("Both.", name="carol"),
    ]
    assert DashScopeMultiAgentFormatter(self_name="bob").format(msgs) == [
        {"role": "system", "content": "You are Bob."},
        {"role": "user", "content": "<history>\nuser: Tabs or spaces?\nalice: Tabs.\n</history>"},
        {"role": "assistant", "content": "Spaces."},
        {"role": "user", "content": "<history>\ncarol: Both.\n</history>"},
    ]


def test_multi_agent_formatter_keeps_media_and_follows_the_endpoint() -> None:
    image = ImageBlock.from_url("https://example.com/a.png")
    msgs = [Msg.user("See", image, name="ann"), Msg.assistant("Seen.", name="bob")]
    formatter = DashScopeMultiAgentFormatter(self_name="bob").for_endpoint(
        multimodal=True, inline_local_files=True
    )
    assert formatter.format(msgs) == [
        {
            "role": "user",
            "content": [
                {"text": "<history>\nann: See\n</history>"},
                {"image": "https://example.com/a.png"},
            ],
        },
        {"role": "assistant", "content": "Seen."},
    ]
