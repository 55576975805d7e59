"""A `Msg` written as Qwen messages, in a given layout, before parley's record is added."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from parley.compat.qwen._groups import FID, generated_call_id
from parley.compat.qwen._media import ContentBlock, call_arguments, item_from_block
from parley.compat.qwen._parse import ListField, is_str_form
from parley.compat.qwen.schema import (
    ASSISTANT,
    FUNCTION,
    ContentItem,
    FunctionCall,
    Message,
)
from parley.errors import MessageError
from parley.messages import Msg, ThinkingBlock, ToolCallBlock, ToolResultBlock

__all__ = ["Rendered", "canonical_shape", "render", "split_assistant"]

Lists = set[tuple[int, ListField]]
_PARTS = frozenset({"r", "c", "f", "rc", "rf", "cf", "rcf"})


@dataclass
class Rendered:
    """The Qwen messages of one `Msg`, and the order of its blocks in them.

    `order` holds the `Msg` block index of each block as the messages list them (thinking,
    then text and media, then calls).
    """

    messages: list[Message]
    order: list[int]


def split_assistant(
    msg: Msg,
) -> tuple[list[ThinkingBlock], list[ContentBlock], list[ToolCallBlock], list[int]]:
    """An assistant message's thinking, content and call blocks, and their original indexes."""
    thinking: list[tuple[int, ThinkingBlock]] = []
    content: list[tuple[int, ContentBlock]] = []
    calls: list[tuple[int, ToolCallBlock]] = []
    for index, block in enumerate(msg.content):
        if isinstance(block, ThinkingBlock):
            thinking.append((index, block))
        elif isinstance(block, ToolCallBlock):
            calls.append((index, block))
        elif not isinstance(block, ToolResultBlock):  # excluded by the role rules
            content.append((index, block))
    order = [i for i, _ in thinking] + [i for i, _ in content] + [i for i, _ in calls]
    return [b for _, b in thinking], [b for _, b in content], [b for _, b in calls], order


def canonical_shape(msg: Msg) -> list[str]:
    """The layout parley writes: reasoning, text and media, then one message per call."""
    if msg.role == "tool":
        return ["c"] * len(msg.content)
    if msg.role != "assistant":
        return ["c"]
    thinking, content, calls, _ = split_assistant(msg)
    shape = ["r"] if thinking else []
    if content or not (thinking or calls):
        shape.append("c")
    return shape + ["f"] * len(calls)


def render(
    msg: Msg, index: int, metadata: dict[str, Any], shape: list[str] | None, lists: Lists
) -> Rendered:
    """Write `msg` as Qwen messages starting at `index` in the list.

    `metadata` goes to every message's `extra`; `shape` (each message's parts) and `lists`
    (fields to write as lists) override the canonical layout.

    Raises:
        MessageError: The layout does not fit the message.
    """
    if shape is not None and msg.role != "assistant" and shape != canonical_shape(msg):
        raise MessageError(f"a {msg.role} message is written as {canonical_shape(msg)}")
    if msg.role == "tool":
        results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
        return Rendered([_result(b, metadata) for b in results], list(range(len(results))))
    if msg.role == "assistant":
        return _assistant(msg, index, metadata, shape or canonical_shape(msg), lists)
    content = _content([b for b in msg.content if not isinstance(b, ToolResultBlock)], 0, lists)
    message = Message(msg.role, content, name=msg.name, extra=dict(metadata) or None)
    return Rendered([message], list(range(len(msg.content))))


def _check_shape(shape: list[str], thinking: int, content: int, calls: int) -> None:
    holding = {part: sum(part in held for held in shape) for part in "rcf"}
    if (
        not all(held in _PARTS for held in shape)
        or holding["r"] > 1
        or holding["c"] > 1
        or holding["f"] != calls
        or (thinking and not holding["r"])
        or (content and not holding["c"])
    ):
        raise MessageError(f"layout {shape} does not fit {thinking}/{content}/{calls} blocks")


def _assistant(
    msg: Msg, index: int, metadata: dict[str, Any], shape: list[str], lists: Lists
) -> Rendered:
    thinking, content, calls, order = split_assistant(msg)
    _check_shape(shape, len(thinking), len(content), len(calls))
    pending = iter(calls)
    messages = []
    for i, held in enumerate(shape):
        extra = dict(metadata)
        call = None
        if "f" in held:
            block = next(pending)
            # As the model wrote it (maybe malformed): checked as parley's block was.
            call = FunctionCall.partial(block.name, call_arguments(block))
            if block.id != generated_call_id(index + i):
                extra = {FID: block.id, **metadata}
        reasoning = _reasoning(thinking, i, lists) if "r" in held else None
        text = _content(content if "c" in held else [], i, lists)
        messages.append(Message(ASSISTANT, text, reasoning, msg.name, call, extra or None))
    return Rendered(messages, order)


def _content(blocks: list[Any], index: int, lists: Lists) -> str | list[ContentItem]:
    if (index, "content") not in lists and is_str_form(blocks, "content"):
        return blocks[0].text if blocks else ""
    return [item_from_block(block) for block in blocks]


def _reasoning(blocks: list[ThinkingBlock], index: int, lists: Lists) -> str | list[ContentItem]:
    if (index, "reasoning_content") not in lists and is_str_form(blocks, "reasoning_content"):
        return blocks[0].thinking
    return [ContentItem(text=block.thinking) for block in blocks]


def _result(block: ToolResultBlock, metadata: dict[str, Any]) -> Message:
    output = block.output
    content = output if isinstance(output, str) else [item_from_block(b) for b in output]
    return Message(FUNCTION, content, name=block.name, extra={FID: block.tool_call_id, **metadata})
