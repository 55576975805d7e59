"""parley's messages as LangChain's message dicts (what LangGraph's server sends), and back.

Out (`message_dicts`): a user message is `human`, the instructions `system`, an assistant
message `ai` (its text as `content`, its calls as `tool_calls`, its usage as
`usage_metadata`, its thinking as `additional_kwargs.reasoning_content`), and each tool
result a `tool` message of its own (`tool_call_id`, `status` "error" for a failed call).
Streamed pieces are `AIMessageChunk`s (`ai_chunk`), all chunks of one message sharing an id.

In (`input_messages`): LangChain's `{"type": "human", ...}` and OpenAI's
`{"role": "user", ...}` alike, with string content or a list of blocks (`text`,
`image_url`, LangChain's `image` with a `url`). An id the client gave is kept (useStream
matches its optimistic message by it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from parley.errors import MessageError
from parley.messages import ImageBlock, Msg, TextBlock, ToolCallBlock
from parley.messages.blocks import source_from_str

__all__ = [
    "ai_chunk",
    "input_messages",
    "message_dicts",
    "messages_of",
    "tool_call_dict",
    "usage_metadata",
]

_MAX_ID = 64  # the store's message id column
_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
}


def tool_call_dict(call: ToolCallBlock) -> dict[str, Any]:
    """A call as LangChain's `ToolCall`."""
    return {"name": call.name, "args": dict(call.input), "id": call.id, "type": "tool_call"}


def usage_metadata(msg: Msg) -> dict[str, Any] | None:
    """A message's usage as LangChain's `usage_metadata` (None when it has none)."""
    usage = msg.usage
    if usage is None:
        return None
    data: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens:
        data["input_token_details"] = {"cache_read": usage.cached_tokens}
    return data


def _base(kind: str, content: Any, msg_id: str, name: str | None) -> dict[str, Any]:
    return {
        "content": content,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": kind,
        "name": name,
        "id": msg_id,
    }


def _content(msg: Msg) -> str | list[dict[str, Any]]:
    """Text alone as a string (as LangChain keeps it); with pictures, a list of blocks."""
    if not msg.has_blocks(ImageBlock):
        return msg.text
    blocks: list[dict[str, Any]] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            blocks.append({"type": "image_url", "image_url": {"url": _url(block)}})
    return blocks


def _url(block: ImageBlock) -> str:
    source = block.source
    if source.type == "url":
        return str(source.url)
    return f"data:{source.media_type};base64,{source.data}"


def message_dicts(msg: Msg) -> list[dict[str, Any]]:
    """One parley message as LangChain message dicts (a tool message: one per result)."""
    if msg.role == "user":
        return [_base("human", _content(msg), msg.id, msg.name)]
    if msg.role == "system":
        return [_base("system", msg.text, msg.id, msg.name)]
    if msg.role == "assistant":
        data = _base("ai", _content(msg), msg.id, msg.name)
        if msg.thinking:
            data["additional_kwargs"]["reasoning_content"] = msg.thinking
        data["tool_calls"] = [tool_call_dict(c) for c in msg.tool_calls]
        data["invalid_tool_calls"] = []
        data["usage_metadata"] = usage_metadata(msg)
        return [data]
    out = []
    for index, result in enumerate(msg.tool_results):
        output = result.output
        text = output if isinstance(output, str) else _output_text(output)
        data = _base("tool", text, msg.id if index == 0 else f"{msg.id}-{index}", result.name)
        data["tool_call_id"] = result.tool_call_id
        data["artifact"] = None
        data["status"] = "error" if result.is_error else "success"
        out.append(data)
    return out


