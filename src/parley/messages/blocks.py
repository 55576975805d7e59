"""Content blocks: small tagged classes, one per kind of content, joined in one union.

Every block has a literal `type` tag; `Block` is their union discriminated on it, so JSON
parses back into the same concrete classes. Media blocks carry a `source` that is a URL
(`http(s)://`, `file://`, or a provider's storage location: `oss://`, `s3://`, `gs://`) or
base64 data with a media type; a video may also be a list of frames.
"""

from __future__ import annotations

import base64
import binascii
import functools
import mimetypes
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    SerializeAsAny,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, core_schema

from parley.errors import MessageError
from parley.messages._base import DictLikeModel, trusted

__all__ = [
    "AudioBlock",
    "Base64Source",
    "Block",
    "BlockType",
    "FileBlock",
    "ImageBlock",
    "MediaBlock",
    "OutputBlock",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "URLSource",
    "VideoBlock",
    "source_from_str",
]

BlockType = Literal[
    "text", "thinking", "image", "audio", "video", "file", "tool_call", "tool_result"
]

_STRICT = ConfigDict(extra="forbid")

# Serialize a union by the value's own class (`SerializeAsAny`) rather than by trying the
# union's members: pydantic-core's union serializer costs more than the model inside it
# (benchmarks/messages.py). Every value there passed validation, so its class is one of the
# members and the JSON is the same; the JSON schema is unchanged.
_BY_VALUE = core_schema.simple_ser_schema("any")

# A MIME type: `type/subtype`, parameters allowed (`audio/wav; rate=16000`).
_MEDIA_TYPE = r"^[A-Za-z0-9][\w.+-]*/[\w.+-]+(\s*;.*)?$"
_MEDIA_TYPE_MATCH = re.compile(_MEDIA_TYPE).fullmatch
# Storage schemes are opaque locations a provider reads itself (DashScope's `oss://` uploads,
# Vertex AI's `gs://` objects); parley never fetches them.
_URL = r"^(?i:https?://\S|file://|(?:oss|s3|gs)://\S)"
_URL_MATCH = re.compile(_URL).match


class URLSource(DictLikeModel):
    """Media found at a URL: `http(s)://`, a local `file://` path, or a storage location.

    A storage location (`oss://`, `s3://`, `gs://`) is passed to the provider as it is: the
    provider that issued it reads it (DashScope's uploads, a Vertex AI bucket); parley does not.
    """

    model_config = _STRICT
    type: Literal["url"] = "url"
    url: Annotated[str, Field(pattern=_URL)]
    media_type: Annotated[str, Field(pattern=_MEDIA_TYPE)] | None = None


class Base64Source(DictLikeModel):
    """Media carried inline as base64 data with its media type."""

    model_config = _STRICT
    type: Literal["base64"] = "base64"
    media_type: Annotated[str, Field(pattern=_MEDIA_TYPE)]
    data: str

    @field_validator("data")
    @classmethod
    def _check_base64(cls, data: str) -> str:
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MessageError(f"source data is not valid base64 ({exc})") from None
        return data

    def to_data_url(self) -> str:
        """Return the source as a `data:` URL."""
        return f"data:{self.media_type};base64,{self.data}"

    def to_bytes(self) -> bytes:
        """Decode the data."""
        return base64.b64decode(self.data)


# `Discriminator`, not `Field(discriminator=...)`: a Field is hoisted into the field that uses
# `Source`, where FastAPI's schema code applies it after `_OrString` (to a union with `str`,
# which fails: /openapi.json answered 500); `Discriminator` stays on this union.
Source = Annotated[URLSource | Base64Source, Discriminator("type")]


def _parse_data_url(value: str) -> Base64Source:
    header, sep, data = value.partition(",")
    if not sep or not header.endswith(";base64"):
        raise MessageError("a data: URL must look like 'data:<media type>;base64,<data>'")
    return Base64Source(media_type=header[5:-7], data=data)


def source_from_str(value: str) -> URLSource | Base64Source:
    """Turn a URL, a `data:` URL or a local path into a source.

    Raises:
        MessageError: The string is none of those.
    """
    if value.startswith("data:"):
        return _parse_data_url(value)
    if "://" in value:
        return URLSource(url=value)
    if value.startswith(("/", "./", "../", "~")):
        return URLSource(url=Path(value).expanduser().resolve().as_uri())
    raise MessageError(
        f"{value[:80]!r} is not a URL, a data: URL or a local path; "
        "pass 'https://...', 'file:///...', 'oss://...' or a Base64Source"
    )


