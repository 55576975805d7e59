"""The Chat Completions formatters: exact payloads for every kind of block."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from parley import Msg
from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from parley.providers.openai import OpenAIChatFormatter, OpenAIMultiAgentFormatter
from tests.providers._samples import (
    CALLS,
    CALLS_AS_CHAT_COMPLETIONS,
    DEBATE,
    PDF,
    PNG,
    TOOL_MEDIA,
    TOOL_SEQUENCE,
    WAV,
    images_three_ways,
)


def fmt(*msgs: Msg, **options: object) -> list[dict[str, object]]:
    return OpenAIChatFormatter(**options).format(list(msgs))  # type: ignore[arg-type]


def test_text_roles_and_names() -> None:
    assert fmt(
        Msg.system("Be brief."),
        Msg.user("Hi", "there", name="Ann Lee"),
        Msg.assistant("Hello!", name="bot"),
    ) == [
        {"role": "system", "content": "Be brief."},
        # Text-only content goes as a string; OpenAI's `name` takes [A-Za-z0-9_-] only.
        {"role": "user", "content": "Hi\nthere", "name": "Ann_Lee"},
        {"role": "assistant", "content": "Hello!", "name": "bot"},
    ]


def test_images_by_url_base64_and_local_file(tmp_path: Path) -> None:
    msg = images_three_ways(tmp_path)
    assert fmt(msg, image_detail="low") == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/cat.png", "detail": "low"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                },
            ],
        }
    ]


def test_audio_as_input_audio(tmp_path: Path) -> None:
    path = tmp_path / "hello.mp3"
    path.write_bytes(b"ID3 fake")
    msg = Msg.user(
        AudioBlock(source=Base64Source(media_type="audio/wav", data=WAV)),
        AudioBlock.from_path(path),
    )
    mp3 = base64.b64encode(b"ID3 fake").decode()
    assert fmt(msg)[0]["content"] == [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": mp3, "format": "mp3"}},
    ]


def test_remote_audio_is_refused_clearly() -> None:
    with pytest.raises(MessageError, match="inline, not by URL"):
        fmt(Msg.user(AudioBlock.from_url("https://example.com/a.wav")))


def test_files_inline_with_their_names(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(b"%PDF fake")
    msg = Msg.user(
        FileBlock(source=Base64Source(media_type="application/pdf", data=PDF), filename="a.pdf"),
        FileBlock.from_path(path),
    )
    assert fmt(msg)[0]["content"] == [
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
        },
        {
            "type": "file",
            "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "report.pdf"},
        },
    ]


def test_missing_local_file_is_a_message_error(tmp_path: Path) -> None:
    with pytest.raises(MessageError, match="cannot read"):
        fmt(Msg.user(ImageBlock.from_path(tmp_path / "gone.png")))


def test_video_by_url() -> None:
    msg = Msg.user(VideoBlock.from_url("https://example.com/v.mp4"))
    assert fmt(msg)[0]["content"] == [
        {"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}}
    ]


def test_system_media_is_refused() -> None:
    msg = Msg(role="system", content=[ImageBlock.from_url("https://example.com/a.png")])
    with pytest.raises(MessageError, match="only text in system"):
        fmt(msg)


def test_tool_calls_and_results() -> None:
    assert fmt(
        CALLS,
        Msg(
            role="tool",
            content=[
                {"type": "tool_result", "tool_call_id": "c1", "name": "weather", "output": "Sunny"},
                {
                    "type": "tool_result",
                    "tool_call_id": "c2",
                    "name": "time",
                    "output": [{"type": "text", "text": "12:00"}],
                    "is_error": True,
                },
            ],
        ),
    ) == [
        CALLS_AS_CHAT_COMPLETIONS,
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
    ]


def test_assistant_with_only_tool_calls_has_null_content() -> None:
    msg = Msg.assistant(ToolCallBlock(id="c1", name="f", input={}))
    assert fmt(msg)[0]["content"] is None


def test_tool_media_goes_in_a_user_message_after_the_tool_messages() -> None:
    out = fmt(*TOOL_MEDIA)
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "user", "user"]
    assert out[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Here it is.\n[1 media item(s) returned; attached in the next user message]",
    }
    assert out[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Media returned by `snap` (c1):"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }
    assert out[4] == {"role": "user", "content": "Thanks"}


def test_assistant_media_follows_in_a_user_message() -> None:
    image = ImageBlock.from_url("https://example.com/drawn.png")
    out = fmt(Msg.assistant("I drew this:", image))
    assert out == [
        {"role": "assistant", "content": "I drew this:"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Media from the assistant's previous turn:"},
                {"type": "image_url", "image_url": {"url": "https://example.com/drawn.png"}},
            ],
        },
    ]


def test_thinking_is_dropped_by_default() -> None:
    msg = Msg.assistant(ThinkingBlock(thinking="hmm"), "Answer")
    assert fmt(msg) == [{"role": "assistant", "content": "Answer"}]


def test_thinking_sent_back_as_reasoning_content() -> None:
    msgs = [
        Msg.assistant(ThinkingBlock(thinking="hmm"), "Answer"),
        Msg.assistant(ToolCallBlock(id="c1", name="f", input={})),
    ]
    out = fmt(*msgs, send_thinking=True)
    assert out[0] == {"role": "assistant", "content": "Answer", "reasoning_content": "hmm"}
    # A tool-calling turn carries the field even without thinking (DeepSeek refuses it else).
    assert out[1]["reasoning_content"] == ""


def test_multi_agent_formatter_folds_other_agents() -> None:
    out = OpenAIMultiAgentFormatter(self_name="bob").format(list(DEBATE))
    assert out == [
        {"role": "system", "content": "You are Bob."},
        {
            "role": "user",
            "content": "<history>\nhost: Debate!\nalice: Cats rule.\n</history>",
        },
        {"role": "assistant", "content": "Dogs rule.", "name": "bob"},
        {"role": "user", "content": "<history>\nalice: No, cats.\n</history>"},
    ]


def test_multi_agent_formatter_keeps_tool_sequences_native() -> None:
    out = OpenAIMultiAgentFormatter(self_name="bob").format(list(TOOL_SEQUENCE))
    assert [m["role"] for m in out] == ["user", "assistant", "tool"]
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}
