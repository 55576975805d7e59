"""Tool-call formats that follow the model: how calls are rendered, constrained and parsed.

A GGUF file carries the chat template its model was trained with, and the templates of
tool-calling models render `tools`, assistant `tool_calls` and `tool` results in their own
syntax. `detect_tool_format` names that syntax from the template; `CallSyntax` says how a
call is written in it:

- `hermes` (Qwen2.5, Qwen3, SmolLM3, Hermes): `<tool_call>{"name": .., "arguments": ..}</tool_call>`
- `llama3` (Llama 3.1/3.2): bare `{"name": .., "parameters": ..}` (or after `<|python_tag|>`)
- `phi4` (Phi-4-mini): `<|tool_call|>[{"name": .., "arguments": ..}, ..]<|/tool_call|>`, the
  functions given as JSON in the system message's `tools`
- `gemma` (Gemma 3): no tool syntax in its template; the functions are described in the
  system turn and the model answers with a bare `{"name": .., "parameters": ..}`
- `chatml-function-calling`: llama-cpp-python's own handler (`functions.NAME:` lines), the
  path for models whose template knows no tools (SmolLM2)

For the first four, `render_prompt` renders the GGUF's template (llama-cpp-python's sandboxed
jinja2 formatter, which passes `tools` on), and `call_grammar` is the GBNF (llama.cpp's
json-schema-to-grammar, from the tools' schemas) that a call's body is generated under.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

from parley.errors import ConfigurationError, MissingDependencyError, UserError
from parley.messages import Msg, ToolCallBlock, ToolResultBlock
from parley.models.tools import ToolSpec
from parley.providers.local._format import result_body, text_turns
from parley.providers.local.presets import ToolFormat, preset_for

__all__ = [
    "SYNTAXES",
    "TOOL_FORMATS",
    "CallSyntax",
    "ParsedCall",
    "ToolFormat",
    "call_grammar",
    "check_tool_format",
    "detect_tool_format",
    "parse_body",
    "preset_tool_format",
    "read_chat_template",
    "render_prompt",
    "split_calls",
    "template_messages",
]


TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)

DEFAULT_SYSTEM = "You are a helpful assistant."


@dataclass(frozen=True)
class CallSyntax:
    """How one format writes a call, for the prompt, the grammar and the parser."""

    name: ToolFormat
    opening: str
    """Written into the prompt before a call's body: the model's own marker, or nothing."""
    closing: str
    """What ends a call in written history ("" for bare JSON)."""
    triggers: tuple[str, ...]
    """Markers that open a call anywhere in free text."""
    opens_with_brace: bool
    """A reply whose first non-blank character is `{` is a call (bare JSON formats)."""
    arguments_key: str
    """`arguments` or `parameters`: the key the model was trained to write."""
    in_list: bool = False
    """The body is a JSON list of calls (parallel calls in one marker)."""
    repeats: bool = False
    """Parallel calls follow one another, each in its own marker."""


SYNTAXES: dict[ToolFormat, CallSyntax] = {
    "hermes": CallSyntax(
        "hermes",
        "<tool_call>\n",
        "\n</tool_call>",
        ("<tool_call>",),
        opens_with_brace=False,
        arguments_key="arguments",
        repeats=True,
    ),
    "llama3": CallSyntax("llama3", "", "", ("<|python_tag|>",), True, "parameters"),
    "phi4": CallSyntax(
        "phi4", "<|tool_call|>", "<|/tool_call|>", ("<|tool_call|>",), False, "arguments", True
    ),
    "gemma": CallSyntax("gemma", "", "", (), True, "parameters"),
}
"""The template-native formats (`chatml-function-calling` is llama-cpp-python's handler)."""


# -- detection ---------------------------------------------------------------------------------

_MARKERS: tuple[tuple[ToolFormat, tuple[str, ...]], ...] = (
    ("phi4", ("<|tool_call|>", "<|tool|>")),
    ("hermes", ("<tool_call>",)),
    ("llama3", ("<|python_tag|>", "ipython")),
    ("gemma", ("<start_of_turn>",)),
)


def detect_tool_format(template: str | None) -> ToolFormat:
    """The tool-call format a chat template was written for.

    `<|tool_call|>`/`<|tool|>` is Phi-4's, `<tool_call>` Hermes' (Qwen, SmolLM3),
    `<|python_tag|>`/`ipython` Llama 3's, `<start_of_turn>` Gemma's; a template with none of
    them (or no template) gets llama-cpp-python's `chatml-function-calling`.
    """
    if template:
        for name, markers in _MARKERS:
            if any(marker in template for marker in markers):
                return name
    return "chatml-function-calling"


def preset_tool_format(model: str) -> ToolFormat | None:
    """The tool format of `model`'s preset (`presets.preset_for`), if it has one."""
    preset = preset_for(model)
    return preset.tool_format if preset is not None else None


def read_chat_template(path: Path) -> str | None:
    """The chat template in a GGUF file's metadata (`tokenizer.chat_template`), if any.

    llama.cpp reads the metadata and the vocabulary only, not the weights.

    Raises:
        MissingDependencyError: llama-cpp-python is not installed.
        ConfigurationError: llama.cpp cannot read the file.
    """
    # Through the engine's import, which keeps the process's output while it loads.
    from parley.providers.local._engine import import_llama_cpp  # noqa: PLC0415 - a cycle

    llama_cpp = import_llama_cpp()
    try:
        llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    except ValueError as exc:
        raise ConfigurationError(f"llama.cpp cannot read {path}: {exc}") from None
    try:
        template: str | None = llama.metadata.get("tokenizer.chat_template")
        return template
    finally:
        llama.close()


def check_tool_format(value: str) -> ToolFormat:
    """`value` as a `ToolFormat`, or a `UserError` listing the formats."""
    if value not in TOOL_FORMATS:
        raise UserError(f"unknown tool format {value!r}: use one of {', '.join(TOOL_FORMATS)}")
    return value


# -- messages ----------------------------------------------------------------------------------


def _result_body(result: ToolResultBlock) -> str:
    body = result_body(result)
    return f"Error: {body}" if result.is_error else body


def _arguments(call: ToolCallBlock) -> Any:
    """The call's arguments as the templates take them: a mapping (they `tojson` it)."""
    if call.raw_input is not None:
        return call.raw_input  # not valid JSON: shown as the model wrote it
    return call.input


def written_call(syntax: CallSyntax, calls: Sequence[ToolCallBlock]) -> str:
    """`calls` as the model writes them in `syntax` (for formats whose template does not)."""
    bodies = [{"name": c.name, syntax.arguments_key: _arguments(c)} for c in calls]
    if syntax.in_list:
        return syntax.opening + json.dumps(bodies, ensure_ascii=False) + syntax.closing
    return "\n".join(
        syntax.opening + json.dumps(b, ensure_ascii=False) + syntax.closing for b in bodies
    )


def _assistant(syntax: CallSyntax, msg: Msg) -> dict[str, Any]:
    calls = msg.tool_calls
    if not calls:
        return {"role": "assistant", "content": msg.text}
    if syntax.name in {"phi4", "gemma"}:
        # Their templates print only `content`: the calls go there, as the model writes them.
        text = "\n".join(t for t in (msg.text, written_call(syntax, calls)) if t)
        return {"role": "assistant", "content": text}
    return {
        "role": "assistant",
        "content": msg.text,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments(c)},
            }
            for c in calls
        ],
    }


