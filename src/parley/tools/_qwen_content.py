"""Qwen-Agent's content items as blocks: what a Qwen-style tool's list of items becomes.

A Qwen-Agent tool may answer with a list of `ContentItem`s (text, an image, a file, audio or a
video). `parley.tools` sits below `parley.compat`, so it knows such an item by its shape, the
`get_type_and_value()` every Qwen `ContentItem` has (parley's `parley.compat.qwen` ones and
Qwen-Agent's own), and turns it into a block here. `parley.compat.qwen` reads its messages'
items with the same functions.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from pydantic import ValidationError

from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    Source,
    TextBlock,
    URLSource,
    VideoBlock,
    source_from_str,
)

__all__ = ["ContentBlock", "QwenContentItem", "block_from_content"]

ContentBlock = TextBlock | ImageBlock | AudioBlock | VideoBlock | FileBlock
"""The blocks a content item becomes: text or one medium."""

# A format that names a media subtype (`wav`, `mp4`): what a media type's subtype may hold.
_FORMAT = re.compile(r"[\w.+-]+", re.ASCII).fullmatch
_BLOCKS: dict[str, type[ImageBlock | AudioBlock | VideoBlock | FileBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "file": FileBlock,
}


@runtime_checkable
class QwenContentItem(Protocol):
    """A Qwen-Agent `ContentItem`: exactly one of text, image, file, audio or video."""

    def get_type_and_value(self) -> tuple[str, str | dict[Any, Any] | list[Any]]:
        """The field it holds and its value, e.g. `("image", "https://...")`."""
        ...


def block_from_content(kind: str, value: str | dict[Any, Any] | list[Any]) -> ContentBlock:
    """The block for a content item's `(kind, value)` (`ContentItem.get_type_and_value()`).

    Media strings are URLs (web, `file://`, storage such as `oss://`), `data:` URLs or local
    paths (relative to the working directory, as Qwen-Agent reads them); audio may be a dict
    (`{"data" or "url": ..., "format": "wav"}`), video a list of frames or of source dicts.

    Raises:
        MessageError: A media value parley cannot point at.
        ValidationError: A video frame that is no image.
    """
    if kind == "text":
        assert isinstance(value, str)  # the schema types text as str
        return TextBlock(text=value)
    if isinstance(value, dict):
        return _BLOCKS[kind](source=_source_from_dict(kind, value))
    if isinstance(value, list):
        return _video_from_list(value)
    return _BLOCKS[kind](source=_source_from_str(kind, value))


# Media given as dicts and lists keep their whole value beside the message (the Qwen record,
# in parley.compat.qwen), so that it comes back unchanged; the block holds what a model needs:
# where the media is, and its type when the dict says it.


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
