"""MCP tool results as parley tool outputs.

Text stays text; images and audio become media blocks with inline base64 data and the server's
MIME type; an embedded resource becomes text (text contents) or a media or file block (binary
contents); a resource link becomes a line of text naming it. A result that is all text is
joined into one string, which every model reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import ValidationError

from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    OutputBlock,
    TextBlock,
    VideoBlock,
)
from parley.tools.base import ToolOutput

if TYPE_CHECKING:
    from mcp_types import CallToolResult, ContentBlock, EmbeddedResource

__all__ = ["result_text", "to_tool_output"]


def to_tool_output(result: CallToolResult) -> ToolOutput:
    """The output a parley tool result carries for this MCP result."""
    blocks = [_block(item) for item in result.content]
    if not blocks and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    if all(isinstance(b, TextBlock) for b in blocks):
        return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    return blocks


def result_text(result: CallToolResult) -> str:
    """The result's text, for an error message ('' when it has none)."""
    return "\n".join(
        b.text for b in (_block(item) for item in result.content) if isinstance(b, TextBlock)
    )


def _block(item: ContentBlock) -> OutputBlock:
    from mcp_types import (  # noqa: PLC0415  (optional extra)
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    if isinstance(item, TextContent):
        return TextBlock(text=item.text)
    if isinstance(item, ImageContent | AudioContent):
        return _media(item.data, item.mime_type, None)
    if isinstance(item, EmbeddedResource):
        return _resource(item)
    if isinstance(item, ResourceLink):
        kind = f", {item.mime_type}" if item.mime_type else ""
        about = f": {item.description}" if item.description else ""
        return TextBlock(text=f"[resource {item.name} at {item.uri}{kind}]{about}")
    # A content type newer than this code knows (the union above is the SDK's, today).
    return TextBlock(text=f"[unsupported MCP content of type {getattr(item, 'type', '?')!r}]")  # type: ignore[unreachable]


def _resource(item: EmbeddedResource) -> OutputBlock:
    from mcp_types import TextResourceContents  # noqa: PLC0415

    contents = item.resource
    if isinstance(contents, TextResourceContents):
        return TextBlock(text=contents.text)
    filename = str(contents.uri).rstrip("/").rsplit("/", 1)[-1] or None
    return _media(contents.blob, contents.mime_type or "application/octet-stream", filename)


_FAMILIES: Sequence[tuple[str, type[ImageBlock | AudioBlock | VideoBlock]]] = (
    ("image/", ImageBlock),
    ("audio/", AudioBlock),
    ("video/", VideoBlock),
)


def _media(data: str, mime_type: str, filename: str | None) -> OutputBlock:
    """A media block for base64 data; a note in text if the server sent something invalid."""
    try:
        source = Base64Source(media_type=mime_type, data=data)
        for family, cls in _FAMILIES:
            if mime_type.startswith(family):
                return cls(source=source)
        return FileBlock(source=source, filename=filename)
    except (ValidationError, MessageError) as exc:
        return TextBlock(text=f"[the server sent {mime_type!r} content that is not usable: {exc}]")