class TextBlock(DictLikeModel):
    """Plain text."""

    model_config = _STRICT
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(DictLikeModel):
    """A reasoning trace, with whatever the provider needs to get it back.

    `signature` is the provider's proof of the trace (Anthropic's `signature`, an encrypted
    reasoning item); `extra` keeps any other provider fields (ids, redacted data, summaries)
    so the trace can be sent back unchanged. `provider` names the provider whose model made
    it (`ChatModel.provider`: `anthropic`, `gemini`, `openai`, ...): a signature and the
    provider's fields go back to that provider only, another gets the thinking as text or
    not at all. None: not recorded (blocks made before parley recorded it, or by hand),
    sent as it is.
    """

    model_config = _STRICT
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    extra: dict[str, Any] | None = None
    provider: str | None = None


class _OrString:
    """Marks a source field that also takes a string (URL, data URL or path).

    A union in the schema rather than a before-validator: a source given as a model or a JSON
    object is validated without calling into Python.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from_str = core_schema.no_info_after_validator_function(
            source_from_str, core_schema.str_schema()
        )
        return core_schema.union_schema(
            [(handler(source), "source"), (from_str, "string")],
            mode="left_to_right",
            serialization=_BY_VALUE,
        )


@functools.cache
def _defaults(cls: type[DictLikeModel]) -> dict[str, Any]:
    return {name: field.default for name, field in cls.model_fields.items()}


class _MediaBase(DictLikeModel):
    """Shared fields and constructors of the media blocks."""

    model_config = _STRICT
    # The media type family a block of this kind accepts; None accepts any.
    _family: ClassVar[str | None] = None
    type: BlockType = "file"  # narrowed to a literal by each subclass; declared here to come first
    source: Annotated[Source, _OrString()]

    @model_validator(mode="after")
    def _check_family(self) -> Self:
        self._check_media_types()
        return self

    def _check_media_types(self) -> None:
        family = self._family
        media_type = self.source.media_type
        if family and media_type and not media_type.startswith(family):
            raise MessageError(
                f"{type(self).__name__} needs a {family}* media type, got {media_type!r}"
            )

    @classmethod
    def from_url(cls, url: str, media_type: str | None = None) -> Self:
        """Build the block from an `http(s)://` or `file://` URL (or a `data:` URL)."""
        if url.startswith("data:"):
            return cls(source=_parse_data_url(url))
        if media_type is None and type(url) is str and _URL_MATCH(url):
            # The common case, checked above exactly as validation would: assembled directly.
            source = trusted(URLSource, {"type": "url", "url": url, "media_type": None}, {"url"})
            values = {**_defaults(cls), "source": source}
            return trusted(cls, values, {"source"})
        return cls(source=URLSource(url=url, media_type=media_type))

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str) -> Self:
        """Build the block from raw bytes, carried inline as base64."""
        encoded = base64.b64encode(data).decode("ascii")
        if type(media_type) is str and _MEDIA_TYPE_MATCH(media_type):
            # Base64 made here needs no check: decoding it again to validate took more time
            # than encoding it (a second of speech is 64 KB: the TTS layer's every piece).
            values = {"type": "base64", "media_type": media_type, "data": encoded}
            source = trusted(Base64Source, values, {"media_type", "data"})
            return cls(source=source)
        return cls(source=Base64Source(media_type=media_type, data=encoded))

    @classmethod
    def from_path(cls, path: str | Path, *, inline: bool = False) -> Self:
        """Build the block from a local file: a `file://` URL, or inline base64 data.

        The media type is guessed from the file name.
        """
        resolved = Path(path).expanduser().resolve()
        media_type = mimetypes.guess_type(resolved.name)[0]
        if inline:
            return cls.from_bytes(resolved.read_bytes(), media_type or "application/octet-stream")
        return cls(source=URLSource(url=resolved.as_uri(), media_type=media_type))


class ImageBlock(_MediaBase):
    """An image."""

    _family: ClassVar[str | None] = "image/"
    type: Literal["image"] = "image"


class AudioBlock(_MediaBase):
    """A sound recording."""

    _family: ClassVar[str | None] = "audio/"
    type: Literal["audio"] = "audio"


class VideoBlock(_MediaBase):
    """A video: one source, or the images it was sampled into (`frames`, in order).

    Frames are how Qwen-VL models and DashScope take a video. A video given by its frames has
    its first frame as `source` too, so that code reading only `source` finds where the video
    starts; `VideoBlock.from_frames([...])` (or `VideoBlock(frames=[...])`) fills it in.
    """

    _family: ClassVar[str | None] = "video/"
    type: Literal["video"] = "video"
    frames: list[Annotated[Source, _OrString()]] | None = None

    @classmethod
    def from_frames(cls, frames: Sequence[URLSource | Base64Source | str]) -> Self:
        """Build a video from its frames: sources, or URLs, `data:` URLs and local paths."""
        return cls.model_validate({"frames": list(frames)})

    @model_validator(mode="before")
    @classmethod
    def _source_from_frames(cls, data: Any) -> Any:
        frames = data.get("frames") if isinstance(data, dict) else None
        if not isinstance(frames, list):
            return data
        if not frames:
            raise MessageError("a video's frames must hold at least one frame")
        return data if "source" in data else {**data, "source": frames[0]}

    def _check_media_types(self) -> None:
        frames = self.frames
        if frames is None:
            super()._check_media_types()
            return
        # The frames of a video are images.
        for index, frame in enumerate(frames):
            if frame.media_type and not frame.media_type.startswith("image/"):
                raise MessageError(
                    f"a video's frames are images: frame {index} is {frame.media_type!r}"
                )
        if not frames or self.source != frames[0]:
            raise MessageError("a video given by its frames has its first frame as source")


class FileBlock(_MediaBase):
    """A document or any other file, with its name when known."""

    type: Literal["file"] = "file"
    filename: str | None = None


MediaBlock = ImageBlock | AudioBlock | VideoBlock | FileBlock

OutputBlock = SerializeAsAny[
    Annotated[
        TextBlock | ImageBlock | AudioBlock | VideoBlock | FileBlock, Field(discriminator="type")
    ]
]
"""A block a tool may return: text or media."""


class _ToolName:
    """Marks a tool call's `name`: stripped of surrounding whitespace, and not empty.

    Constraints of pydantic-core's string schema rather than a Python validator: a tool call
    is built or parsed for every call a model makes, and a Python call cost as much as the
    rest of the name's validation (benchmarks/messages.py).
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.custom_error_schema(
            core_schema.str_schema(strip_whitespace=True, min_length=1),
            custom_error_type="tool_name",
            custom_error_message=(
                "a tool call needs the tool's name: a string that is not empty or only spaces"
            ),
        )


