"""Qwen-Agent's `qwen` function-calling format: `✿FUNCTION✿` lines in the model's text.

The tools are described in the system prompt (one `### name` section each, with the JSON
schema of its parameters); the model writes a call as::

    ✿FUNCTION✿: get_current_weather
    ✿ARGS✿: {"location": "Paris"}

and stops there (`✿RESULT✿` and `✿RETURN✿` are stop words). Past calls and their results are
written back into the assistant's text (`✿RESULT✿: ...` then `✿RETURN✿:`), so a turn with
tool rounds is one assistant text that the model continues; for a chat model that text is
appended to the latest user message, as Qwen-Agent does for OpenAI-compatible servers. With
`parallel_tool_calls` the prompt shows how to write several calls at once; without it only
the first call written is kept. A function choice naming a tool starts the answer with
`✿FUNCTION✿: name`, and the model writes the arguments.

The prompt texts are the ones Qwen's models were trained on (Qwen-Agent's
`qwen_fncall_prompt.py`): they are data for the model, not prose, so they are kept as the
models expect them.
"""

# ruff: noqa: RUF001  (the Chinese prompts use full-width punctuation, as the models saw it)

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from parley.agents._nous import held_prefix
from parley.messages import Block, Msg, TextBlock, ThinkingBlock, ToolCallBlock, new_call_id
from parley.models.accumulator import Delta, TextDelta, ToolCallDelta
from parley.models.parameters import Parameters
from parley.models.tools import ToolSpec

__all__ = [
    "FN_ARGS",
    "FN_EXIT",
    "FN_NAME",
    "FN_RESULT",
    "FN_STOP_WORDS",
    "QwenFormat",
    "QwenParser",
]

FN_NAME, FN_ARGS, FN_RESULT, FN_EXIT = "✿FUNCTION✿", "✿ARGS✿", "✿RESULT✿", "✿RETURN✿"
FN_STOP_WORDS = (FN_RESULT, FN_EXIT)
"""Where the model must stop: a result is the tool's to write."""

_INFO = {
    "en": "# Tools\n\n## You have access to the following tools:\n\n{tool_descs}",
    "zh": "# 工具\n\n## 你拥有如下工具：\n\n{tool_descs}",
}
_ONE = {
    "en": "## When you need to call a tool, please insert the following command in your "
    "reply, which can be called zero or multiple times according to your needs:\n\n"
    f"{FN_NAME}: The tool to use, should be one of [{{tool_names}}]\n"
    f"{FN_ARGS}: The input of the tool\n{FN_RESULT}: Tool results\n"
    f"{FN_EXIT}: Reply based on tool results. Images need to be rendered as ![](url)",
    "zh": "## 你可以在回复中插入零次、一次或多次以下命令以调用工具：\n\n"
    f"{FN_NAME}: 工具名称，必须是[{{tool_names}}]之一。\n{FN_ARGS}: 工具输入\n"
    f"{FN_RESULT}: 工具结果\n{FN_EXIT}: 根据工具结果进行回复，需将图片用![](url)渲染出来",
}
_PARALLEL = {
    "en": "## Insert the following command in your reply when you need to call N tools in "
    "parallel:\n\n"
    f"{FN_NAME}: The name of tool 1, should be one of [{{tool_names}}]\n"
    f"{FN_ARGS}: The input of tool 1\n{FN_NAME}: The name of tool 2\n"
    f"{FN_ARGS}: The input of tool 2\n...\n{FN_NAME}: The name of tool N\n"
    f"{FN_ARGS}: The input of tool N\n{FN_RESULT}: The result of tool 1\n"
    f"{FN_RESULT}: The result of tool 2\n...\n{FN_RESULT}: The result of tool N\n"
    f"{FN_EXIT}: Reply based on tool results. Images need to be rendered as ![](url)",
    "zh": "## 你可以在回复中插入以下命令以并行调用N个工具：\n\n"
    f"{FN_NAME}: 工具1的名称，必须是[{{tool_names}}]之一\n{FN_ARGS}: 工具1的输入\n"
    f"{FN_NAME}: 工具2的名称\n{FN_ARGS}: 工具2的输入\n...\n{FN_NAME}: 工具N的名称\n"
    f"{FN_ARGS}: 工具N的输入\n{FN_RESULT}: 工具1的结果\n{FN_RESULT}: 工具2的结果\n...\n"
    f"{FN_RESULT}: 工具N的结果\n{FN_EXIT}: 根据工具结果进行回复，需将图片用![](url)渲染出来",
}
_TOOL = {
    "en": "### {name}\n\n{name}: {description} Parameters: {parameters} {args_format}",
    "zh": "### {name}\n\n{name}: {description} 输入参数：{parameters} {args_format}",
}
_ARGS_FORMAT = {
    "en": (
        "Format the arguments as a JSON object.",
        "Enclose the code within triple backticks (`) at the beginning and end of the code.",
    ),
    "zh": ("此工具的输入应为JSON对象。", "此工具的输入应为Markdown代码块。"),
}
_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def language(msgs: Sequence[Msg]) -> str:
    """`zh` when a system or user message holds Chinese, else `en` (Qwen-Agent's rule)."""
    chinese = any(m.role in ("system", "user") and _CHINESE.search(m.text) for m in msgs)
    return "zh" if chinese else "en"


