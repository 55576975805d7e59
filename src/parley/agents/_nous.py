"""Qwen-Agent's `nous` tool-calling format: tools in the system prompt, calls in the text.

The model is shown its tools as JSON inside `<tools></tools>` and asked to write each call as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; past calls are written back the
same way and tool results go in user turns as `<tool_response>...</tool_response>` (as
Qwen-Agent's `NousFnCallPrompt` does, `qwen_agent/llm/fncall_prompts/nous_fncall_prompt.py`).
`NousParser` reads calls out of the model's text while it streams; `ThinkSplitter`, in front
of it, reads reasoning written in the text (`<think>...</think>`) as thinking.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from parley.messages import Block, Msg, TextBlock, ToolCallBlock, ToolResultBlock, new_call_id
from parley.models.accumulator import Delta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.tools import ToolSpec

__all__ = [
    "TOOLS_TEMPLATE",
    "NousParser",
    "ThinkSplitter",
    "held_prefix",
    "nous_messages",
    "tools_prompt",
]

OPEN, CLOSE = "<tool_call>", "</tool_call>"

TOOLS_TEMPLATE = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tool_descs}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""
"""Qwen-Agent's `FN_CALL_TEMPLATE`, word for word: the models trained on it expect it."""

_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*)', re.DOTALL)


def tools_prompt(tools: Sequence[ToolSpec], tool_choice: str | None) -> str:
    """The system prompt section that lists the tools (and asks for a call when forced)."""
    descs = "\n".join(json.dumps(t.openai(), ensure_ascii=False) for t in tools)
    text = TOOLS_TEMPLATE.format(tool_descs=descs)
    # The format has no forcing; the prompt asks, which capable models follow.
    if tool_choice == "required":
        text += "\n\nCall at least one function now."
    elif tool_choice not in (None, "auto", "none"):
        text += f"\n\nCall the function {tool_choice} now."
    return text


def _call_text(call: ToolCallBlock) -> str:
    arguments: Any = call.input
    if call.raw_input is not None:
        try:
            arguments = json.loads(call.raw_input)
        except ValueError:
            arguments = call.raw_input  # kept as the model wrote it
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}\n{body}\n{CLOSE}"


def _assistant(msg: Msg) -> Msg:
    content: list[Block] = [
        TextBlock(text=_call_text(b)) if isinstance(b, ToolCallBlock) else b for b in msg.content
    ]
    return msg.model_copy(update={"content": content})


def _responses(result: ToolResultBlock) -> list[Block]:
    blocks: list[Block] = [TextBlock(text=f"<tool_response>\n{result.text}\n</tool_response>")]
    if not isinstance(result.output, str):
        blocks += [b for b in result.output if not isinstance(b, TextBlock)]
    return blocks


def nous_messages(
    msgs: Sequence[Msg], tools: Sequence[ToolSpec], tool_choice: str | None
) -> list[Msg]:
    """`msgs` for a model without tools: calls and results as text, tools in the system."""
    out: list[Msg] = []
    responses: Msg | None = None  # the user message collecting the current tool responses
    for msg in msgs:
        if msg.role == "tool":
            blocks = [b for r in msg.tool_results for b in _responses(r)]
            if responses is None:
                responses = Msg(role="user", content=blocks)
                out.append(responses)
            else:
                responses.content.extend(blocks)
            continue
        responses = None
        out.append(_assistant(msg) if msg.role == "assistant" else msg)
    if tools and tool_choice != "none":
        out = _with_tools(out, tools_prompt(tools, tool_choice))
    return out


def _with_tools(msgs: list[Msg], section: str) -> list[Msg]:
    if msgs and msgs[0].role == "system":
        first = msgs[0]
        text = f"{first.text}\n\n{section}" if first.text else section
        return [Msg.system(text, **({"name": first.name} if first.name else {})), *msgs[1:]]
    return [Msg.system(section), *msgs]


def _load_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    import json_repair  # noqa: PLC0415  (only for calls that are not JSON)

    return json_repair.loads(text)


def _call_delta(key: int, body: str) -> ToolCallDelta | None:
    """The call written in `body` (the text between the tags), or None if it names none."""
    data = _load_object(body)
    name = data.get("name") if isinstance(data, dict) else None
    call_id = new_call_id()
    if isinstance(name, str) and name:
        arguments = data.get("arguments", data.get("parameters", {}))
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return ToolCallDelta(key, call_id, name, raw)
    # Not an object even after repair: read the name and keep the arguments raw, so that the
    # tool layer reports what is wrong to the model (as Qwen-Agent's `extract_fn` does).
    found = _NAME.search(body)
    if found is None:
        return None
    rest = _ARGUMENTS.search(body)
    raw = rest.group(1).strip().removesuffix("}").strip() if rest else ""
    return ToolCallDelta(key, call_id, found.group(1), raw)


