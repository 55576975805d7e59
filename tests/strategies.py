"""Hypothesis strategies for valid parley messages, shared by the property tests."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    Usage,
    VideoBlock,
)

text = st.text(max_size=40)
names = st.text(
    alphabet=st.characters(categories=["L", "N"], include_characters="_-"), min_size=1, max_size=12
)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=16)

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=4)

RESERVED_KEYS = ("agentscope", "parley", "service_toolkit", "_chat_usage", "interrupted")
"""Metadata keys the converters give a meaning (their records, AgentScope-Java's usage)."""
# What AgentScope's reader marks a message with to keep it apart from the one before (the
# marks of a message's parts and hints are not tried: only reading makes those).
_apart = st.fixed_dictionaries({"form": st.sampled_from(["python", "java"])})
metadata_objects = st.dictionaries(
    text | st.sampled_from(RESERVED_KEYS), json_values | _apart, max_size=4
)
"""Message metadata: any JSON object, its keys often the converters' own, so that a message
holding what looks like a converter's record is tried too."""

_FAMILY = {ImageBlock: "image", AudioBlock: "audio", VideoBlock: "video", FileBlock: "application"}
_SUBTYPES = st.sampled_from(["png", "jpeg", "wav", "mp4", "pdf", "octet-stream", "x-custom+json"])


def _media_type(family: str) -> st.SearchStrategy[str]:
    return _SUBTYPES.map(lambda sub: f"{family}/{sub}")


STORAGE_SCHEMES = ("oss", "s3", "gs")
"""The providers' storage schemes a URL source takes as opaque locations."""


def url_sources(family: str, *, storage: bool = False) -> st.SearchStrategy[URLSource]:
    """URL sources: web URLs and `file://` paths (and storage locations, if asked for), with
    or without a media type."""
    paths = st.text(alphabet="abcdefghij0123456789/._-", min_size=1, max_size=20)
    urls = st.one_of(
        st.builds(lambda p: f"https://example.com/{p}", paths),
        st.builds(lambda p: f"http://host.test:8080/{p}?q=1", paths),
        st.builds(lambda p: f"file:///tmp/{p}", paths),
    )
    if storage:
        schemes = st.sampled_from(STORAGE_SCHEMES)
        urls |= st.builds(lambda scheme, p: f"{scheme}://bucket/{p}", schemes, paths)
    return st.builds(URLSource, url=urls, media_type=st.none() | _media_type(family))


def base64_sources(family: str) -> st.SearchStrategy[Base64Source]:
    """Inline sources holding real base64 data."""
    data = st.binary(max_size=24).map(lambda b: base64.b64encode(b).decode())
    return st.builds(Base64Source, media_type=_media_type(family), data=data)


def media_blocks(*, storage: bool = False, frames: bool = False) -> st.SearchStrategy[Any]:
    """Image, audio, video and file blocks with URL or base64 sources.

    `storage` adds storage locations (`oss://`...) to the URLs, `frames` videos given by
    their frames: forms that not every converter takes yet, so they are asked for.
    """
    choices = []
    for cls, family in _FAMILY.items():
        sources = url_sources(family, storage=storage) | base64_sources(family)
        if cls is FileBlock:
            choices.append(st.builds(cls, source=sources, filename=st.none() | names))
        else:
            choices.append(st.builds(cls, source=sources))
    if frames:
        images = url_sources("image", storage=storage) | base64_sources("image")
        frame_lists = st.lists(images, min_size=1, max_size=3)
        choices.append(frame_lists.map(lambda f: VideoBlock(source=f[0], frames=f)))
    return st.one_of(choices)


text_blocks = st.builds(TextBlock, text=text)
thinking_blocks = st.builds(
    ThinkingBlock,
    thinking=text,
    signature=st.none() | text,
    extra=st.none() | json_objects,
)
tool_call_blocks = st.builds(
    ToolCallBlock, id=ids, name=names, input=json_objects, raw_input=st.none() | text
)
output_blocks = text_blocks | media_blocks()


def tool_result_blocks(media: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[Any]:
    """Tool results whose output is text, or text and `media` blocks (`media_blocks()`)."""
    outputs = text_blocks | (media if media is not None else media_blocks())
    return st.builds(
        ToolResultBlock,
        tool_call_id=ids,
        name=names,
        output=text | st.lists(outputs, max_size=3),
        is_error=st.booleans(),
    )


usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cached_tokens=st.integers(0, 10**6),
    elapsed=st.floats(0, 1e4, allow_nan=False),
)
timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


def _common() -> dict[str, st.SearchStrategy[Any]]:
    return {
        "name": st.none() | names,
        "id": ids,
        "created_at": timestamps,
        "metadata": metadata_objects,
        "usage": st.none() | usages,
    }


def _unique_call_ids(blocks: list[Any]) -> bool:
    call_ids = [b.id for b in blocks if isinstance(b, ToolCallBlock)]
    return len(call_ids) == len(set(call_ids))


def msgs(
    roles: tuple[str, ...] = ("system", "user", "assistant", "tool"),
    *,
    media: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[Msg]:
    """Valid messages of the given roles, with every kind of block their role allows.

    `media` draws the media blocks (`media_blocks()` by default).
    """
    media = media if media is not None else media_blocks()
    user_blocks = st.lists(text_blocks | media, max_size=4)
    by_role = {
        "system": st.lists(text_blocks, max_size=2),
        "user": user_blocks,
        "assistant": st.lists(
            text_blocks | media | thinking_blocks | tool_call_blocks, max_size=5
        ).filter(_unique_call_ids),
        "tool": st.lists(tool_result_blocks(media), min_size=1, max_size=3),
    }
    return st.one_of(
        [st.builds(Msg, role=st.just(role), content=by_role[role], **_common()) for role in roles]
    )
