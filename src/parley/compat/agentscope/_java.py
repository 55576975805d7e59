"""AgentScope's Java form: `io.agentscope.core.message.Msg` as Jackson writes it.

Key names follow the seed document's serialization example and, where it shows none, the
`@JsonProperty` names of agentscope-java's classes (`Base64Source.media_type`, the tool result's
call id as `id`, the raw argument string of a tool use as `content`, usage in `metadata` under
`_chat_usage` as `Msg.getChatUsage()` reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from parley import messages as pm
from parley.compat.agentscope import _common as common
from parley.compat.agentscope._python import ERROR_STATES
from parley.errors import MessageError

_KNOWN = ("text", "thinking", "image", "audio", "video", "data", "hint", "tool_use", "tool_result")
_MEDIA: dict[str, type[pm.ImageBlock | pm.AudioBlock | pm.VideoBlock]] = {
    "image": pm.ImageBlock,
    "audio": pm.AudioBlock,
    "video": pm.VideoBlock,
}
_USAGE_KEY = "_chat_usage"  # agentscope-java MessageMetadataKeys.CHAT_USAGE
_SIGNATURE_KEY = "thoughtSignature"  # agentscope-java ThinkingBlock.METADATA_THOUGHT_SIGNATURE
# The seed's builder calls the link `toolUseId`; agentscope-java serializes it as `id`.
_CALL_ID_KEYS = ("id", "toolUseId", "tool_use_id")


class JavaForm:
    """Reads and writes agentscope-java messages."""

    form: common.Form = "java"

    # -- reading ---------------------------------------------------------------------------

    def read_head(self, data: dict[str, Any]) -> common.Head:
        """Read `name`, `role`, `id`, `timestamp` and `metadata` (usage within it)."""
        metadata = common.read_metadata(data.get("metadata"))
        usage = _read_usage(metadata.get(_USAGE_KEY))
        if usage is not None:
            del metadata[_USAGE_KEY]
        return common.Head(
            role=common.read_role(data.get("role"), self.form),
            name=data.get("name"),
            id=data.get("id"),
            created_at=common.parse_time(data.get("timestamp"), "timestamp"),
            metadata=metadata,
            usage=usage,
        )

    def read_item(
        self, raw: Any, where: str, names: Mapping[str, str]
    ) -> common.Item | list[common.Item]:
        """Read one content block; a text's `<think>` spans become thinking blocks (seed 004)."""
        tag = common.block_type(raw, where)
        if tag == "text" and isinstance(raw.get("text"), str) and pm.has_think_tags(raw["text"]):
            return list(pm.split_think(raw["text"]))
        if tag == "tool_use":
            return pm.ToolCallBlock.model_validate(
                {
                    "id": raw.get("id"),
                    "name": raw.get("name"),
                    "input": {} if raw.get("input") is None else raw.get("input"),
                    "raw_input": raw.get("content"),
                }
            )
        if tag == "tool_result":
            return _read_tool_result(raw, where, names)
        if tag == "thinking":
            return _read_thinking(raw)
        if tag == "hint":
            hint = raw.get("hint")
            content: list[pm.Block] = (
                [pm.TextBlock(text=hint)] if isinstance(hint, str) else _read_blocks(hint, where)
            )
            return common.Hint(source=raw.get("source"), content=content)
        if tag in _KNOWN:
            return _read_output(raw, where)
        raise common.unknown_block(tag, where, self.form, _KNOWN)

    # -- writing ---------------------------------------------------------------------------

    def write_message(
        self,
        head: pm.Msg,
        content: list[dict[str, Any]],
        metadata: dict[str, Any],
        hint_head: bool,
    ) -> dict[str, Any]:
        """Write the message in the seed's key order: name, role, content, metadata, id, ..."""
        if head.usage is not None:
            metadata[_USAGE_KEY] = {
                "inputTokens": head.usage.input_tokens,
                "outputTokens": head.usage.output_tokens,
                "time": head.usage.elapsed,
            }
        written = {} if head.name is None else {"name": head.name}
        return {
            **written,
            "role": "ASSISTANT" if hint_head else head.role.upper(),
            "content": content,
            "metadata": metadata,
            "id": head.id,
            "timestamp": common.format_time(head.created_at),
        }

    def write_block(self, block: pm.Block, index: str, ctx: common.WriteContext) -> dict[str, Any]:
        """Write one content block."""
        if isinstance(block, pm.TextBlock):
            return {"type": "text", "text": block.text}
        if isinstance(block, pm.ThinkingBlock):
            return _write_thinking(block)
        if isinstance(block, pm.ToolCallBlock):
            return _write_tool_use(block)
        if isinstance(block, pm.ToolResultBlock):
            return self._write_tool_result(block, index, ctx)
        if isinstance(block, pm.FileBlock):
            return _write_file(block)
        return {"type": block.type, "source": _write_source(block.source)}

    def write_hint(self, piece: pm.Msg, index: str, ctx: common.WriteContext) -> dict[str, Any]:
        """Write a hint block (text; the patch keeps anything else)."""
        written: dict[str, Any] = {"type": "hint", "hint": piece.text}
        if piece.name is not None:
            written["source"] = piece.name
        return written

    def _write_tool_result(
        self, block: pm.ToolResultBlock, index: str, ctx: common.WriteContext
    ) -> dict[str, Any]:
        # Java's output is always a list of blocks.
        output = (
            [pm.TextBlock(text=block.output)] if isinstance(block.output, str) else block.output
        )
        return {
            "type": "tool_result",
            "id": block.tool_call_id,
            "name": block.name,
            "output": [self.write_block(b, f"{index}.{j}", ctx) for j, b in enumerate(output)],
            "state": "error" if block.is_error else "success",
        }


