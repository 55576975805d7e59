"""Media blocks as Gemini parts: `inlineData` for bytes, `fileData` for URLs.

Gemini takes media inline as base64 (`inlineData`, up to the request size limit) or by URI
(`fileData`): a Files API URI, a YouTube URL, a public `http(s)` URL on current models, or
a `gs://` object on Vertex AI. Local `file://` sources are read and inlined.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    URLSource,
    VideoBlock,
)
from parley.messages.blocks import MediaBlock
from parley.models._media import base64_data, remote_url

__all__ = ["block_from_part", "media_part"]


def _uri_media_type(block: MediaBlock, url: str) -> str | None:
    source = block.source
    if source.media_type:
        return source.media_type
    return mimetypes.guess_type(urlsplit(url).path)[0]


def media_part(block: MediaBlock) -> dict[str, Any]:
    """The Gemini part for a media block: `fileData` for a URL, else `inlineData`.

    Raises:
        MessageError: A local file cannot be read.
    """
    url = remote_url(block)
    if url is not None:
        file_data: dict[str, Any] = {"fileUri": url}
        media_type = _uri_media_type(block, url)
        if media_type:  # YouTube links need none; Gemini guesses nothing else
            file_data["mimeType"] = media_type
        return {"fileData": file_data}
    data, media_type = base64_data(block)
    return {"inlineData": {"mimeType": media_type, "data": data}}


_FAMILIES: dict[str, type[ImageBlock | AudioBlock | VideoBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
}


def block_from_part(part: Mapping[str, Any]) -> MediaBlock | None:
    """The media block for a part the model produced (`inlineData` or `fileData`), or None."""
    if inline := part.get("inlineData"):
        media_type = inline.get("mimeType") or "application/octet-stream"
        source: URLSource | Base64Source = Base64Source(
            media_type=media_type, data=inline.get("data") or ""
        )
    elif (file_data := part.get("fileData")) and file_data.get("fileUri"):
        media_type = file_data.get("mimeType") or ""
        try:
            source = URLSource(url=file_data["fileUri"], media_type=media_type or None)
        except ValidationError:  # a URI of a scheme parley's URL sources do not take
            return None
    else:
        return None
    cls = _FAMILIES.get(media_type.split("/", 1)[0])
    return cls(source=source) if cls is not None else FileBlock(source=source)
