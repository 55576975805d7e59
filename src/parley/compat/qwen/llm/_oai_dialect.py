"""OpenAI's chat messages and Qwen-Agent's, both ways, for `BaseChatModel.quick_chat_oai`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parley.compat.qwen.schema import ASSISTANT, FUNCTION, FunctionCall, Message

__all__ = ["from_oai", "to_oai"]


def from_oai(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """OpenAI-style dicts as Qwen messages: an assistant's tool calls become one message each."""
    out: list[Message] = []
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            extra = {"function_id": msg["tool_call_id"]} if msg.get("tool_call_id") else None
            out.append(
                Message(FUNCTION, msg.get("content") or "", name=msg.get("name"), extra=extra)
            )
        elif role == ASSISTANT:
            out += _assistant(msg)
        else:
            out.append(Message.model_validate({k: v for k, v in msg.items() if v is not None}))
    return out


def _assistant(msg: Mapping[str, Any]) -> list[Message]:
    out = []
    if msg.get("reasoning_content"):
        out.append(Message(ASSISTANT, "", reasoning_content=msg["reasoning_content"]))
    if msg.get("content"):
        out.append(Message(ASSISTANT, msg["content"]))
    for call in msg.get("tool_calls") or ():
        function = call["function"]
        out.append(
            Message(
                ASSISTANT,
                "",
                function_call=FunctionCall.partial(
                    function["name"], function.get("arguments") or "{}"
                ),
                extra={"function_id": call["id"]} if call.get("id") else None,
            )
        )
    return out or [Message(ASSISTANT, "")]


def to_oai(response: Sequence[Message | Mapping[str, Any]]) -> dict[str, Any]:
    """A response so far as an OpenAI chat completion (usage not counted: zeros)."""
    message: dict[str, Any] = {
        "role": ASSISTANT,
        "content": "",
        "reasoning_content": "",
        "tool_calls": [],
    }
    for item in response:
        msg = item if isinstance(item, Message) else Message.model_validate(item)
        if msg.reasoning_content:
            message["reasoning_content"] += str(msg.reasoning_content)
        if msg.content:
            message["content"] += str(msg.content)
        if msg.function_call is not None:
            calls = message["tool_calls"]
            function_id = (msg.extra or {}).get("function_id")
            calls.append(
                {
                    "id": function_id or str(len(calls) + 1),
                    "type": "function",
                    "function": {
                        "name": msg.function_call.name,
                        "arguments": msg.function_call.arguments,
                    },
                }
            )
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    return {"choices": [{"message": message}], "usage": usage}