def _read_usage(value: Any) -> pm.Usage | None:
    # Only a usage agentscope-java could have written is taken; anything else stays metadata.
    try:
        return common.read_usage(
            value, input_tokens="inputTokens", output_tokens="outputTokens", elapsed="time"
        )
    except (MessageError, ValidationError):
        return None


def _read_thinking(raw: dict[str, Any]) -> pm.ThinkingBlock:
    metadata = raw.get("metadata")
    extra = dict(metadata) if isinstance(metadata, dict) else {}
    signature = extra.get(_SIGNATURE_KEY)
    if isinstance(signature, str):
        del extra[_SIGNATURE_KEY]
    else:
        signature = None
    return pm.ThinkingBlock.model_validate(
        {"thinking": raw.get("thinking"), "signature": signature, "extra": extra or None}
    )


def _read_output(raw: Any, where: str) -> pm.Block:
    tag = common.block_type(raw, where)
    if tag == "text":
        return pm.TextBlock.model_validate({"text": raw.get("text")})
    source = common.read_source(raw.get("source"), where)
    if tag in _MEDIA:
        return _MEDIA[tag].model_validate({"source": source})
    if tag == "data":
        family = common.source_family(raw.get("source")) or (source.media_type or "")
        return common.media_block(source, family, raw.get("name"))
    raise MessageError(f"{where} has type {tag!r}; tool output and hints hold text and media")


def _read_blocks(value: Any, where: str) -> list[pm.Block]:
    if not isinstance(value, list):
        raise MessageError(f"{where} must be a string or a list of blocks")
    return [_read_output(b, f"{where}[{j}]") for j, b in enumerate(value)]


def _read_tool_result(
    raw: dict[str, Any], where: str, names: Mapping[str, str]
) -> pm.ToolResultBlock:
    call_id = next((raw[k] for k in _CALL_ID_KEYS if raw.get(k) is not None), None)
    output = raw.get("output")
    if isinstance(output, list):
        blocks = _read_blocks(output, f"{where}.output")
        # One text block is parley's plain string output.
        one_text = len(blocks) == 1 and isinstance(blocks[0], pm.TextBlock)
        output = blocks[0].text if one_text else blocks  # type: ignore[union-attr]
    return pm.ToolResultBlock.model_validate(
        {
            "tool_call_id": call_id,
            "name": common.result_name(raw, call_id, names),
            "output": "" if output is None else output,
            "is_error": raw.get("state") in ERROR_STATES,
        }
    )


def _write_thinking(block: pm.ThinkingBlock) -> dict[str, Any]:
    written: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
    if block.extra is not None or block.signature is not None:
        metadata = common.jsonable(block.extra or {})
        if block.signature is not None:
            metadata[_SIGNATURE_KEY] = block.signature
        written["metadata"] = metadata
    return written


def _write_tool_use(block: pm.ToolCallBlock) -> dict[str, Any]:
    written = {
        "type": "tool_use",
        "id": block.id,
        "name": block.name,
        "input": common.jsonable(block.input),
    }
    if block.raw_input is not None:
        written["content"] = block.raw_input
    return written


def _write_file(block: pm.FileBlock) -> dict[str, Any]:
    written = {"type": "data", "source": _write_source(block.source)}
    if block.filename is not None:
        written["name"] = block.filename
    return written


def _write_source(source: pm.URLSource | pm.Base64Source) -> dict[str, Any]:
    if isinstance(source, pm.Base64Source):
        return {"type": "base64", "media_type": source.media_type, "data": source.data}
    return {"type": "url", "url": source.url}  # Java's URLSource has no media type