def tools_section(tools: Sequence[ToolSpec], lang: str, parallel: bool) -> str:
    """The system prompt section describing the tools and how to call them."""
    descs = []
    for tool in tools:
        code = tool.name == "code_interpreter"
        descs.append(
            _TOOL[lang]
            .format(
                name=tool.name,
                description=tool.description,
                parameters=json.dumps(tool.parameters, ensure_ascii=False),
                args_format=_ARGS_FORMAT[lang][code],
            )
            .rstrip()
        )
    how = (_PARALLEL if parallel else _ONE)[lang].format(tool_names=",".join(t.name for t in tools))
    return _INFO[lang].format(tool_descs="\n\n".join(descs)) + "\n\n" + how


def _write(msgs: Sequence[Msg]) -> list[Msg]:
    """The conversation with calls and results as text; each turn one assistant message.

    Media (an image a tool returned) stays in the turn, after the text written before it.
    """
    out: list[Msg] = []
    turn: list[Block] | None = None
    for msg in msgs:
        if msg.role not in ("assistant", "tool"):
            turn = None
            out.append(msg)
            continue
        if turn is None:
            turn = []
            out.append(Msg(role="assistant", content=[], **_named(msg)))
        _extend(turn, msg)
        out[-1] = out[-1].model_copy(update={"content": list(turn)})
    return out


def _named(msg: Msg) -> dict[str, Any]:
    return {"name": msg.name} if msg.role == "assistant" and msg.name else {}


def _append(turn: list[Block], text: str) -> None:
    if turn and isinstance(turn[-1], TextBlock):
        turn[-1] = TextBlock(text=turn[-1].text + text)
    elif text:
        turn.append(TextBlock(text=text))


def _text(turn: list[Block]) -> str:
    return "".join(b.text for b in turn if isinstance(b, TextBlock))


def _extend(turn: list[Block], msg: Msg) -> None:
    if msg.role == "assistant":
        for block in msg.content:
            _assistant_block(turn, block)
        return
    exit_ = f"\n{FN_EXIT}: "
    for result in msg.tool_results:
        last = turn[-1] if turn else None
        if isinstance(last, TextBlock) and last.text.endswith(exit_):
            turn[-1] = TextBlock(text=last.text[: -len(exit_)])  # one return per round
        _append(turn, f"\n{FN_RESULT}: ")
        output = (
            [TextBlock(text=result.output)] if isinstance(result.output, str) else result.output
        )
        for block in output:
            if isinstance(block, TextBlock):
                _append(turn, block.text)
            else:
                turn.append(block)
        _append(turn, exit_)


def _assistant_block(turn: list[Block], block: Block) -> None:
    if isinstance(block, TextBlock):
        _append(turn, block.text)
    elif isinstance(block, ToolCallBlock):
        arguments = block.raw_input
        if arguments is None:
            arguments = json.dumps(block.input, ensure_ascii=False)
        if arguments.startswith("```"):
            arguments = "\n" + arguments  # a code block renders on its own line
        sep = "\n" if _text(turn) else ""
        _append(turn, f"{sep}{FN_NAME}: {block.name}\n{FN_ARGS}: {arguments}")
    elif not isinstance(block, ThinkingBlock):
        turn.append(block)


def _continue(msgs: list[Msg], forced: str | None) -> list[Msg]:
    """A trailing assistant turn (and a forced call's start) appended to the user message.

    A chat model cannot continue its own message: the turn goes after the latest user
    message, as Qwen-Agent does for OpenAI-compatible servers.
    """
    tail: list[Block] = []
    if msgs and msgs[-1].role == "assistant":
        tail = list(msgs.pop().content)
        last = tail[-1] if tail else None
        if isinstance(last, TextBlock) and last.text.endswith(f"{FN_EXIT}: "):
            tail[-1] = TextBlock(text=last.text[:-2])  # ": " may merge with the next word
    if forced is not None:
        text = _text(tail)
        sep = ": \n" if text.endswith(FN_EXIT) else "\n" if tail else ""
        _append(tail, f"{sep}{FN_NAME}: {forced}")
    if not tail:
        return msgs
    for index in range(len(msgs) - 1, -1, -1):
        if msgs[index].role == "user":
            user = msgs[index]
            blocks = [*user.content, TextBlock(text="\n\n"), *tail]
            msgs[index] = user.model_copy(update={"content": blocks})
            return msgs
    return [*msgs, Msg(role="user", content=tail)]


