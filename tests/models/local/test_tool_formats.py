"""Tool-call formats that follow the model: detection, rendering, grammar and parsing.

Rendering goes through llama-cpp-python's sandboxed jinja2 formatter with minimal templates
written in each family's documented format (`tool_templates`); the grammars are compiled by
llama.cpp. The end-to-end runs on the shipped model are in test_tool_formats_e2e.py.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from parley import Msg
from parley.errors import UserError
from parley.messages import ToolCallBlock
from parley.models.tools import ToolSpec
from parley.providers.local import LocalChatModel
from parley.providers.local._gguf import DEFAULT_MODEL, resolve_gguf
from parley.providers.local._native import _ArgumentStream, _Watch
from parley.providers.local._tool_formats import (
    SYNTAXES,
    ParsedCall,
    call_grammar,
    detect_tool_format,
    preset_tool_format,
    read_chat_template,
    render_prompt,
    split_calls,
    template_messages,
)
from tests._requires import require_module
from tests.models.local.tool_templates import TEMPLATES

require_module("llama_cpp", "local")

WEATHER = ToolSpec.model_validate(
    {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
)
CALL = ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"})
HISTORY = [
    Msg.system("Be brief."),
    Msg.user("Weather in Paris?"),
    Msg.assistant(CALL),
    Msg.tool_result("c1", 'Sunny, "24" degrees', name="get_weather"),
    Msg.user("Thanks. And Rome?"),
]


def render(fmt: str, msgs: list[Msg], tools: list[ToolSpec]) -> str:
    syntax = SYNTAXES[fmt]  # type: ignore[index]
    messages = template_messages(syntax, msgs, tools)
    return render_prompt(TEMPLATES[fmt], messages, tools, bos_token="<s>", eos_token="</s>")


# -- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "phi4", "gemma"])
def test_each_familys_template_is_detected(fmt: str) -> None:
    assert detect_tool_format(TEMPLATES[fmt]) == fmt


def test_a_template_without_tool_markers_gets_chatml_function_calling() -> None:
    shipped = read_chat_template(resolve_gguf(DEFAULT_MODEL))
    assert shipped is not None
    assert "<|im_start|>" in shipped  # SmolLM2's, from its metadata
    assert detect_tool_format(shipped) == "chatml-function-calling"
    assert detect_tool_format(None) == "chatml-function-calling"


@pytest.fixture(scope="module")
def hermes_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped SmolLM2 GGUF whose metadata holds the Hermes template."""
    gguf = require_module("gguf", "dev")
    from gguf.scripts.gguf_new_metadata import (  # noqa: PLC0415
        MetadataDetails,
        copy_with_new_metadata,
    )

    reader = gguf.GGUFReader(resolve_gguf(DEFAULT_MODEL))
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    path = tmp_path_factory.mktemp("gguf") / "smollm2-hermes.gguf"
    writer = gguf.GGUFWriter(path, arch=arch, endianess=reader.endianess)
    template = MetadataDetails(gguf.GGUFValueType.STRING, TEMPLATES["hermes"])
    copy_with_new_metadata(reader, writer, {gguf.Keys.Tokenizer.CHAT_TEMPLATE: template}, [])
    return path


def test_the_format_is_detected_from_the_gguf_metadata(hermes_gguf: Path) -> None:
    assert LocalChatModel(model=str(hermes_gguf)).tool_format == "hermes"
    assert LocalChatModel().tool_format == "chatml-function-calling"
    # Given, it wins over the file's.
    assert LocalChatModel(model=str(hermes_gguf), tool_format="llama3").tool_format == "llama3"


def test_a_presets_tool_format_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    preset = types.SimpleNamespace(tool_format="phi4")
    presets = types.ModuleType("parley.providers.local.presets")
    presets.preset_for = lambda model: preset if model == "phi-4-mini" else None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "parley.providers.local.presets", presets)
    assert preset_tool_format("phi-4-mini") == "phi4"
    assert preset_tool_format("other") is None


def test_an_unknown_tool_format_says_which_there_are() -> None:
    with pytest.raises(UserError, match=r"unknown tool format 'xml'.*hermes, llama3, phi4"):
        LocalChatModel(tool_format="xml")


# -- rendering ---------------------------------------------------------------------------------


def test_hermes_renders_tools_calls_and_results_in_its_tags() -> None:
    prompt = render("hermes", HISTORY, [WEATHER])
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in prompt
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        in prompt
    )
    assert '<tool_response>\nSunny, "24" degrees\n</tool_response>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_llama3_renders_parameters_json_and_ipython_results() -> None:
    prompt = render("llama3", HISTORY, [WEATHER])
    assert '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' in prompt
    assert '<|start_header_id|>ipython<|end_header_id|>\n\nSunny, "24" degrees' in prompt
    assert prompt.startswith("<s>")


def test_phi4_gets_its_functions_in_the_system_message_and_calls_as_a_list() -> None:
    prompt = render("phi4", HISTORY, [WEATHER])
    tools = prompt.split("<|tool|>", 1)[1].split("<|/tool|>", 1)[0]
    assert json.loads(tools)[0]["name"] == "get_weather"
    assert (
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|/tool_call|>'
        in prompt
    )
    assert '<|tool|>Sunny, "24" degrees<|end|>' in prompt


