r"""Messages for llama.cpp's chat handlers: ChatML text turns with `functions.<name>:` calls.

(Models whose template renders tools in their own format get theirs from `_tool_formats`.)

Two templates read these messages. The GGUF's own template (plain chat) concatenates each
message's `content`, so content is always a string. llama-cpp-python's
`chatml-function-calling` template renders an assistant's `tool_calls` as
`functions.<name>:\n<arguments>`, but has no branch for the `tool` role (it would emit an
empty, unterminated turn), so tool results go in as user turns that name the function.
That template also lists the functions only inside a system message, and without their
descriptions: `with_tool_guide` makes sure there is one, and adds what each function does.
It also renders with HTML autoescaping (hard-coded in llama-cpp-python), which would show the
model `&#34;` and `&#39;` for the quotes in every turn, tool calls and results included:
`for_function_calling` marks the text as markup, which jinja2 renders as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from parley.errors import MissingDependencyError, UserError
from parley.messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from parley.models.tools import ToolSpec

__all__ = ["DEFAULT_SYSTEM", "for_function_calling", "format_messages", "with_tool_guide"]

DEFAULT_SYSTEM = "You are a helpful assistant."
"""The system message added to hold the function list when a conversation has none."""

_TEXT_ONLY = {"text", "thinking", "tool_call", "tool_result"}


def _check_text_only(msg: Msg) -> None:
    for block in msg.content:
        if block.type not in _TEXT_ONLY:
            raise UserError(
                f"the local model reads text only; a {msg.role} message holds a {block.type} block"
            )


def _arguments(call: ToolCallBlock) -> str:
    return call.raw_input or json.dumps(call.input, ensure_ascii=False)


def result_body(result: ToolResultBlock) -> str:
    """A tool result's text (`UserError` if it holds media: the local model reads text only)."""
    output = result.output
    if isinstance(output, str):
        return output
    if any(not isinstance(b, TextBlock) for b in output):
        raise UserError("the local model reads text only; a tool result holds media")
    return "\n".join(b.text for b in output if isinstance(b, TextBlock))


def _result_text(result: ToolResultBlock) -> str:
    verb = "failed" if result.is_error else "returned"
    return f"functions.{result.name} {verb}:\n{result_body(result)}"


def _assistant(msg: Msg, native_tools: bool) -> dict[str, Any]:
    calls = msg.tool_calls
    if not calls:
        return {"role": "assistant", "content": msg.text}
    if not native_tools:
        lines = [msg.text] if msg.text else []
        lines += [f"functions.{c.name}:\n{_arguments(c)}" for c in calls]
        return {"role": "assistant", "content": "\n".join(lines)}
    # The template writes calls back to back; a newline keeps each on its own line, as the
    # model writes them. Text beside calls is dropped: the template would close the turn twice.
    last = len(calls) - 1
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": _arguments(c) + ("\n" if i < last else ""),
                },
            }
            for i, c in enumerate(calls)
        ],
    }


def format_messages(msgs: Sequence[Msg], *, native_tools: bool) -> list[dict[str, Any]]:
    """The llama-cpp-python messages for `msgs`.

    Args:
        msgs: The conversation.
        native_tools: Whether the `chatml-function-calling` template renders the turns (tool
            calls as `tool_calls`), or the GGUF's own template (tool calls as text).

    Raises:
        UserError: A message holds media, which the local model cannot read.
    """
    return text_turns(
        msgs,
        assistant=lambda msg: _assistant(msg, native_tools),
        tool=lambda msg: [{"role": "user", "content": _result_text(r)} for r in msg.tool_results],
    )


def text_turns(
    msgs: Sequence[Msg],
    *,
    assistant: Callable[[Msg], dict[str, Any]],
    tool: Callable[[Msg], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The chat template's messages for `msgs`, the others' turns as their text.

    `assistant` and `tool` make those turns' messages (each tool format its own).

    Raises:
        UserError: A message holds media, which the local model cannot read.
    """
    out: list[dict[str, Any]] = []
    for msg in msgs:
        _check_text_only(msg)
        if msg.role == "assistant":
            out.append(assistant(msg))
        elif msg.role == "tool":
            out += tool(msg)
        else:
            out.append({"role": msg.role, "content": msg.text})
    return out


def with_tool_guide(
    messages: list[dict[str, Any]], tools: Sequence[ToolSpec]
) -> list[dict[str, Any]]:
    """`messages` with a system message that says what each function does.

    `chatml-function-calling` renders the functions' names and parameters after the content
    of each system message, and nothing at all when there is none.
    """
    described = [f"functions.{t.name}: {t.description}" for t in tools if t.description]
    guide = "\n\nWhat the functions do:\n" + "\n".join(described) if described else ""
    if messages and messages[0].get("role") == "system":
        first = {**messages[0], "content": f"{messages[0].get('content') or ''}{guide}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": DEFAULT_SYSTEM + guide}, *messages]


def for_function_calling(
    messages: list[dict[str, Any]], tools: Sequence[ToolSpec]
) -> list[dict[str, Any]]:
    """`messages` as `chatml-function-calling` must get them: with the tool guide, unescaped.

    Their text (contents, call arguments) is marked as markup, which the template's HTML
    autoescaping leaves as it is. The functions' JSON schemas still go through its `tojson`,
    which writes `'`, `<`, `>` and `&` as JSON unicode escapes: the same JSON, not entities.

    Raises:
        MissingDependencyError: markupsafe (jinja2's, so llama-cpp-python's) is missing.
    """
    try:
        from markupsafe import Markup  # noqa: PLC0415  (installed with llama-cpp-python)
    except ImportError:
        raise MissingDependencyError("llama_cpp", "local") from None

    def verbatim(value: Any) -> Any:
        return Markup(value) if isinstance(value, str) else value

    def call(tool_call: dict[str, Any]) -> dict[str, Any]:
        function = tool_call.get("function") or {}
        arguments = verbatim(function.get("arguments"))
        return {**tool_call, "function": {**function, "arguments": arguments}}

    out: list[dict[str, Any]] = []
    for message in with_tool_guide(messages, tools):
        marked = {**message, "content": verbatim(message.get("content"))}
        if message.get("tool_calls"):
            marked["tool_calls"] = [call(c) for c in message["tool_calls"]]
        out.append(marked)
    return out
