"""One piece of content both ways: `ContentItem` ↔ block, and function-call arguments."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from parley.compat.qwen.schema import ContentItem
from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    URLSource,
    VideoBlock,
    source_from_str,
)

__all__ = [
    "ContentBlock",
    "block_from_item",
    "call_arguments",
    "call_input",
    "item_from_block",
    "thinking_from_item",
]

ContentBlock = TextBlock | ImageBlock | AudioBlock | VideoBlock | FileBlock
_BLOCKS: dict[str, type[ImageBlock | AudioBlock | VideoBlock | FileBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "file": FileBlock,
}


def item_from_block(block: ContentBlock) -> ContentItem:
    """The `ContentItem` for a text or media block; media become a URL or a `data:` URL."""
    if isinstance(block, TextBlock):
        return ContentItem(text=block.text)
    source = block.source
    value = source.url if isinstance(source, URLSource) else source.to_data_url()
    return ContentItem.model_validate({block.type: value})


def block_from_item(item: ContentItem) -> ContentBlock:
    """The block for a `ContentItem`.

    Raises:
        MessageError: A media value parley cannot point at (see `_source`).
    """
    kind, value = item.get_type_and_value()
    if kind == "text":
        assert isinstance(value, str)  # the schema types text as str
        return TextBlock(text=value)
    return _BLOCKS[kind](source=_source(kind, value))


def thinking_from_item(item: ContentItem) -> ThinkingBlock:
    """The thinking block for an item of `reasoning_content`, which must be text."""
    if item.text is None:
        raise MessageError(
            f"reasoning_content can only hold text items, got a {item.type} item; "
            "parley keeps reasoning as text"
        )
    return ThinkingBlock(thinking=item.text)


def _source(kind: str, value: str | dict[Any, Any] | list[Any]) -> URLSource | Base64Source:
    # Qwen-Agent's audio dicts ({"data": ..., "format": ...}) and video frame lists have no
    # parley equivalent: the block points at the data, or at the first frame, and the whole
    # value travels beside the message so that it comes back unchanged.
    if isinstance(value, dict):
        data = value.get("data")
        if not isinstance(data, str) or not data:
            raise MessageError(f"an {kind} dict needs a 'data' string (got keys {list(value)})")
        return _source_from_str(kind, data)
    if isinstance(value, list):
        first = value[0]
        if not isinstance(first, str) or not first:
            raise MessageError(f"a {kind} frame list must hold strings, got {first!r:.80}")
        if first.startswith("data:"):
            # The block would claim an image's data is a video.
            raise MessageError(
                f"a {kind} frame list can be converted when its first frame is a URL or a "
                "path; parley's VideoBlock cannot point at an inline image"
            )
        return _source_from_str(kind, first)
    return _source_from_str(kind, value)


def _source_from_str(kind: str, value: str) -> URLSource | Base64Source:
    try:
        if value.startswith("data:") or "://" in value:
            return source_from_str(value)
    except ValidationError as exc:
        raise MessageError(
            f"{kind} {value[:80]!r} is not an http(s):// or file:// URL, a base64 data: URL "
            f"or a local path: {exc.errors()[0]['msg']}"
        ) from None
    # Qwen-Agent reads a plain string as a local path, relative to the working directory.
    return URLSource(url=_file_url(value))


def _file_url(path: str) -> str:
    # A "~user" that cannot be looked up (a NUL in it, say) stays as it is.
    with contextlib.suppress(ValueError, KeyError):
        path = os.path.expanduser(path)
    return "file://" + quote(os.path.abspath(path), safe="/", errors="surrogatepass")


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
