"""AgentScope 2.x's Python form: `agentscope.message.Msg.model_dump(mode="json")`.

Messages are written with every key the library's own dump has, so that the library reads
them and dumps them back unchanged. Block ids the library would generate are derived from the
message id (`<msg id>.<index>`) and block times are the message's, so that writing is
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley.compat.agentscope._common import (
    Form,
    Head,
    Hint,
    Item,
    WriteContext,
    block_type,
    dump_input,
    format_time,
    jsonable,
    media_block,
    parse_input,
    parse_time,
    read_metadata,
    read_role,
    read_source,
    read_usage,
    result_name,
    source_family,
    unknown_block,
)
from parley.errors import MessageError
from parley.messages import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
    VideoBlock,
)

_KNOWN = ("text", "thinking", "data", "hint", "tool_call", "tool_result")
_THINKING_FIELDS = frozenset({"type", "thinking", "id", "created_at", "finished_at"})
ERROR_STATES = ("error", "denied", "interrupted")  # a tuple: states may be unhashable
"""Tool result states read as `is_error=True`; the exact state is kept by the patch."""

# AgentScope's URLSource requires a media type; parley's may have none.
_DEFAULT_MEDIA_TYPE = {
    "image": "image/*",
    "audio": "audio/*",
    "video": "video/*",
    "file": "application/octet-stream",
}


class PythonForm:
    """Reads and writes AgentScope 2.x Python messages."""

    form: Form = "python"

    # -- reading ---------------------------------------------------------------------------

    def read_head(self, data: dict[str, Any]) -> Head:
        """Read `name`, `role`, `id`, `created_at`, `metadata` and `usage`."""
        usage = read_usage(
            data.get("usage"),
            input_tokens="input_tokens",
            output_tokens="output_tokens",
            cached_tokens="cache_input_tokens",
        )
        return Head(
            role=read_role(data.get("role"), self.form),
            name=data.get("name"),
            id=data.get("id"),
            created_at=parse_time(data.get("created_at"), "created_at"),
            metadata=read_metadata(data.get("metadata")),
            usage=usage,
        )

    def read_item(self, raw: Any, where: str, names: Mapping[str, str]) -> Item:
        """Read one content block."""
        tag = block_type(raw, where)
        if tag == "text":
            return TextBlock.model_validate({"text": raw.get("text")})
        if tag == "thinking":
            return _read_thinking(raw)
        if tag == "data":
            return _read_data(raw, where)
        if tag == "hint":
            return _read_hint(raw, where)
        if tag == "tool_call":
            return _read_tool_call(raw)
        if tag == "tool_result":
            return _read_tool_result(raw, where, names)
        raise unknown_block(tag, where, self.form, _KNOWN)

    # -- writing ---------------------------------------------------------------------------

    def write_message(
        self,
        head: Msg,
        content: list[dict[str, Any]],
        metadata: dict[str, Any],
        hint_head: bool,
    ) -> dict[str, Any]:
        """Write the message with the keys, in the order, of the library's dump."""
        # No tool role here: tool results live in assistant messages, as AgentScope's agent
        # appends them to its reply; hints too.
        written_role = "assistant" if hint_head or head.role == "tool" else head.role
        usage = head.usage
        return {
            "name": written_role if head.name is None else head.name,
            "content": content,
            "role": written_role,
            "id": head.id,
            "metadata": metadata,
            "created_at": format_time(head.created_at),
            "usage": None
            if usage is None
            else {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_input_tokens": usage.cached_tokens,
                "cache_creation_input_tokens": 0,
            },
            "finished_at": None,
            "finished_reason": None,
            "structured_output": None,
            "error": None,
        }

    def write_block(self, block: Block, index: str, ctx: WriteContext) -> dict[str, Any]:
        """Write one content block."""
        if isinstance(block, TextBlock):
            return _stamped({"type": "text", "text": block.text}, index, ctx)
        if isinstance(block, ThinkingBlock):
            return _write_thinking(block, index, ctx)
        if isinstance(block, ToolCallBlock):
            return _write_tool_call(block, ctx)
        if isinstance(block, ToolResultBlock):
            return self._write_tool_result(block, index, ctx)
        return _write_data(block, index, ctx)

    def write_hint(self, piece: Msg, index: str, ctx: WriteContext) -> dict[str, Any]:
        """Write a hint block from the user message it was read into."""
        content = piece.content
        hint: Any
        if len(content) == 1 and isinstance(content[0], TextBlock):
            hint = content[0].text
        else:
            hint = [self.write_block(b, f"{index}.{j}", ctx) for j, b in enumerate(content)]
        return {
            "type": "hint",
            "hint": hint,
            "id": f"{ctx.msg_id}.{index}",
            "source": piece.name,
            "created_at": ctx.stamp,
            "finished_at": ctx.stamp,  # the library stamps hints finished when made
        }

    def _write_tool_result(
        self, block: ToolResultBlock, index: str, ctx: WriteContext
    ) -> dict[str, Any]:
        output: Any = block.output
        if not isinstance(output, str):
            output = [self.write_block(b, f"{index}.{j}", ctx) for j, b in enumerate(output)]
        return {
            "type": "tool_result",
            "id": block.tool_call_id,
            "name": block.name,
            "output": output,
            "state": "error" if block.is_error else "success",
            "metadata": {},
            "created_at": ctx.stamp,
            "finished_at": None,
        }