def test_gemma_is_told_the_functions_and_keeps_turns_alternating() -> None:
    prompt = render("gemma", HISTORY, [WEATHER])
    assert '"name": "get_weather"' in prompt.split("Weather in Paris?")[0]  # the guide comes first
    assert '{"name": "get_weather", "parameters": {"city": "Paris"}}<end_of_turn>' in prompt
    # The tool result and the next question are one user turn (the template raises otherwise).
    assert 'Function get_weather returned:\nSunny, "24" degrees\n\nThanks. And Rome?' in prompt


def test_no_tools_renders_no_function_list_but_keeps_the_history() -> None:
    prompt = render("hermes", HISTORY, [])
    assert "<tools>" not in prompt
    assert '<tool_call>\n{"name": "get_weather"' in prompt


def test_a_template_that_raises_is_a_clear_error() -> None:
    with pytest.raises(UserError, match=r"chat template cannot render.*alternate"):
        render_prompt(
            TEMPLATES["gemma"],
            [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            [],
            bos_token="",
            eos_token="",
        )


TURNS = {  # how each template opens and ends an assistant turn
    "hermes": ("<|im_start|>assistant\n", "<|im_end|>"),
    "llama3": ("<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"),
    "phi4": ("<|assistant|>", "<|end|>"),
    "gemma": ("<start_of_turn>model\n", "<end_of_turn>"),
}


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "phi4", "gemma"])
def test_a_rendered_call_parses_back(fmt: str) -> None:
    opening, end = TURNS[fmt]
    prompt = render(fmt, HISTORY[:3], [WEATHER])
    turn = prompt.split(opening)[-2].split(end)[0]  # the last is the generation prompt
    text, calls = split_calls(SYNTAXES[fmt], turn)  # type: ignore[index]
    assert calls == [ParsedCall("get_weather", '{"city": "Paris"}')]
    assert text == ""


# -- parsing -----------------------------------------------------------------------------------


def test_hermes_parses_parallel_calls_and_the_text_before() -> None:
    out = (
        'Checking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n'
        "</tool_call>"
    )
    text, calls = split_calls(SYNTAXES["hermes"], out)
    assert text == "Checking both."
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Rome"]


def test_phi4_parses_a_list_of_calls() -> None:
    calls_json = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]'
    out = f"<|tool_call|>{calls_json}<|/tool_call|>"
    _, calls = split_calls(SYNTAXES["phi4"], out)
    assert calls == [ParsedCall("a", "{}"), ParsedCall("b", '{"x": 1}')]


def test_llama3_parses_bare_json_and_the_python_tag() -> None:
    bare = ' {"name": "get_weather", "parameters": {"city": "Oslo"}}'
    tagged = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}'
    for out in (bare, tagged):
        assert split_calls(SYNTAXES["llama3"], out) == (
            "",
            [ParsedCall("get_weather", '{"city": "Oslo"}')],
        )


def test_text_and_broken_calls_stay_text() -> None:
    for fmt, out in [
        ("hermes", "Paris is sunny."),
        ("hermes", '<tool_call>\n{"name": "get_weather", "argu'),
        ("llama3", "{not json} is how I would write it"),
        ("gemma", "Sure: the weather is fine."),
    ]:
        assert split_calls(SYNTAXES[fmt], out) == (out, [])  # type: ignore[index]


# -- grammar and streaming -----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "phi4", "gemma"])
def test_the_call_grammar_compiles_and_pins_name_and_key(fmt: str) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar  # noqa: PLC0415

    syntax = SYNTAXES[fmt]  # type: ignore[index]
    other = ToolSpec(name="get_time")
    gbnf = call_grammar(syntax, [WEATHER, other], parallel=False)
    LlamaGrammar.from_string(gbnf, verbose=False)
    assert '"\\"get_weather\\""' in gbnf
    assert '"\\"get_time\\""' in gbnf
    assert f'"\\"{syntax.arguments_key}\\""' in gbnf
    assert syntax.in_list == ('"["' in gbnf)


def test_streamed_text_holds_back_what_may_open_a_call() -> None:
    watch = _Watch(SYNTAXES["hermes"])
    assert watch.feed("It is ") == "It is "
    assert watch.feed("sunny <tool") == "sunny "  # `<tool` may be the marker's start
    assert watch.feed("kit> ok") == "<toolkit> ok"  # it was not
    assert watch.feed(" <tool_") == " "
    assert watch.feed("call>\n{") == ""
    assert (watch.opened, watch.marker) == (len("It is sunny <toolkit> ok "), "<tool_call>")


def test_a_reply_opening_with_a_brace_is_a_call_in_bare_json_formats() -> None:
    watch = _Watch(SYNTAXES["llama3"])
    assert watch.feed("\n ") == ""
    assert watch.feed('{"na') == ""
    assert watch.opened == 2
    text = _Watch(SYNTAXES["gemma"])
    assert text.feed(" The answer") == " The answer"
    assert text.feed(" is {x}.") == " is {x}."
    assert text.opened is None


def test_a_calls_arguments_stream_without_the_bodys_closing_brace() -> None:
    stream = _ArgumentStream(0)
    body = ""
    deltas = []
    for piece in ['\n{"name": "get', '_weather", "arguments": ', '{"city": "Par', 'is"}', "}", " "]:
        body += piece
        deltas += list(stream.feed(body))
    deltas += list(stream.end(body))
    first, *rest = deltas
    assert first.name == "get_weather"
    assert first.id  # announced at once, under its own id
    assert "".join(d.arguments for d in rest) == '{"city": "Paris"}'
    assert [d.arguments for d in rest][-1] == "}"  # the arguments' own brace, held until sure