def held_prefix(text: str, tag: str = OPEN) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


class ThinkSplitter:
    """Splits a model's text into the reasoning it writes first and its answer.

    Text opening with `<think>` is reasoning up to `</think>`, streamed as thinking as it
    comes. With `expected` (Qwen-Agent's `thought_in_content`), text without the opening tag
    is held until `</think>` shows it was reasoning, or the end shows it was the answer
    (Qwen3 served by vLLM writes the closing tag only). After it, text passes as answer text.
    """

    def __init__(self, *, expected: bool = False) -> None:
        self._expected = expected
        self._state = "start"  # start, thinking, held, answer
        self._buffer = ""

    def feed(self, text: str) -> list[Delta]:
        """The deltas that `text`, the next piece of the stream, completes."""
        if self._state == "answer":
            return [TextDelta(text)] if text else []
        self._buffer += text
        if self._state == "start":
            stripped = self._buffer.lstrip()
            if len(stripped) < len(THINK_OPEN) and THINK_OPEN.startswith(stripped):
                return []  # may still open a thought
            if stripped.startswith(THINK_OPEN):
                self._buffer = stripped[len(THINK_OPEN) :].lstrip("\n")
                self._state = "thinking"
            elif self._expected:
                self._state = "held"
            else:
                return self._answer(self._buffer)
        return self._thought()

    def _thought(self) -> list[Delta]:
        end = self._buffer.find(THINK_CLOSE)
        if end >= 0:
            thought, rest = self._buffer[:end], self._buffer[end + len(THINK_CLOSE) :]
            out: list[Delta] = [ThinkingDelta(thought)] if thought else []
            return out + self._answer(rest.lstrip("\n"))
        if self._state == "held":
            return []
        keep = len(self._buffer) - held_prefix(self._buffer, THINK_CLOSE)
        out = [ThinkingDelta(self._buffer[:keep])] if keep else []
        self._buffer = self._buffer[keep:]
        return out

    def _answer(self, text: str) -> list[Delta]:
        self._state, self._buffer = "answer", ""
        return [TextDelta(text)] if text else []

    def close(self) -> list[Delta]:
        """What is still held when the stream ends: an unclosed thought stays thinking."""
        rest, self._buffer = self._buffer, ""
        if not rest:
            return []
        if self._state == "thinking":
            return [ThinkingDelta(rest)]
        self._state = "answer"
        return [TextDelta(rest)]


class NousParser:
    """Reads streamed text into text deltas and tool-call deltas.

    Text before a `<tool_call>` streams on at once; the call itself is held until its closing
    tag (or the end of the stream) and then given whole, as one `ToolCallDelta`. A chunk that
    ends in part of the opening tag holds that part back, so no tag leaks into the text.
    Whitespace around calls is dropped. A block that names no tool, even after repair, is
    given back as the text it was.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._in_call = False
        self._after_call = False
        self._space = ""
        self.calls = 0

    def feed(self, text: str) -> list[Delta]:
        """The deltas that `text`, the next piece of the stream, completes."""
        self._buffer += text
        out: list[Delta] = []
        while True:
            if self._in_call:
                end = self._buffer.find(CLOSE)
                if end < 0:
                    return out
                out += self._call(self._buffer[:end])
                self._buffer = self._buffer[end + len(CLOSE) :]
                continue
            start = self._buffer.find(OPEN)
            if start < 0:
                keep = len(self._buffer) - held_prefix(self._buffer)
                out += self._text(self._buffer[:keep])
                self._buffer = self._buffer[keep:]
                return out
            out += self._text(self._buffer[:start])
            self._space = ""
            self._buffer = self._buffer[start + len(OPEN) :]
            self._in_call = True

    def close(self) -> list[Delta]:
        """The deltas still held when the stream ends (a call never closed is read too)."""
        rest, self._buffer = self._buffer, ""
        if self._in_call:
            return self._call(rest, closed=False)
        return self._text(rest)

    def _call(self, body: str, *, closed: bool = True) -> list[Delta]:
        self._in_call = False
        delta = _call_delta(self.calls, body.strip())
        if delta is None:
            return self._text(f"{OPEN}{body}{CLOSE if closed else ''}")
        self.calls += 1
        self._after_call = True
        return [delta]

    def _text(self, text: str) -> list[Delta]:
        if self._after_call:
            text = text.lstrip()
            self._after_call = not text
        visible = text.rstrip()
        if not visible:
            self._space += text
            return []
        out, self._space = self._space + visible, text[len(visible) :]
        return [TextDelta(out)]
