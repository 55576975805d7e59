"""Media sources for wire formats: URLs kept, local files read and inlined as base64."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from parley.errors import MessageError
from parley.messages import Base64Source, FileBlock, URLSource
from parley.messages.blocks import MediaBlock

__all__ = ["audio_format", "base64_data", "data_url", "filename", "remote_url", "url_or_data"]

# OpenAI's `input_audio.format` names the container; these media types say the same thing.
_AUDIO_FORMATS = {"x-wav": "wav", "wave": "wav", "vnd.wave": "wav", "mpeg": "mp3", "mpeg3": "mp3"}


def remote_url(block: MediaBlock) -> str | None:
    """The block's remote URL, or None when its content is local (data or a file).

    A remote URL is `http(s)://`, or a storage location (`oss://`...) passed on as it is.
    """
    source = block.source
    if isinstance(source, URLSource) and not source.url.lower().startswith("file://"):
        return source.url
    return None


def _read_file(source: URLSource) -> tuple[bytes, str]:
    """A `file://` URL's bytes and media type (from the source, else the file name)."""
    path = url2pathname(unquote(urlsplit(source.url).path))
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise MessageError(f"cannot read {source.url}: {exc.strerror or exc}") from None
    media_type = source.media_type or mimetypes.guess_type(path)[0] or "application/octet-stream"
    return data, media_type


def base64_data(block: MediaBlock) -> tuple[str, str]:
    """`(base64 data, media type)` of a block whose source is base64 data or a local file.

    Raises:
        MessageError: The source is a remote URL (the caller's API takes these media inline
            only), or the file cannot be read.
    """
    source = block.source
    if isinstance(source, Base64Source):
        return source.data, source.media_type
    if isinstance(source, URLSource) and remote_url(block):
        raise MessageError(
            f"this API takes {block.type} content inline, not by URL ({source.url[:80]}): "
            "download it, or pass base64 data or a file:// path"
        )
    data, media_type = _read_file(source)
    return base64.b64encode(data).decode("ascii"), media_type


def data_url(block: MediaBlock) -> str:
    """The block's content as a `data:` URL (local files read)."""
    data, media_type = base64_data(block)
    return f"data:{media_type};base64,{data}"


def url_or_data(block: MediaBlock) -> str:
    """A remote URL as it is; base64 data and local files as a `data:` URL."""
    return remote_url(block) or data_url(block)


def audio_format(media_type: str) -> str:
    """OpenAI's audio format name for a media type: `audio/wav` -> `wav`, `audio/mpeg` -> `mp3`."""
    subtype = media_type.split(";", 1)[0].split("/", 1)[-1].strip().lower()
    return _AUDIO_FORMATS.get(subtype, subtype)


def filename(block: FileBlock) -> str:
    """The file's name: the block's, else the URL's last segment, else `file`."""
    if block.filename:
        return block.filename
    if isinstance(block.source, URLSource):
        name = PurePosixPath(unquote(urlsplit(block.source.url).path)).name
        if name:
            return name
    extension = mimetypes.guess_extension(block.source.media_type or "") or ""
    return f"file{extension}"
