"""One piece of content both ways: `ContentItem` ↔ block, and function-call arguments."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
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
    Source,
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
# A format that names a media subtype (`wav`, `mp4`): what a media type's subtype may hold.
_FORMAT = re.compile(r"[\w.+-]+", re.ASCII).fullmatch
_BLOCKS: dict[str, type[ImageBlock | AudioBlock | VideoBlock | FileBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "file": FileBlock,
}


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
        MessageError: A media value parley cannot point at (see `_source_from_str`).
        ValidationError: A video frame that is no image.
    """
    kind, value = item.get_type_and_value()
    if kind == "text":
        assert isinstance(value, str)  # the schema types text as str
        return TextBlock(text=value)
    if isinstance(value, dict):
        return _BLOCKS[kind](source=_source_from_dict(kind, value))
    if isinstance(value, list):
        return _video_from_list(value)
    return _BLOCKS[kind](source=_source_from_str(kind, value))


def thinking_from_item(item: ContentItem) -> ThinkingBlock:
    """The thinking block for an item of `reasoning_content`, which must be text."""
    if item.text is None:
        raise MessageError(
            f"reasoning_content can only hold text items, got a {item.type} item; "
            "parley keeps reasoning as text"
        )
    return ThinkingBlock(thinking=item.text)


# Media given as dicts and lists keep their whole value beside the message (the Qwen record),
# so that it comes back unchanged; the block holds what a model needs: where the media is, and
# its type when the dict says it.


def _source_from_dict(kind: str, value: dict[Any, Any]) -> Source:
    """The source of an audio dict, or of one entry of a video's list of sources.

    The media is at `data` (Qwen-Agent's key, and OpenAI's `input_audio`) or `url` (the form
    of the Qwen-Agent notes, seed 001); a `format` such as `wav` gives the media type, and
    with it `data` may be bare base64 (OpenAI's `input_audio` form, Qwen-Omni's output).
    """
    key = "data" if "data" in value else "url"
    location = value.get(key)
    if not isinstance(location, str) or not location:
        raise MessageError(
            f"an {kind} dict needs its media as a 'data' or 'url' string (got keys {list(value)})"
        )
    fmt = value.get("format")
    media_type = f"{kind}/{fmt}" if isinstance(fmt, str) and _FORMAT(fmt) else None
    is_url = location.startswith("data:") or "://" in location
    if media_type is not None and key == "data" and not is_url and _is_base64(location):
        return Base64Source(media_type=media_type, data=location)
    source = _source_from_str(kind, location)
    if media_type is not None and isinstance(source, URLSource):
        source = URLSource(url=source.url, media_type=media_type)
    return source


def _is_base64(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _video_from_list(value: list[Any]) -> VideoBlock:
    """A video given as a list: its frames (strings), or its sources (dicts; the first is used)."""
    if all(isinstance(entry, str) and entry for entry in value):
        return VideoBlock.from_frames([_source_from_str("video frame", frame) for frame in value])
    if all(isinstance(entry, dict) for entry in value):
        return VideoBlock(source=_source_from_dict("video", value[0]))
    raise MessageError(
        "a video list holds its frames (non-empty strings) or its sources (dicts), "
        f"got {value!r:.80}"
    )


def _source_from_str(kind: str, value: str) -> Source:
    try:
        if value.startswith("data:") or "://" in value:
            return source_from_str(value)
    except ValidationError as exc:
        raise MessageError(
            f"{kind} {value[:80]!r} is not an http(s)://, file:// or storage (oss://, s3://, "
            f"gs://) URL, a base64 data: URL or a local path: {exc.errors()[0]['msg']}"
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