def _tool_results(syntax: CallSyntax, msg: Msg) -> list[dict[str, Any]]:
    if syntax.name == "gemma":
        # Gemma's turns are user and model only.
        text = "\n\n".join(
            f"Function {r.name} returned:\n{_result_body(r)}" for r in msg.tool_results
        )
        return [{"role": "user", "content": text}]
    return [
        {"role": "tool", "tool_call_id": r.tool_call_id, "name": r.name, "content": _result_body(r)}
        for r in msg.tool_results
    ]


def _gemma_guide(tools: Sequence[ToolSpec]) -> str:
    listed = json.dumps([t.openai()["function"] for t in tools], ensure_ascii=False, indent=1)
    return (
        "You have access to these functions:\n"
        f"{listed}\n\n"
        "To call a function, reply with only a JSON object in the form "
        '{"name": function name, "parameters": dictionary of argument names and values}. '
        "Otherwise answer in plain text."
    )


def _merge_same_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive turns of one role as one (Gemma's template insists on alternation)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n\n{message['content']}"}
        else:
            out.append(dict(message))
    return out


def _with_system(messages: list[dict[str, Any]], extra: str, key: str) -> list[dict[str, Any]]:
    """`messages` with `extra` set as `key` of the system message (one is added if none)."""
    if messages and messages[0]["role"] == "system":
        first = dict(messages[0])
    else:
        first = {"role": "system", "content": DEFAULT_SYSTEM}
        messages = [first, *messages]
    if key == "content":
        first["content"] = f"{first['content']}\n\n{extra}"
    else:
        first[key] = extra
    return [first, *messages[1:]]


def template_messages(
    syntax: CallSyntax, msgs: Sequence[Msg], tools: Sequence[ToolSpec]
) -> list[dict[str, Any]]:
    """The messages for the GGUF's template, tool turns the way the format's templates take them.

    Hermes and Llama 3 templates read assistant `tool_calls` and `tool` messages; Phi-4-mini's
    reads the functions from the system message's `tools` (a JSON string) and prints only
    contents; Gemma's knows no tools, so they are described in the system turn.

    Raises:
        UserError: A message holds media, which the local model cannot read.
    """
    out = text_turns(
        msgs,
        assistant=lambda msg: _assistant(syntax, msg),
        tool=lambda msg: _tool_results(syntax, msg),
    )
    if tools and syntax.name == "phi4":
        functions = [t.openai()["function"] for t in tools]
        out = _with_system(out, json.dumps(functions, ensure_ascii=False), "tools")
    if syntax.name == "gemma":
        if tools:
            out = _with_system(out, _gemma_guide(tools), "content")
        out = _merge_same_roles(out)
    return out


def render_prompt(
    template: str,
    messages: list[dict[str, Any]],
    tools: Sequence[ToolSpec],
    *,
    bos_token: str,
    eos_token: str,
) -> str:
    """The prompt the chat `template` makes of `messages` and `tools` (OpenAI function schemas).

    Rendered by llama-cpp-python's `Jinja2ChatFormatter` (an immutable sandboxed jinja2
    environment with the Hugging Face template extensions), which passes `tools` on.

    Raises:
        UserError: The template raised (for example on a role order it does not accept).
        MissingDependencyError: llama-cpp-python is not installed.
    """
    try:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: PLC0415
    except ImportError:
        raise MissingDependencyError("llama_cpp", "local") from None
    formatter = Jinja2ChatFormatter(template, eos_token, bos_token, add_generation_prompt=True)
    try:
        result = formatter(
            messages=cast("Any", messages),
            tools=cast("Any", [t.openai() for t in tools] or None),
        )
    except Exception as exc:  # jinja2's errors and the template's raise_exception
        message = f"the model's chat template cannot render this conversation: {exc}"
        raise UserError(message) from exc
    return result.prompt


# -- grammar -----------------------------------------------------------------------------------


def _call_schema(syntax: CallSyntax, tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": tool.name}, syntax.arguments_key: tool.parameters},
        "required": ["name", syntax.arguments_key],
        "additionalProperties": False,
    }


def call_grammar(syntax: CallSyntax, tools: Sequence[ToolSpec], *, parallel: bool) -> str:
    """The GBNF of a call's body (after `syntax.opening`) for one of `tools`.

    The body is `{"name": NAME, KEY: ARGUMENTS}` with ARGUMENTS valid for that tool's schema
    (a list of them for Phi-4, several when `parallel`). The grammar ends with the body, so
    llama.cpp allows only an end-of-generation token after it: the call's closing marker is
    not generated (the parser does not need it).
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # noqa: PLC0415

    calls = [_call_schema(syntax, t) for t in tools]
    schema: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if syntax.in_list:
        schema = {"type": "array", "items": schema, "minItems": 1}
        if not parallel:
            schema["maxItems"] = 1
    gbnf = json_schema_to_gbnf(json.dumps(schema), prop_order=["name", syntax.arguments_key])
    # This converter lets strings hold raw control characters, which JSON forbids: a model
    # then writes on inside a string, past newlines, until it runs out of tokens.
    gbnf = gbnf.replace('char ::= [^"\\\\]', 'char ::= [^"\\\\\\x7F\\x00-\\x1F]')
    # The converter names its top rule `root`; the body may start on a new line.
    body = re.sub(r"^root ::=", "call ::=", gbnf, count=1, flags=re.MULTILINE)
    return f'root ::= "\\n"? call\n{body}'


# -- parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedCall:
    """A call read from the model's output: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


def _from_object(syntax: CallSyntax, value: Any) -> ParsedCall | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get(syntax.arguments_key)
    if arguments is None:  # a model may use the other family's key
        arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        return ParsedCall(value["name"], arguments)
    return ParsedCall(value["name"], json.dumps(arguments, ensure_ascii=False))


def parse_body(syntax: CallSyntax, body: str) -> list[ParsedCall] | None:
    """The calls in a call's `body` (what follows the opening), or None if it is no call."""
    text = body.strip()
    if syntax.closing and text.endswith(syntax.closing.strip()):
        text = text[: -len(syntax.closing.strip())].strip()
    try:
        value, _ = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        if not (syntax.in_list and text.startswith("[")):
            return None
        value = _leading_items(text)  # a list cut off by the token limit: its whole calls
    values = value if isinstance(value, list) else [value]
    calls = [_from_object(syntax, v) for v in values]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _leading_items(text: str) -> list[Any]:
    """The whole items at the start of a JSON list that was cut off."""
    decoder = json.JSONDecoder()
    items: list[Any] = []
    at = 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return items
        items.append(item)


def _openings(syntax: CallSyntax, text: str) -> list[int]:
    """Where calls open in `text`."""
    starts: list[int] = []
    for marker in syntax.triggers:
        starts += [m.start() for m in re.finditer(re.escape(marker), text)]
    if syntax.opens_with_brace and text.strip().startswith("{"):
        starts.append(len(text) - len(text.lstrip()))
    return sorted(set(starts))


def split_calls(syntax: CallSyntax, text: str) -> tuple[str, list[ParsedCall]]:
    """A whole reply split into its text (before the first call) and its calls.

    A call that does not parse stays text.
    """
    starts = _openings(syntax, text)
    calls: list[ParsedCall] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        chunk = text[start:end]
        for marker in syntax.triggers:
            chunk = chunk.removeprefix(marker)
        parsed = parse_body(syntax, chunk)
        if parsed is None:
            return text, []
        calls += parsed
    if not calls:
        return text, []
    return text[: starts[0]].rstrip(), calls
