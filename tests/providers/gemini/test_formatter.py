"""The Gemini formatters: exact `contents` for every kind of block, signatures, folding."""

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
    VideoBlock,
    new_call_id,
)
from parley.providers.gemini import GeminiChatFormatter, GeminiMultiAgentFormatter
from parley.providers.gemini.formatter import PART_SIGNATURE, split_system
from tests.providers._samples import DEBATE, PDF, PNG, TOOL_MEDIA, TOOL_SEQUENCE


def fmt(*msgs: Msg) -> list[dict[str, Any]]:
    return GeminiChatFormatter().format(list(msgs))


def test_roles_and_the_system_instruction() -> None:
    contents = fmt(
        Msg.system("Be brief."),
        Msg.user("Hi", "there", name="Ann Lee"),
        Msg.assistant("Hello!", name="bot"),
    )
    assert contents == [
        {"role": "system", "parts": [{"text": "Be brief."}]},
        # Gemini's parts have no name: names are not sent.
        {"role": "user", "parts": [{"text": "Hi"}, {"text": "there"}]},
        {"role": "model", "parts": [{"text": "Hello!"}]},
    ]
    assert split_system(contents) == (
        {"parts": [{"text": "Be brief."}]},
        [contents[1], contents[2]],
    )


def test_every_system_message_joins_the_instruction() -> None:
    system, rest = split_system(fmt(Msg.system("One."), Msg.user("Hi"), Msg.system("Two.")))
    assert system == {"parts": [{"text": "One."}, {"text": "Two."}]}
    assert rest == [{"role": "user", "parts": [{"text": "Hi"}]}]


def test_media_inline_and_by_uri(tmp_path: Path) -> None:
    path = tmp_path / "cat.png"
    path.write_bytes(b"\x89PNG fake")
    msg = Msg.user(
        "Look:",
        ImageBlock(source=Base64Source(media_type="image/png", data=PNG)),
        ImageBlock.from_path(path),
        ImageBlock.from_url("https://example.com/cat.jpg"),
        VideoBlock.from_url("https://www.youtube.com/watch?v=abc"),
        AudioBlock.from_url(
            "https://generativelanguage.googleapis.com/v1beta/files/a1", "audio/mpeg"
        ),
        FileBlock(source=Base64Source(media_type="application/pdf", data=PDF), filename="a.pdf"),
    )
    assert fmt(msg)[0]["parts"] == [
        {"text": "Look:"},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"fileData": {"fileUri": "https://example.com/cat.jpg", "mimeType": "image/jpeg"}},
        # YouTube links take no MIME type.
        {"fileData": {"fileUri": "https://www.youtube.com/watch?v=abc"}},
        {
            "fileData": {
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/a1",
                "mimeType": "audio/mpeg",
            }
        },
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
    ]


def test_missing_local_file_is_a_message_error(tmp_path: Path) -> None:
    with pytest.raises(MessageError, match="cannot read"):
        fmt(Msg.user(ImageBlock.from_path(tmp_path / "gone.png")))


def test_system_media_is_refused() -> None:
    msg = Msg(role="system", content=[ImageBlock.from_url("https://example.com/a.png")])
    with pytest.raises(MessageError, match="only text in system"):
        fmt(msg)


def test_function_calls_and_responses() -> None:
    call_raw = ToolCallBlock(id="c1", name="weather", input={}, raw_input='{"city":"Rome"}')
    call_dict = ToolCallBlock(id="c2", name="time", input={"tz": "CET"})
    broken = ToolCallBlock(id="c3", name="f", input={}, raw_input='{"a": ')
    contents = fmt(
        Msg.assistant("Checking.", call_raw, call_dict, broken),
        Msg.tool_result("c1", "Sunny", name="weather"),
        Msg.tool_result("c2", [TextBlock(text="12:00")], name="time"),
        Msg.tool_result("c3", "bad arguments", name="f", is_error=True),
    )
    assert contents == [
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Rome"}}},
                {"functionCall": {"id": "c2", "name": "time", "args": {"tz": "CET"}}},
                # Arguments that never parsed go back as written, for the model to see.
                {"functionCall": {"id": "c3", "name": "f", "args": {"raw_arguments": '{"a": '}}},
            ],
        },
        {
            # All responses to one step in one content.
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "c1",
                        "name": "weather",
                        "response": {"output": "Sunny"},
                    }
                },
                {"functionResponse": {"id": "c2", "name": "time", "response": {"output": "12:00"}}},
                {
                    "functionResponse": {
                        "id": "c3",
                        "name": "f",
                        "response": {"error": "bad arguments"},
                    }
                },
            ],
        },
    ]


def test_ids_parley_made_are_not_sent() -> None:
    made = new_call_id()
    contents = fmt(
        Msg.assistant(ToolCallBlock(id=made, name="f"), ToolCallBlock(id="fc_1", name="g")),
        Msg.tool_result(made, "x", name="f"),
        Msg.tool_result("fc_1", "y", name="g"),
    )
    # The API gave `fc_1`; it gave the first call none, and parley's own id stays home.
    assert contents == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "f", "args": {}}},
                {"functionCall": {"id": "fc_1", "name": "g", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "f", "response": {"output": "x"}}},
                {"functionResponse": {"id": "fc_1", "name": "g", "response": {"output": "y"}}},
            ],
        },
    ]