def _output_text(blocks: Sequence[Any]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def messages_of(msgs: Iterable[Msg]) -> list[dict[str, Any]]:
    """Messages as LangChain message dicts, in order."""
    return [data for msg in msgs for data in message_dicts(msg)]


def ai_chunk(
    msg_id: str,
    *,
    content: str = "",
    tool_calls: Sequence[dict[str, Any]] = (),
    tool_call_chunks: Sequence[dict[str, Any]] = (),
    usage: dict[str, Any] | None = None,
    last: bool = False,
) -> dict[str, Any]:
    """A streamed piece of an assistant message, as LangChain's `AIMessageChunk` dict."""
    data = _base("AIMessageChunk", content, msg_id, None)
    data.update(
        tool_calls=list(tool_calls),
        invalid_tool_calls=[],
        usage_metadata=usage,
        tool_call_chunks=list(tool_call_chunks),
        chunk_position="last" if last else None,
    )
    return data


# -- in ------------------------------------------------------------------------------------


def input_messages(items: Any) -> list[Msg]:
    """The messages of a run's `input.messages` (or a lone message, or a string).

    Raises:
        MessageError: An item that is no message parley can read (says which, and why).
    """
    if isinstance(items, (str, Mapping)):
        items = [items]
    if not isinstance(items, list):
        raise MessageError("input.messages must be a list of messages")
    return [_message(item, index) for index, item in enumerate(items)]


def _message(item: Any, index: int) -> Msg:
    if isinstance(item, str):
        return Msg.user(item)
    if not isinstance(item, Mapping):
        raise MessageError(f"input.messages[{index}] is not a message object")
    kind = item.get("type", item.get("role"))
    role = _ROLES.get(str(kind).removesuffix("MessageChunk").removesuffix("Message").lower())
    if role is None:
        raise MessageError(
            f"input.messages[{index}] has type/role {kind!r}: use human, ai, system or tool "
            "(or OpenAI's user, assistant, system, tool)"
        )
    fields: dict[str, Any] = {}
    given = item.get("id")
    if isinstance(given, str) and 0 < len(given) <= _MAX_ID:
        fields["id"] = given
    if isinstance(item.get("name"), str):
        fields["name"] = item["name"]
    try:
        return _build(role, item, fields)
    except (ValueError, TypeError) as exc:
        raise MessageError(f"input.messages[{index}]: {exc}") from None


def _build(role: str, item: Mapping[str, Any], fields: dict[str, Any]) -> Msg:
    blocks = _blocks(item.get("content", ""))
    if role == "tool":
        text = "".join(b.text for b in blocks if isinstance(b, TextBlock))
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str):
            raise ValueError("a tool message needs its tool_call_id")
        name = item["name"] if isinstance(item.get("name"), str) else "tool"
        fields.pop("name", None)
        failed = item.get("status") == "error"
        return Msg.tool_result(call_id, text, name=name, is_error=failed, **fields)
    if role == "assistant":
        calls = [_call(c) for c in item.get("tool_calls") or []]
        return Msg.assistant(*blocks, *calls, **fields)
    if role == "system":
        return Msg.system(*[b for b in blocks if isinstance(b, TextBlock)], **fields)
    return Msg.user(*blocks, **fields)


def _call(call: Any) -> ToolCallBlock:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise ValueError("a tool call needs a name")
    args = call.get("args", call.get("arguments", {}))
    if isinstance(args, str):
        args = json.loads(args or "{}")
    return ToolCallBlock(id=str(call.get("id") or ""), name=call["name"], input=args)


def _blocks(content: Any) -> list[TextBlock | ImageBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    if not isinstance(content, list):
        raise ValueError("content must be a string or a list of blocks")
    out: list[TextBlock | ImageBlock] = []
    for block in content:
        if isinstance(block, str):
            out.append(TextBlock(text=block))
            continue
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            out.append(TextBlock(text=str(block.get("text", ""))))
        elif kind in ("image_url", "image"):
            out.append(ImageBlock(source=source_from_str(_image_url(block))))
        else:
            raise ValueError(f"content block type {kind!r} is not supported (text, image_url)")
    return out


def _image_url(block: Mapping[str, Any]) -> str:
    value = block.get("image_url", block.get("url"))
    if isinstance(value, Mapping):
        value = value.get("url")
    if block.get("type") == "image" and isinstance(block.get("data"), str):
        value = f"data:{block.get('mime_type', 'image/png')};base64,{block['data']}"
    if not isinstance(value, str):
        raise ValueError("an image block needs a url (or base64 data)")
    return value
