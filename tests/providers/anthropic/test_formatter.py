"""The Anthropic formatters: exact Messages API payloads for every kind of block."""

from __future__ import annotations

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
    ToolResultBlock,
    VideoBlock,
)
from parley.providers.anthropic import AnthropicChatFormatter, AnthropicMultiAgentFormatter
from parley.providers.anthropic.formatter import split_system
from tests.providers._samples import PDF, PNG, images_three_ways


def fmt(*msgs: Msg, **options: Any) -> list[dict[str, Any]]:
    return AnthropicChatFormatter(**options).format(list(msgs))


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_roles_merge_and_the_system_prompt_comes_first() -> None:
    formatted = fmt(
        Msg.system("Be brief."),
        Msg.system("Answer in French."),
        Msg.user("Hi", name="Ann"),
        Msg.user("Still there?"),
        Msg.assistant("Bonjour", name="bot"),
        Msg.assistant("!"),
        Msg.user("Merci"),
    )
    assert formatted == [
        {"role": "system", "content": [text("Be brief."), text("Answer in French.")]},
        # Consecutive turns of one role make one; names are not sent (the API has none).
        {"role": "user", "content": [text("Hi"), text("Still there?")]},
        {"role": "assistant", "content": [text("Bonjour"), text("!")]},
        {"role": "user", "content": [text("Merci")]},
    ]
    system, messages = split_system(formatted)
    assert system == [text("Be brief."), text("Answer in French.")]
    assert messages == formatted[1:]


def test_a_later_system_message_goes_in_a_user_turn_or_in_place() -> None:
    msgs = [Msg.user("Hi"), Msg.assistant("Hello"), Msg.system("Now be terse."), Msg.user("Go")]
    assert fmt(*msgs)[2:] == [
        {"role": "user", "content": [text("<system>\nNow be terse.\n</system>"), text("Go")]}
    ]
    in_place = fmt(*msgs, mid_conversation_system=True)
    assert in_place[2:] == [
        {"role": "system", "content": [text("Now be terse.")]},
        {"role": "user", "content": [text("Go")]},
    ]
    # Only the leading system messages make the top-level `system`.
    assert split_system(in_place) == ([], in_place)


def test_tool_calls_and_results() -> None:
    call = ToolCallBlock(id="toolu_1", name="weather", input={"city": "Oslo"})
    broken = ToolCallBlock(id="toolu_2", name="weather", raw_input='{"city": "Rome"')
    formatted = fmt(
        Msg.user("Weather?"),
        Msg.assistant("Checking.", call, broken),
        Msg.tool_result("toolu_1", "-3 C", name="weather"),
        Msg.tool_result("toolu_2", "boom", name="weather", is_error=True),
        Msg.user("And tomorrow?"),
    )
    assert formatted == [
        {"role": "user", "content": [text("Weather?")]},
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                # Arguments that were not valid JSON go back repaired: the API takes an object.
                {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "boom",
                    "is_error": True,
                },
                # The user's text joins the same turn, after the results, as the API requires.
                text("And tomorrow?"),
            ],
        },
    ]


def test_a_tool_result_with_media(tmp_path: Path) -> None:
    output = [
        TextBlock(text="Here is the chart."),
        ImageBlock(source=Base64Source(media_type="image/png", data=PNG)),
        TextBlock(text=""),
    ]
    result = Msg.tool_result("toolu_1", output, name="plot")
    assert fmt(result) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        text("Here is the chart."),
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                    ],
                }
            ],
        }
    ]
    assert fmt(Msg.tool_result("toolu_1", "", name="plot"))[0]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1"}
    ]


def test_thinking_goes_back_with_its_signature_and_kept_blocks_unchanged() -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    msg = Msg.assistant(
        ThinkingBlock(thinking="Plan.", signature="sig-1"),
        ThinkingBlock(thinking="", extra={"anthropic_block": redacted}),
        ThinkingBlock(thinking="", extra={"anthropic_block": search}),
        # Another provider's reasoning: unsigned, refused by Claude, so dropped.
        ThinkingBlock(thinking="DeepSeek's reasoning", extra={"id": "rs_1"}),
        "Answer.",
    )
    assert fmt(Msg.user("Q"), msg)[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Plan.", "signature": "sig-1"},
            redacted,
            search,
            text("Answer."),
        ],
    }


def test_empty_content_is_dropped() -> None:
    formatted = fmt(
        Msg.user("Q"),
        Msg.assistant(ThinkingBlock(thinking="unsigned"), ""),
        Msg.user("Again"),
    )
    # The assistant turn had nothing Claude takes: the two user turns merge.
    assert formatted == [{"role": "user", "content": [text("Q"), text("Again")]}]


def test_images_by_url_base64_and_local_file(tmp_path: Path) -> None:
    msg = images_three_ways(tmp_path)
    png = {"type": "base64", "media_type": "image/png", "data": PNG}
    assert fmt(msg)[0]["content"] == [
        text("Look:"),
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "image", "source": png},
        {"type": "image", "source": png},
    ]


