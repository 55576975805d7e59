"""Media as DashScope's multimodal API takes them: one string per image, audio or video.

The API reads an `http(s)://` URL, a `data:<type>;base64,...` URI, or an `oss://` location
(a file uploaded to DashScope's temporary storage). Local files (`file://`) are read and sent
as data URIs by default; with uploads on, the formatter leaves them as `file://` URLs, which
the model uploads through the SDK before sending (see `DashScopeChatModel`).
"""

from __future__ import annotations

import base64
import mimetypes
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from parley.messages import Base64Source, FileBlock, URLSource
from parley.messages.blocks import MediaBlock
from parley.models import _media

__all__ = ["FILE_SCHEME", "TEXT_FILE_TYPES", "file_text", "media_value"]

FILE_SCHEME = "file://"

TEXT_FILE_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")
"""Documents sent as text: DashScope's chat APIs take no document parts."""


def media_value(block: MediaBlock, *, inline_local: bool = True) -> str:
    """The string DashScope takes for an image, audio or video block.

    Raises:
        MessageError: A local file cannot be read.
    """
    source = block.source
    if isinstance(source, Base64Source):
        return source.to_data_url()
    if source.url[: len(FILE_SCHEME)].lower() != FILE_SCHEME or not inline_local:
        return source.url
    return _media.data_url(block)


def file_text(block: FileBlock) -> str | None:
    """A local or inline text document's content, headed by its name; None for others.

    Raises:
        MessageError: A local file cannot be read.
    """
    source = block.source
    if isinstance(source, URLSource):
        if _media.remote_url(block) is not None:
            return None
        guessed = mimetypes.guess_type(url2pathname(unquote(urlsplit(source.url).path)))[0]
        media_type = source.media_type or guessed or ""
    else:
        media_type = source.media_type
    if not media_type.startswith(TEXT_FILE_TYPES):
        return None
    data, _ = _media.base64_data(block)
    text = base64.b64decode(data).decode("utf-8", "replace")
    return f"[file: {_media.filename(block)}]\n{text}"
