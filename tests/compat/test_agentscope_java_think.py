"""`<think>` text in AgentScope Java's content becomes a thinking block (seed 004)."""

from __future__ import annotations

from typing import Any

from parley.compat.agentscope import msg_from_agentscope, msg_to_agentscope
from parley.messages import TextBlock, ThinkingBlock, split_think


def java_doc(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "qwq",
        "role": "ASSISTANT",
        "content": list(blocks),
        "metadata": {},
        "id": "j1",
        "timestamp": "2024-01-15T10:30:00Z",
    }


def test_a_think_span_in_java_text_reads_as_a_thinking_block() -> None:
    text = "<think>Let me analyze this problem...</think>\n\nThe answer is 4."
    msg = msg_from_agentscope(java_doc({"type": "text", "text": text}), "java")
    assert msg.content == [
        ThinkingBlock(thinking="Let me analyze this problem..."),
        TextBlock(text="The answer is 4."),
    ]
    # Written back as it was read (the layout kept in the message's metadata).
    doc = java_doc({"type": "text", "text": text})
    assert msg_to_agentscope(msg, "java") == doc
    made = msg.model_copy(update={"metadata": {}})  # a message parley made: blocks as they are
    assert msg_to_agentscope(made, "java")["content"] == [
        {"type": "thinking", "thinking": "Let me analyze this problem..."},
        {"type": "text", "text": "The answer is 4."},
    ]


def test_text_without_tags_and_other_blocks_are_unchanged() -> None:
    msg = msg_from_agentscope(
        java_doc({"type": "thinking", "thinking": "t"}, {"type": "text", "text": "plain"}), "java"
    )
    assert msg.content == [ThinkingBlock(thinking="t"), TextBlock(text="plain")]


def test_split_think_handles_a_missing_opening_tag_and_an_unclosed_span() -> None:
    assert split_think("reasoning</think>answer") == [
        ThinkingBlock(thinking="reasoning"),
        TextBlock(text="answer"),
    ]
    assert split_think("a <think>cut off") == [
        TextBlock(text="a"),
        ThinkingBlock(thinking="cut off"),
    ]
    assert split_think("<think></think>only text") == [TextBlock(text="only text")]
    assert split_think("x<think>1</think>y<think>2</think>z") == [
        TextBlock(text="x"),
        ThinkingBlock(thinking="1"),
        TextBlock(text="y"),
        ThinkingBlock(thinking="2"),
        TextBlock(text="z"),
    ]
    assert split_think("no tags ") == [TextBlock(text="no tags ")]