def test_tool_media_follows_the_responses() -> None:
    contents = fmt(*TOOL_MEDIA)
    assert contents[1] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "c1",
                    "name": "snap",
                    "response": {"output": "Here it is."},
                }
            },
            {"functionResponse": {"id": "c2", "name": "f", "response": {"output": "done"}}},
            {"text": "Media returned by `snap` (c1):"},
            {"inlineData": {"mimeType": "image/png", "data": PNG}},
            {"text": "Thanks"},
        ],
    }
    assert len(contents) == 2


def test_thought_parts_and_signatures_go_back_on_their_parts() -> None:
    msg = Msg.assistant(
        ThinkingBlock(thinking="Plan.", signature="sig-thought"),
        TextBlock(text="Let me check. "),
        ThinkingBlock(thinking="", extra={PART_SIGNATURE: "sig-text"}),
        TextBlock(text="One moment."),
        ThinkingBlock(thinking="", extra={PART_SIGNATURE: "sig-call"}),
        ToolCallBlock(id="c1", name="weather", input={"city": "Oslo"}),
        ToolCallBlock(id="c2", name="time"),
    )
    assert fmt(msg)[0]["parts"] == [
        {"text": "Plan.", "thought": True, "thoughtSignature": "sig-thought"},
        {"text": "Let me check. "},
        {"text": "One moment.", "thoughtSignature": "sig-text"},
        {
            "functionCall": {"id": "c1", "name": "weather", "args": {"city": "Oslo"}},
            "thoughtSignature": "sig-call",
        },
        {"functionCall": {"id": "c2", "name": "time", "args": {}}},
    ]


def test_a_thought_run_merged_with_a_part_signature_splits_again() -> None:
    # A streamed thought run followed by a signed call: the accumulator joins the run and the
    # call's signature into one thinking block; the formatter takes them apart.
    msg = Msg.assistant(
        ThinkingBlock(thinking="Hmm.", extra={PART_SIGNATURE: "sig-call"}),
        ToolCallBlock(id="c1", name="f"),
    )
    assert fmt(msg)[0]["parts"] == [
        {"text": "Hmm.", "thought": True},
        {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": "sig-call"},
    ]


def test_a_trailing_signature_goes_back_on_an_empty_text_part() -> None:
    msg = Msg.assistant("Done.", ThinkingBlock(thinking="", extra={PART_SIGNATURE: "end"}))
    assert fmt(msg)[0]["parts"] == [{"text": "Done."}, {"text": "", "thoughtSignature": "end"}]


def test_a_signature_only_thought_part() -> None:
    msg = Msg.assistant(ThinkingBlock(thinking="", signature="sig"), "Answer")
    assert fmt(msg)[0]["parts"] == [
        {"text": "", "thought": True, "thoughtSignature": "sig"},
        {"text": "Answer"},
    ]


def test_missing_signatures_can_be_filled_for_gemini_3() -> None:
    msgs = [
        Msg.assistant(ToolCallBlock(id="c1", name="f"), ToolCallBlock(id="c2", name="g")),
        Msg.tool_result("c1", "x", name="f"),
        Msg.tool_result("c2", "y", name="g"),
        Msg.assistant(
            ThinkingBlock(thinking="", extra={PART_SIGNATURE: "real"}),
            ToolCallBlock(id="c3", name="f"),
        ),
    ]
    assert fmt(*msgs)[0]["parts"][0] == {"functionCall": {"id": "c1", "name": "f", "args": {}}}
    filled = GeminiChatFormatter(fill_missing_signatures=True).format(msgs)
    first, second = filled[0]["parts"]
    assert first["thoughtSignature"] == "skip_thought_signature_validator"
    assert "thoughtSignature" not in second  # only the first call of a step needs one
    assert filled[2]["parts"][0]["thoughtSignature"] == "real"  # real ones are kept


def test_multi_agent_formatter_folds_other_agents() -> None:
    assert GeminiMultiAgentFormatter(self_name="bob").format(list(DEBATE)) == [
        {"role": "system", "parts": [{"text": "You are Bob."}]},
        {
            "role": "user",
            "parts": [{"text": "<history>\nhost: Debate!\nalice: Cats rule.\n</history>"}],
        },
        {"role": "model", "parts": [{"text": "Dogs rule."}]},
        {"role": "user", "parts": [{"text": "<history>\nalice: No, cats.\n</history>"}]},
    ]


def test_multi_agent_formatter_keeps_tool_sequences_native() -> None:
    out = GeminiMultiAgentFormatter(self_name="bob").format(list(TOOL_SEQUENCE))
    assert [c["role"] for c in out] == ["user", "model", "user"]
    assert out[2]["parts"] == [
        {"functionResponse": {"id": "c1", "name": "weather", "response": {"output": "Sunny"}}}
    ]