# -- block readers -------------------------------------------------------------------------


def _read_thinking(raw: dict[str, Any]) -> ThinkingBlock:
    # The library's ThinkingBlock keeps unknown keys (extra="allow"): Anthropic's `signature`,
    # `redacted_thinking_data`, ...
    extra = {k: v for k, v in raw.items() if k not in _THINKING_FIELDS}
    signature = extra.pop("signature") if isinstance(extra.get("signature"), str) else None
    return ThinkingBlock.model_validate(
        {"thinking": raw.get("thinking"), "signature": signature, "extra": extra or None}
    )


def _read_data(raw: dict[str, Any], where: str) -> Block:
    source = read_source(raw.get("source"), where)
    family = source_family(raw.get("source")) or (source.media_type or "")
    return media_block(source, family, raw.get("name"))


def _read_output(raw: Any, where: str) -> Block:
    tag = block_type(raw, where)
    if tag == "text":
        return TextBlock.model_validate({"text": raw.get("text")})
    if tag == "data":
        return _read_data(raw, where)
    raise MessageError(f"{where} has type {tag!r}; tool output and hints hold text and data")


def _read_blocks(value: Any, where: str) -> list[Block]:
    if not isinstance(value, list):
        raise MessageError(f"{where} must be a string or a list of blocks")
    return [_read_output(b, f"{where}[{j}]") for j, b in enumerate(value)]


def _read_hint(raw: dict[str, Any], where: str) -> Hint:
    hint = raw.get("hint")
    content: list[Block] = (
        [TextBlock(text=hint)] if isinstance(hint, str) else _read_blocks(hint, where)
    )
    return Hint(source=raw.get("source"), content=content)


def _read_tool_call(raw: dict[str, Any]) -> ToolCallBlock:
    arguments = raw.get("input")
    if isinstance(arguments, str):
        parsed, raw_input = parse_input(arguments)
        fields = {"input": parsed, "raw_input": raw_input}
    else:  # not the library's form, but plain enough: arguments given as an object
        fields = {"input": arguments}
    return ToolCallBlock.model_validate({"id": raw.get("id"), "name": raw.get("name"), **fields})


def _read_tool_result(raw: dict[str, Any], where: str, names: Mapping[str, str]) -> ToolResultBlock:
    call_id = raw.get("id")
    output = raw.get("output", "")
    if not isinstance(output, str):
        output = _read_blocks(output, f"{where}.output")
    return ToolResultBlock.model_validate(
        {
            "tool_call_id": call_id,
            "name": result_name(raw, call_id, names),
            "output": output,
            "is_error": raw.get("state") in ERROR_STATES,
        }
    )


# -- block writers -------------------------------------------------------------------------


def _stamped(block: dict[str, Any], index: str, ctx: WriteContext) -> dict[str, Any]:
    return {**block, "id": f"{ctx.msg_id}.{index}", "created_at": ctx.stamp, "finished_at": None}


def _write_thinking(block: ThinkingBlock, index: str, ctx: WriteContext) -> dict[str, Any]:
    written = _stamped({"type": "thinking", "thinking": block.thinking}, index, ctx)
    extra = jsonable(block.extra or {})
    written.update({k: v for k, v in extra.items() if k not in _THINKING_FIELDS})
    if block.signature is not None:
        written["signature"] = block.signature
    return written


def _write_tool_call(block: ToolCallBlock, ctx: WriteContext) -> dict[str, Any]:
    arguments = block.raw_input if block.raw_input is not None else dump_input(block.input)
    return {
        "type": "tool_call",
        "id": block.id,
        "name": block.name,
        "input": arguments,
        # The library flips a call to "finished" when its result is in the same reply.
        "state": "finished" if block.id in ctx.answered else "pending",
        "suggested_rules": [],
        "created_at": ctx.stamp,
        "finished_at": None,
    }


def _write_data(
    block: ImageBlock | AudioBlock | VideoBlock | FileBlock, index: str, ctx: WriteContext
) -> dict[str, Any]:
    source = block.source
    if isinstance(source, URLSource):
        media_type = source.media_type or _DEFAULT_MEDIA_TYPE[block.type]
        written_source = {"type": "url", "url": source.url, "media_type": media_type}
    else:
        written_source = {"type": "base64", "data": source.data, "media_type": source.media_type}
    return {
        "type": "data",
        "id": f"{ctx.msg_id}.{index}",
        "source": written_source,
        "name": block.filename if isinstance(block, FileBlock) else None,
        "created_at": ctx.stamp,
        "finished_at": None,
    }
