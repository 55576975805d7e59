"""Images and documents as Claude takes them: by URL, as base64, or read from a local file.

Images are `image` blocks (JPEG, PNG, GIF, WebP); PDFs and plain-text files are `document`
blocks (PDFs also by URL; text inline). Claude takes no audio or video (Anthropic's vision and
PDF-support pages).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from parley.errors import MessageError
from parley.messages import FileBlock, ImageBlock
from parley.models._media import base64_data, remote_url

__all__ = ["IMAGE_TYPES", "document_block", "image_block"]

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types Claude reads."""


def _bare(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().lower()


def image_block(block: ImageBlock) -> dict[str, Any]:
    """An `image` block: a remote URL as it is, base64 data or a local file inline.

    Raises:
        MessageError: The image is of a type Claude does not read, or cannot be read.
    """
    url = remote_url(block)
    if url is not None:
        return {"type": "image", "source": {"type": "url", "url": url}}
    data, media_type = base64_data(block)
    media_type = _bare(media_type)
    if media_type not in IMAGE_TYPES:
        raise MessageError(
            f"Claude reads JPEG, PNG, GIF and WebP images, not {media_type}: convert it first"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _text(data: str) -> str:
    try:
        return base64.b64decode(data).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise MessageError(f"a text/plain file must be UTF-8 text ({exc})") from None


def _source(block: FileBlock) -> dict[str, Any]:
    url = remote_url(block)
    declared = _bare(block.source.media_type or "")
    if url is not None:
        if declared not in ("", "application/pdf"):
            raise MessageError(
                f"Claude reads documents by URL only as PDFs, not {declared}: pass the file inline"
            )
        return {"type": "url", "url": url}
    data, media_type = base64_data(block)
    media_type = _bare(media_type)
    if media_type == "application/pdf":
        return {"type": "base64", "media_type": media_type, "data": data}
    if media_type.startswith("text/"):
        return {"type": "text", "media_type": "text/plain", "data": _text(data)}
    raise MessageError(f"Claude reads PDF and plain-text documents, not {media_type}")


def document_block(block: FileBlock) -> dict[str, Any]:
    """A `document` block for a PDF (URL, base64 or file) or a plain-text file (inline).

    Raises:
        MessageError: The file is of a kind Claude does not read, or cannot be read.
    """
    document: dict[str, Any] = {"type": "document", "source": _source(block)}
    if block.filename:
        document["title"] = block.filename
    return document