def _with_system(msgs: list[Msg], section: str) -> list[Msg]:
    if msgs and msgs[0].role == "system":
        first = msgs[0]
        text = f"{first.text}\n\n{section}" if first.text else section
        return [first.model_copy(update={"content": [TextBlock(text=text)]}), *msgs[1:]]
    return [Msg.system(section), *msgs]


def _forced(tool_choice: str | None) -> str | None:
    return tool_choice if tool_choice not in (None, "auto", "none", "required") else None


class QwenFormat:
    """Qwen-Agent's `qwen` format, for `PromptedToolsModel(model, QwenFormat())`."""

    stop: Sequence[str] = FN_STOP_WORDS

    def write(
        self,
        msgs: Sequence[Msg],
        tools: Sequence[ToolSpec],
        tool_choice: str | None,
        parameters: Parameters,
    ) -> list[Msg]:
        """The conversation for the inner model: tools in the system prompt, calls as text."""
        written = _write(msgs)
        if not tools or tool_choice == "none":
            return _continue(written, None)
        parallel = bool(parameters.parallel_tool_calls)
        section = tools_section(tools, language(msgs), parallel)
        return _continue(_with_system(written, section), _forced(tool_choice))

    def parser(self, tool_choice: str | None, parameters: Parameters) -> QwenParser:
        """A parser for one answer."""
        return QwenParser(_forced(tool_choice), parallel=bool(parameters.parallel_tool_calls))


class QwenParser:
    """Reads `✿FUNCTION✿` calls out of streamed text.

    Text before the first call streams on at once (a piece that may begin a special token is
    held back); from the first call on, the text is held and read at the end: every call in
    it (several `✿ARGS✿` under one name are several calls), only the first unless
    `parallel`; text after the calls is dropped, as Qwen-Agent drops it.
    """

    def __init__(self, forced: str | None = None, *, parallel: bool = False) -> None:
        self._forced = forced
        self._parallel = parallel
        self._started = False
        self._held = ""
        self._in_calls = False
        self.calls = 0

    def feed(self, text: str) -> list[Delta]:
        """The deltas that `text`, the next piece of the stream, completes."""
        self._held += text
        if not self._started:
            start = self._held.lstrip().removeprefix(":").lstrip()
            if len(start) < len(FN_ARGS) and FN_ARGS.startswith(start):
                return []  # it may still be a forced call's arguments
            self._begin()
        if self._in_calls:
            return []
        at = self._held.find(FN_NAME)
        if at >= 0:
            out = self._text(self._held[:at])
            self._held, self._in_calls = self._held[at:], True
            return out
        keep = len(self._held) - held_prefix(self._held, FN_NAME)
        out = self._text(self._held[:keep])
        self._held = self._held[keep:]
        return out

    def _begin(self) -> None:
        self._started = True
        # A continued answer may start with the ": " the prompt left off.
        self._held = self._held.removeprefix(": ").removeprefix(":")
        if self._forced is not None and self._held.lstrip().startswith(FN_ARGS):
            self._held = f"{FN_NAME}: {self._forced}\n{self._held.lstrip()}"

    def _text(self, text: str) -> list[Delta]:
        return [TextDelta(text)] if text else []

    def close(self) -> list[Delta]:
        """The calls held (and text still held) when the stream ends."""
        if not self._started:
            self._begin()
        rest, self._held = self._held, ""
        if not self._in_calls:
            at = rest.find(FN_NAME)
            if at < 0:
                return self._text(rest.rstrip())
            out, rest = self._text(rest[:at].rstrip()), rest[at:]
        else:
            out = []
        for name, arguments in _calls(rest):
            if self.calls and not self._parallel:
                break
            out.append(ToolCallDelta(self.calls, new_call_id(), name, arguments))
            self.calls += 1
        return out


def _calls(text: str) -> list[tuple[str, str]]:
    for stop in FN_STOP_WORDS:  # should the server ignore the stop words
        text = text.split(stop, maxsplit=1)[0]
    calls: list[tuple[str, str]] = []
    for part in text.split(f"{FN_NAME}:")[1:]:
        name, _, arguments = part.partition(f"{FN_ARGS}:")
        name = name.strip()
        if name:
            each = arguments.split(f"{FN_ARGS}:") if arguments else [""]
            calls += [(name, _trim_arguments(one.strip())) for one in each]
    return calls


def _trim_arguments(arguments: str) -> str:
    """The arguments without trailing remarks after the JSON object or the code block."""
    if arguments.startswith("{"):
        end = arguments.rfind("}")
        if end > 0:
            return arguments[: end + 1]
    if arguments.startswith("```"):
        end = arguments.rfind("\n```")
        if end > 0:
            return arguments[: end + 4]
    return arguments
