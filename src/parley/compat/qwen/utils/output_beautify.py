"""Printing a streamed Qwen-Agent response as it grows (`qwen_agent.utils.output_beautify`).

    text = ""
    for response in bot.run(messages):
        text = typewriter_print(response, text)

Each call renders the whole response so far as text, one section per part: `[THINK]` and the
reasoning, `[ANSWER]` and the text, `[TOOL_CALL] name` and the arguments, `[TOOL_RESPONSE]
name` and the result, and prints only what goes past `text` (what the previous call
returned), so a response streamed in snapshots prints once, like a typewriter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parley.compat.qwen.schema import ASSISTANT, FUNCTION, ContentItem, Message

__all__ = [
    "ANSWER_S",
    "THOUGHT_S",
    "TOOL_CALL_S",
    "TOOL_RESULT_S",
    "render_response",
    "typewriter_print",
]

THOUGHT_S = "[THINK]"
ANSWER_S = "[ANSWER]"
TOOL_CALL_S = "[TOOL_CALL]"
TOOL_RESULT_S = "[TOOL_RESPONSE]"


def _as_text(value: Any) -> str:
    """A content value as text: a string as it is, items by their text (media by value)."""
    if isinstance(value, str):
        return value
    parts = []
    for raw in value or []:
        item = raw if isinstance(raw, ContentItem) else ContentItem.model_validate(raw)
        parts.append(item.text if item.text is not None else str(item.value))
    return "\n".join(parts)


def _sections(message: Mapping[str, Any] | Message) -> list[str]:
    data = message.model_dump() if isinstance(message, Message) else message
    role = data.get("role")
    if role == FUNCTION:
        return [f"{TOOL_RESULT_S} {data.get('name')}\n{_as_text(data.get('content'))}"]
    if role != ASSISTANT:
        raise TypeError(
            f"typewriter_print shows a response (assistant and function messages), got a "
            f"{role!r} message"
        )
    found = []
    if data.get("reasoning_content"):
        found.append(f"{THOUGHT_S}\n{_as_text(data['reasoning_content'])}")
    if data.get("content"):
        found.append(f"{ANSWER_S}\n{_as_text(data['content'])}")
    call = data.get("function_call")
    if call:
        found.append(f"{TOOL_CALL_S} {call['name']}\n{call['arguments']}")
    return found


def render_response(messages: Sequence[Mapping[str, Any] | Message]) -> str:
    """The whole response as `typewriter_print` shows it."""
    return "\n".join(section for message in messages for section in _sections(message))


def typewriter_print(messages: Sequence[Mapping[str, Any] | Message], text: str) -> str:
    """Print what the response adds past `text`; return the whole rendering (the next `text`).

    Args:
        messages: The response so far (dicts or `Message`s): assistant and function messages.
        text: What the previous call returned ("" at first).

    Raises:
        TypeError: A message is neither an assistant's nor a function's.
    """
    full = render_response(messages)
    if full:
        print(full[len(text) :], end="", flush=True)  # noqa: T201  (printing is its job)
    return full
