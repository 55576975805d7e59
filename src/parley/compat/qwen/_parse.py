"""A group of Qwen messages read as the parts of one `Msg`, before parley's record is applied."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from parley.compat.qwen._groups import FID, KEY, Context, generated_call_id, parts
from parley.compat.qwen._media import (
    ContentBlock,
    block_from_item,
    call_input,
    thinking_from_item,
)
from parley.compat.qwen.schema import ASSISTANT, FUNCTION, SYSTEM, ContentItem, Message
from parley.errors import MessageError
from parley.messages import Block, Role, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock

__all__ = ["ListField", "Parsed", "is_str_form", "parse_group"]

ListField = Literal["content", "reasoning_content"]


@dataclass
class Parsed:
    """What a group of Qwen messages says, in parley's terms.

    `blocks` are in the canonical order (thinking, then text and media, then tool calls);
    `shape` lists each message's `parts`; `lists` names the fields written as a list where
    one string would do (`[]` for `""`, `[{"text": "hi"}]` for `"hi"`).
    """

    role: Role
    name: str | None
    blocks: list[Block]
    metadata: dict[str, Any]
    shape: list[str]
    lists: list[tuple[int, ListField]] = field(default_factory=list)


def is_str_form(blocks: list[Any], where: ListField) -> bool:
    """Whether the canonical form of these blocks in that field is a string, not a list."""
    if where == "reasoning_content":
        return len(blocks) == 1
    return not blocks or (
        len(blocks) == 1 and isinstance(blocks[0], TextBlock) and bool(blocks[0].text)
    )


def parse_group(group: list[Message], ctx: Context) -> Parsed:
    """Read one group of Qwen messages; calls and results update `ctx.tracker`.

    Raises:
        MessageError: The messages hold something a `Msg` cannot (a function call outside an
            assistant message, media in reasoning, a result answering no call...).
    """
    first = group[0]
    metadata = {k: v for k, v in (first.extra or {}).items() if k not in (FID, KEY)}
    if first.role == FUNCTION:
        results: list[Block] = [_result(message, ctx) for message in group]
        return Parsed("tool", None, results, metadata, ["c"] * len(group))
    if first.role == ASSISTANT:
        return _assistant(group, ctx, metadata)
    _check_no_model_parts(first)
    blocks = _content_blocks(first.content)
    role: Role = "system" if first.role == SYSTEM else "user"
    parsed = Parsed(role, first.name, list(blocks), metadata, ["c"])
    _note_list(parsed, 0, "content", first.content, blocks)
    return parsed


def _check_no_model_parts(message: Message) -> None:
    for name in ("function_call", "reasoning_content"):
        if getattr(message, name) is not None:
            raise MessageError(
                f"a {message.role} message cannot hold {name}; only assistant messages can"
            )


def _assistant(group: list[Message], ctx: Context, metadata: dict[str, Any]) -> Parsed:
    parsed = Parsed("assistant", group[0].name, [], metadata, [])
    for i, message in enumerate(group):
        held = parts(message)
        parsed.shape.append(held)
        if "r" in held:
            thinking = _thinking_blocks(message.reasoning_content)
            parsed.blocks.extend(thinking)
            _note_list(parsed, i, "reasoning_content", message.reasoning_content, thinking)
        content = _content_blocks(message.content)
        parsed.blocks.extend(content)
        _note_list(parsed, i, "content", message.content, content)
        if "f" in held:
            parsed.blocks.append(_call(message, ctx, ctx.index + i))
    return parsed


def _note_list(
    parsed: Parsed, index: int, where: ListField, value: object, blocks: list[Any]
) -> None:
    if isinstance(value, list) and is_str_form(blocks, where):
        parsed.lists.append((index, where))


def _content_blocks(content: str | list[ContentItem]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    return [block_from_item(item) for item in content]


def _thinking_blocks(reasoning: str | list[ContentItem] | None) -> list[ThinkingBlock]:
    if isinstance(reasoning, str):
        return [ThinkingBlock(thinking=reasoning)]
    return [thinking_from_item(item) for item in reasoning or []]


def _function_id(message: Message) -> str | None:
    value = (message.extra or {}).get(FID)
    if value is not None and not isinstance(value, str):
        raise MessageError(f"extra['{FID}'] must be a string, got {value!r:.80}")
    return value


def _call(message: Message, ctx: Context, index: int) -> ToolCallBlock:
    call = message.function_call
    assert call is not None  # only called for messages holding a call
    function_id = _function_id(message)
    call_id = function_id if function_id is not None else generated_call_id(index)
    arguments, raw = call_input(call.arguments)
    ctx.tracker.add(call_id, call.name, explicit=function_id is not None)
    return ToolCallBlock(id=call_id, name=call.name, input=arguments, raw_input=raw)


def _result(message: Message, ctx: Context) -> ToolResultBlock:
    _check_no_model_parts(message)
    function_id = _function_id(message)
    paired = ctx.tracker.answer(function_id, message.name)
    call_name: str | None = None
    if paired is not None:
        call_id, call_name = paired
    elif function_id is not None:  # answers a call made before the list began
        call_id = function_id
    else:
        raise MessageError(
            f"function message {message.name!r} has no extra['{FID}'] and no earlier "
            "function_call is waiting for a result"
        )
    name = message.name if message.name is not None else call_name
    if name is None:
        raise MessageError(
            f"function message answering {call_id!r} has no name, and no earlier "
            "function_call gives one"
        )
    content = message.content
    output = content if isinstance(content, str) else [block_from_item(i) for i in content]
    return ToolResultBlock(tool_call_id=call_id, name=name, output=output)
