"""AgentScope 2.x's Python form: `agentscope.message.Msg.model_dump(mode="json")`.

Messages are written with every key the library's own dump has, so that the library reads
them and dumps them back unchanged. Block ids the library would generate are derived from the
message id (`<msg id>.<index>`) and block times are the message's, so that writing is
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley import messages as pm
from parley.compat.agentscope import _common as common
from parley.errors import MessageError

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

    form: common.Form = "python"

    # -- reading ---------------------------------------------------------------------------

    def read_head(self, data: dict[str, Any]) -> common.Head:
        """Read `name`, `role`, `id`, `created_at`, `metadata` and `usage`."""
        usage = common.read_usage(
            data.get("usage"),
            input_tokens="input_tokens",
            output_tokens="output_tokens",
            cached_tokens="cache_input_tokens",
        )
        return common.Head(
            role=common.read_role(data.get("role"), self.form),
            name=data.get("name"),
            id=data.get("id"),
            created_at=common.parse_time(data.get("created_at"), "created_at"),
            metadata=common.read_metadata(data.get("metadata")),
            usage=usage,
        )

    def read_item(self, raw: Any, where: str, names: Mapping[str, str]) -> common.Item:
        """Read one content block."""
        tag = common.block_type(raw, where)
        if tag == "text":
            return pm.TextBlock.model_validate({"text": raw.get("text")})
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
        raise common.unknown_block(tag, where, self.form, _KNOWN)

    # -- writing ---------------------------------------------------------------------------

    def write_message(
        self,
        head: pm.Msg,
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
            "created_at": common.format_time(head.created_at),
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

    def write_block(self, block: pm.Block, index: str, ctx: common.WriteContext) -> dict[str, Any]:
        """Write one content block."""
        if isinstance(block, pm.TextBlock):
            return _stamped({"type": "text", "text": block.text}, index, ctx)
        if isinstance(block, pm.ThinkingBlock):
            return _write_thinking(block, index, ctx)
        if isinstance(block, pm.ToolCallBlock):
            return _write_tool_call(block, ctx)
        if isinstance(block, pm.ToolResultBlock):
            return self._write_tool_result(block, index, ctx)
        return _write_data(block, index, ctx)

    def write_hint(self, piece: pm.Msg, index: str, ctx: common.WriteContext) -> dict[str, Any]:
        """Write a hint block from the user message it was read into."""
        content = piece.content
        hint: Any
        if len(content) == 1 and isinstance(content[0], pm.TextBlock):
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
        self, block: pm.ToolResultBlock, index: str, ctx: common.WriteContext
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


def _read_thinking(raw: dict[str, Any]) -> pm.ThinkingBlock:
    # The library's ThinkingBlock keeps unknown keys (extra="allow"): Anthropic's `signature`,
    # `redacted_thinking_data`, ...
    extra = {k: v for k, v in raw.items() if k not in _THINKING_FIELDS}
    signature = extra.pop("signature") if isinstance(extra.get("signature"), str) else None
    return pm.ThinkingBlock.model_validate(
        {"thinking": raw.get("thinking"), "signature": signature, "extra": extra or None}
    )


def _read_data(raw: dict[str, Any], where: str) -> pm.Block:
    source = common.read_source(raw.get("source"), where)
    family = common.source_family(raw.get("source")) or (source.media_type or "")
    return common.media_block(source, family, raw.get("name"))


def _read_output(raw: Any, where: str) -> pm.Block:
    tag = common.block_type(raw, where)
    if tag == "text":
        return pm.TextBlock.model_validate({"text": raw.get("text")})
    if tag == "data":
        return _read_data(raw, where)
    raise MessageError(f"{where} has type {tag!r}; tool output and hints hold text and data")


def _read_blocks(value: Any, where: str) -> list[pm.Block]:
    if not isinstance(value, list):
        raise MessageError(f"{where} must be a string or a list of blocks")
    return [_read_output(b, f"{where}[{j}]") for j, b in enumerate(value)]


def _read_hint(raw: dict[str, Any], where: str) -> common.Hint:
    hint = raw.get("hint")
    content: list[pm.Block] = (
        [pm.TextBlock(text=hint)] if isinstance(hint, str) else _read_blocks(hint, where)
    )
    return common.Hint(source=raw.get("source"), content=content)


def _read_tool_call(raw: dict[str, Any]) -> pm.ToolCallBlock:
    arguments = raw.get("input")
    if isinstance(arguments, str):
        parsed, raw_input = common.parse_input(arguments)
        fields = {"input": parsed, "raw_input": raw_input}
    else:  # not the library's form, but plain enough: arguments given as an object
        fields = {"input": arguments}
    return pm.ToolCallBlock.model_validate({"id": raw.get("id"), "name": raw.get("name"), **fields})


def _read_tool_result(
    raw: dict[str, Any], where: str, names: Mapping[str, str]
) -> pm.ToolResultBlock:
    call_id = raw.get("id")
    output = raw.get("output", "")
    if not isinstance(output, str):
        output = _read_blocks(output, f"{where}.output")
    return pm.ToolResultBlock.model_validate(
        {
            "tool_call_id": call_id,
            "name": common.result_name(raw, call_id, names),
            "output": output,
            "is_error": raw.get("state") in ERROR_STATES,
        }
    )


# -- block writers -------------------------------------------------------------------------


def _stamped(block: dict[str, Any], index: str, ctx: common.WriteContext) -> dict[str, Any]:
    return {**block, "id": f"{ctx.msg_id}.{index}", "created_at": ctx.stamp, "finished_at": None}


def _write_thinking(
    block: pm.ThinkingBlock, index: str, ctx: common.WriteContext
) -> dict[str, Any]:
    written = _stamped({"type": "thinking", "thinking": block.thinking}, index, ctx)
    extra = common.jsonable(block.extra or {})
    written.update({k: v for k, v in extra.items() if k not in _THINKING_FIELDS})
    if block.signature is not None:
        written["signature"] = block.signature
    return written


def _write_tool_call(block: pm.ToolCallBlock, ctx: common.WriteContext) -> dict[str, Any]:
    arguments = block.raw_input if block.raw_input is not None else common.dump_input(block.input)
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
    block: pm.ImageBlock | pm.AudioBlock | pm.VideoBlock | pm.FileBlock,
    index: str,
    ctx: common.WriteContext,
) -> dict[str, Any]:
    source = block.source
    if isinstance(source, pm.URLSource):
        media_type = source.media_type or _DEFAULT_MEDIA_TYPE[block.type]
        written_source = {"type": "url", "url": source.url, "media_type": media_type}
    else:
        written_source = {"type": "base64", "data": source.data, "media_type": source.media_type}
    return {
        "type": "data",
        "id": f"{ctx.msg_id}.{index}",
        "source": written_source,
        "name": block.filename if isinstance(block, pm.FileBlock) else None,
        "created_at": ctx.stamp,
        "finished_at": None,
    }