class ToolCallBlock(DictLikeModel):
    """A model's request to call a tool.

    `input` holds the parsed arguments; `raw_input` keeps the argument string as the model
    produced it (while streaming, or when it was not valid JSON), so nothing is lost.
    `name` is stripped of surrounding whitespace and must not be empty (seed 001's rule for a
    function call). A stream's partial calls are assembled without validation
    (`parley.models.accumulator`), so the rule holds for the blocks you build and for a
    model's finished calls, not for a call still arriving.
    """

    model_config = _STRICT
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: Annotated[str, _ToolName()]
    input: dict[str, Any] = Field(default_factory=dict)
    raw_input: str | None = None


class ToolResultBlock(DictLikeModel):
    """A tool's answer to the call with `tool_call_id`: text, or a list of text and media.

    `name` is the tool's name; it may be `""` where the source does not say it (an
    AgentScope result read without its call), since `tool_call_id` is what links a result
    to its call. (Seed 001's "a function message has a name" holds in the Qwen-Agent schema,
    `parley.compat.qwen.schema.Message`, whose function messages are linked by name.)
    """

    model_config = _STRICT
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    output: SerializeAsAny[str | list[OutputBlock]] = ""
    is_error: bool = False

    @property
    def text(self) -> str:
        """The output's text, its text blocks joined by newlines."""
        if isinstance(self.output, str):
            return self.output
        return "\n".join(b.text for b in self.output if isinstance(b, TextBlock))


Block = SerializeAsAny[
    Annotated[
        TextBlock
        | ThinkingBlock
        | ImageBlock
        | AudioBlock
        | VideoBlock
        | FileBlock
        | ToolCallBlock
        | ToolResultBlock,
        Field(discriminator="type"),
    ]
]
"""Any content block, discriminated on its `type` tag."""
