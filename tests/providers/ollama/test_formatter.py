"""The Ollama formatters: the exact `/api/chat` messages for every kind of block."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from parley.providers.ollama import OllamaChatFormatter, OllamaMultiAgentFormatter
from tests.providers._samples import DEBATE

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x01" * 8
PNG = base64.b64encode(PNG_BYTES).decode()
WAV_BYTES = b"RIFF\x24\x00\x00\x00WAVEfmt "
WAV = base64.b64encode(WAV_BYTES).decode()


def fmt(*msgs: Msg) -> list[dict[str, object]]:
    return OllamaChatFormatter().format(list(msgs))


def test_system_user_and_plain_assistant() -> None:
    assert fmt(
        Msg.system("Be brief."),
        Msg.user("Hi", name="ann"),
        Msg.assistant("Hello.", name="bot"),
        Msg.user("one", "two"),
    ) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},  # Ollama's messages have no names
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "one\ntwo"},
    ]


def test_images_and_audio_inline_as_base64(tmp_path: Path) -> None:
    picture = tmp_path / "cat.png"
    picture.write_bytes(PNG_BYTES)
    msg = Msg.user(
        "Look and listen.",
        ImageBlock.from_path(picture),
        ImageBlock.from_bytes(PNG_BYTES, "image/png"),
        AudioBlock.from_bytes(WAV_BYTES, "audio/wav"),
    )
    assert fmt(msg) == [{"role": "user", "content": "Look and listen.", "images": [PNG, PNG, WAV]}]


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (ImageBlock.from_url("https://example.com/cat.png"), "inline, not by URL"),
        (AudioBlock.from_bytes(b"OggS", "audio/ogg"), "WAV or MP3 only"),
        (VideoBlock.from_url("https://example.com/v.mp4"), "not video content"),
        (FileBlock.from_bytes(b"%PDF-1.4", "application/pdf"), "not file content"),
        (ImageBlock.from_url("file:///nowhere/missing.png"), "cannot read"),
    ],
)
def test_media_ollama_cannot_take_is_refused_clearly(block: object, error: str) -> None:
    with pytest.raises(MessageError, match=error):
        fmt(Msg.user("See.", block))


def test_assistant_with_thinking_and_tool_calls() -> None:
    msg = Msg(
        role="assistant",
        content=[
            ThinkingBlock(thinking="Weather first.", signature="ignored"),
            TextBlock(text="Let me check."),
            ToolCallBlock(id="call_1", name="weather", input={"city": "Paris"}),
            ToolCallBlock(id="call_2", name="time", input={}),
        ],
    )
    assert fmt(msg) == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "thinking": "Weather first.",
            "tool_calls": [
                {"id": "call_1", "function": {"name": "weather", "arguments": {"city": "Paris"}}},
                {"id": "call_2", "function": {"name": "time", "arguments": {}}},
            ],
        }
    ]
    quiet = OllamaChatFormatter(send_thinking=False).format([msg])
    assert "thinking" not in quiet[0]


def test_tool_results_one_message_each_with_name_and_id() -> None:
    results = Msg(
        role="tool",
        content=[
            ToolResultBlock(tool_call_id="call_1", name="weather", output="sunny"),
            ToolResultBlock(
                tool_call_id="call_2", name="time", output=[TextBlock(text="noon")], is_error=True
            ),
        ],
    )
    assert fmt(results) == [
        {"role": "tool", "content": "sunny", "tool_name": "weather", "tool_call_id": "call_1"},
        {"role": "tool", "content": "noon", "tool_name": "time", "tool_call_id": "call_2"},
    ]


def test_media_a_tool_returned_follow_the_tool_messages() -> None:
    results = Msg(
        role="tool",
        content=[
            ToolResultBlock(
                tool_call_id="c1",
                name="camera",
                output=[TextBlock(text="Took it."), ImageBlock.from_bytes(PNG_BYTES, "image/png")],
            ),
            ToolResultBlock(tool_call_id="c2", name="clock", output="noon"),
        ],
    )
    assert fmt(results, Msg.user("And?")) == [
        {
            "role": "tool",
            "content": "Took it.\n[1 media item(s) returned; attached in the next message]",
            "tool_name": "camera",
            "tool_call_id": "c1",
        },
        {"role": "tool", "content": "noon", "tool_name": "clock", "tool_call_id": "c2"},
        {"role": "user", "content": "Media returned by the tools above:", "images": [PNG]},
        {"role": "user", "content": "And?"},
    ]


def test_multi_agent_folds_the_others_and_keeps_its_own_turns() -> None:
    assert OllamaMultiAgentFormatter("bob").format(list(DEBATE)) == [
        {"role": "system", "content": "You are Bob."},
        {"role": "user", "content": "<history>\nhost: Debate!\nalice: Cats rule.\n</history>"},
        {"role": "assistant", "content": "Dogs rule."},
        {"role": "user", "content": "<history>\nalice: No, cats.\n</history>"},
    ]


def test_multi_agent_keeps_media_of_the_folded_turns() -> None:
    msgs = [Msg.user("Look:", ImageBlock.from_bytes(PNG_BYTES, "image/png"), name="ann")]
    assert OllamaMultiAgentFormatter("bob").format(msgs) == [
        {"role": "user", "content": "<history>\nann: Look:\n</history>", "images": [PNG]}
    ]
