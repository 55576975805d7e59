"""One piece of content both ways: `ContentItem` ↔ block, and function-call arguments.

Item → block is `parley.tools._qwen_content` (tools, below compat, turn a Qwen-style tool's
items into blocks with it too).
"""

from __future__ import annotations

import json
from typing import Any

from parley.compat.qwen.schema import ContentItem
from parley.errors import MessageError
from parley.messages import Source, TextBlock, ThinkingBlock, ToolCallBlock, URLSource, VideoBlock
from parley.tools._qwen_content import ContentBlock, block_from_content

__all__ = [
    "ContentBlock",
    "block_from_item",
    "call_arguments",
    "call_input",
    "item_from_block",
    "thinking_from_item",
]


def item_from_block(block: ContentBlock) -> ContentItem:
    """The `ContentItem` for a text or media block.

    Media become a URL or a `data:` URL; a video given by its frames, the list of its frames.
    """
    if isinstance(block, TextBlock):
        return ContentItem(text=block.text)
    if isinstance(block, VideoBlock) and block.frames is not None:
        return ContentItem(video=[_value(frame) for frame in block.frames])
    return ContentItem.model_validate({block.type: _value(block.source)})


def _value(source: Source) -> str:
    return source.url if isinstance(source, URLSource) else source.to_data_url()


def block_from_item(item: ContentItem) -> ContentBlock:
    """The block for a `ContentItem`.

    Raises:
        MessageError: A media value parley cannot point at (see `block_from_content`).
        ValidationError: A video frame that is no image.
    """
    return block_from_content(*item.get_type_and_value())


def thinking_from_item(item: ContentItem) -> ThinkingBlock:
    """The thinking block for an item of `reasoning_content`, which must be text."""
    if item.text is None:
        raise MessageError(
            f"reasoning_content can only hold text items, got a {item.type} item; "
            "parley keeps reasoning as text"
        )
    return ThinkingBlock(thinking=item.text)


def _dumps(value: Any) -> str:
    # Qwen-Agent writes arguments with json.dumps(..., ensure_ascii=False) and its default
    # separators, so that is the form read back without keeping the raw string.
    return json.dumps(value, ensure_ascii=False)


def call_arguments(block: ToolCallBlock) -> str:
    """The arguments string of a tool call: its raw input if kept, else its input as JSON."""
    if block.raw_input is not None:
        return block.raw_input
    try:
        return _dumps(block.input)
    except (TypeError, ValueError) as exc:
        raise MessageError(
            f"the input of tool call {block.id!r} cannot be written as JSON: {exc}"
        ) from exc


def call_input(arguments: str) -> tuple[dict[str, Any], str | None]:
    """The `(input, raw_input)` of a tool call read from an arguments string.

    The raw string is kept unless it is exactly what `call_arguments` would write for the
    parsed input: partial JSON, a JSON value that is not an object, other spacing.
    """
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}, arguments
    if not isinstance(parsed, dict):
        return {}, arguments
    try:
        same = _dumps(parsed) == arguments
    except (ValueError, RecursionError):  # NaN and friends round-trip differently
        same = False
    return parsed, None if same else arguments