def test_documents_pdf_and_text(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF fake")
    notes = tmp_path / "notes.txt"
    notes.write_text("line one\nline two", encoding="utf-8")
    msg = Msg.user(
        FileBlock.from_path(pdf),
        FileBlock(source=Base64Source(media_type="application/pdf", data=PDF), filename="a.pdf"),
        FileBlock.from_url("https://example.com/paper.pdf"),
        FileBlock.from_path(notes),
    )
    pdf_source = {"type": "base64", "media_type": "application/pdf", "data": PDF}
    assert fmt(msg)[0]["content"] == [
        {"type": "document", "source": pdf_source},
        {"type": "document", "source": pdf_source, "title": "a.pdf"},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "line one\nline two"},
        },
    ]


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (AudioBlock(source=Base64Source(media_type="audio/wav", data=PNG)), "no audio input"),
        (VideoBlock.from_url("https://example.com/v.mp4"), "no video input"),
        (ImageBlock(source=Base64Source(media_type="image/bmp", data=PNG)), "not image/bmp"),
        (
            FileBlock(source=Base64Source(media_type="application/zip", data=PNG)),
            "PDF and plain-text documents, not application/zip",
        ),
        (FileBlock.from_url("https://example.com/a.docx", "application/msword"), "only as PDFs"),
        (ImageBlock.from_url("file:///no/such/file.png"), "cannot read"),
    ],
)
def test_media_claude_cannot_take_is_a_clear_error(block: Any, error: str) -> None:
    with pytest.raises(MessageError, match=error):
        fmt(Msg.user(block))


def test_media_in_an_assistant_or_system_turn_is_refused() -> None:
    image = ImageBlock.from_url("https://example.com/cat.png")
    with pytest.raises(MessageError, match="assistant turn"):
        fmt(Msg.user("Q"), Msg.assistant(image))
    with pytest.raises(MessageError, match="only text in system messages"):
        AnthropicChatFormatter().format([Msg(role="system", content=[image])])


def test_thinking_of_other_agents_is_not_sent_in_a_user_turn() -> None:
    msgs = [
        Msg.user("Tabs or spaces?", name="host"),
        Msg.assistant(ThinkingBlock(thinking="hmm", signature="s"), "Tabs.", name="alice"),
        Msg.assistant("Spaces.", name="bob"),
    ]
    formatted = AnthropicMultiAgentFormatter(self_name="bob").format(msgs)
    assert formatted == [
        {
            "role": "user",
            "content": [text("<history>\nhost: Tabs or spaces?\nalice: Tabs.\n</history>")],
        },
        {"role": "assistant", "content": [text("Spaces.")]},
    ]


def test_multi_agent_formatter_keeps_tool_sequences_native() -> None:
    call = ToolCallBlock(id="toolu_1", name="dice", input={})
    msgs = [
        Msg.system("You are Bob."),
        Msg.user("Roll.", name="host"),
        Msg.assistant(call, name="bob"),
        Msg.tool_result("toolu_1", "4", name="dice"),
        Msg.assistant("A four.", name="bob"),
        Msg.assistant("Nice.", name="alice"),
    ]
    assert AnthropicMultiAgentFormatter(self_name="bob").format(msgs) == [
        {"role": "system", "content": [text("You are Bob.")]},
        {"role": "user", "content": [text("<history>\nhost: Roll.\n</history>")]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "dice", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "4"}],
        },
        {"role": "assistant", "content": [text("A four.")]},
        {"role": "user", "content": [text("<history>\nalice: Nice.\n</history>")]},
    ]


# -- server tool calls a turn left without their results --------------------------------------


def _raw(block: dict[str, Any]) -> ThinkingBlock:
    return ThinkingBlock(thinking="", extra={"anthropic_block": block}, provider="anthropic")


SERVER_CALL = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}


def test_an_unanswered_server_call_is_sent_while_its_turn_is_last() -> None:
    # A paused turn sent back to be continued: as it came.
    paused = Msg(role="assistant", content=[TextBlock(text="Searching."), _raw(SERVER_CALL)])
    messages = AnthropicChatFormatter().format([Msg.user("Search."), paused])
    assert messages[-1]["content"][-1] == SERVER_CALL


def test_an_unanswered_server_call_is_dropped_once_a_message_follows() -> None:
    paused = Msg(role="assistant", content=[_raw(SERVER_CALL)])  # nothing else in the turn
    messages = AnthropicChatFormatter().format([Msg.user("Search."), paused, Msg.user("Stop.")])
    # The turn left empty goes, and the two user turns around it make one.
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Search."}, {"type": "text", "text": "Stop."}],
        }
    ]


def test_a_server_call_beside_a_client_call_waits_for_the_client_s_result() -> None:
    # The API runs the server tool once the client tool's result is sent (server tools guide).
    turn = Msg(
        role="assistant",
        content=[_raw(SERVER_CALL), ToolCallBlock(id="toolu_1", name="add", input={})],
    )
    result = Msg(
        role="tool", content=[ToolResultBlock(tool_call_id="toolu_1", name="add", output="3")]
    )
    messages = AnthropicChatFormatter().format([Msg.user("Go."), turn, result])
    assert messages[1]["content"][0] == SERVER_CALL
