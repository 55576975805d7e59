"""Messages as the GenAI conventions record them: JSON lists of typed parts.

`gen_ai.input.messages` and `gen_ai.output.messages` hold `{"role", "parts", "name"?}`
messages; `gen_ai.system_instructions` a list of parts. Parts follow the conventions' schema:
`text` and `reasoning` (`content`), `tool_call` (`id`, `name`, `arguments`),
`tool_call_response` (`id`, `response`), and `uri` for media given by URL. Media given
inline is recorded by its kind and media type only (`{"type": "image", "mime_type": ...}`,
a generic part): megabytes of base64 on a span would swamp any collector.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from parley.messages import (
    Block,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from parley.messages.blocks import OutputBlock, URLSource

__all__ = ["dumps", "messages", "parts", "split_system"]

_MODALITY = {"image": "image", "audio": "audio", "video": "video", "file": "document"}


def dumps(value: Any) -> str:
    """JSON as a span attribute holds it (a string: OTLP attributes have no nested maps)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def parts(blocks: Iterable[Block | OutputBlock]) -> list[dict[str, Any]]:
    """The conventions' parts for a message's blocks."""
    return [_part(block) for block in blocks]


def _part(block: Block | OutputBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "reasoning", "content": block.thinking}
    if isinstance(block, ToolCallBlock):
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.input}
    if isinstance(block, ToolResultBlock):
        return {"type": "tool_call_response", "id": block.tool_call_id, "response": block.text}
    source = block.source
    found: dict[str, Any]
    if isinstance(source, URLSource):
        found = {"type": "uri", "modality": _MODALITY[block.type], "uri": source.url}
    else:
        found = {"type": block.type}
    if source.media_type:
        found["mime_type"] = source.media_type
    return found


def messages(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """The conventions' messages for parley's."""
    out = []
    for msg in msgs:
        entry: dict[str, Any] = {"role": msg.role, "parts": parts(msg.content)}
        if msg.name:
            entry["name"] = msg.name
        out.append(entry)
    return out


def split_system(msgs: Sequence[Msg]) -> tuple[list[Msg], list[Msg]]:
    """The leading system messages (the instructions), and the conversation after them."""
    count = 0
    while count < len(msgs) and msgs[count].role == "system":
        count += 1
    return list(msgs[:count]), list(msgs[count:])
