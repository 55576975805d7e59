"""Tools: the Qwen-Agent compatible base, the registry, `@tool`, and running calls."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import parley.tools.builtin  # noqa: F401  (registered before the registry is snapshotted)
from parley.errors import ConfigurationError, ToolArgumentsError, ToolError, UserError
from parley.messages import ImageBlock, TextBlock, ToolCallBlock
from parley.tools import (
    TOOL_REGISTRY,
    Tool,
    Toolkit,
    parse_tool_arguments,
    qwen_list_to_schema,
    register_tool,
    tool,
)


@pytest.fixture(autouse=True)
def clean_registry() -> Any:
    before = dict(TOOL_REGISTRY)
    yield
    TOOL_REGISTRY.clear()
    TOOL_REGISTRY.update(before)


def make_calculator() -> type[Tool]:
    # Written exactly as the Qwen-Agent seed writes a tool.
    @register_tool("custom_calculator")
    class CalculatorTool(Tool):
        description = "Evaluate an arithmetic expression."
        parameters = {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 2 + 3 * 4"}},
            "required": ["expression"],
        }

        def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
            params_dict = self._verify_json_format_args(params)
            expression = params_dict["expression"]
            allowed = set("0123456789+-*/(). ")
            if not set(expression) <= allowed:
                return f"cannot evaluate {expression!r}"
            return f"{expression} = {eval(expression)}"

    return CalculatorTool


def call(name: str, arguments: str | dict[str, Any], call_id: str = "c1") -> ToolCallBlock:
    if isinstance(arguments, str):
        return ToolCallBlock(id=call_id, name=name, raw_input=arguments)
    return ToolCallBlock(id=call_id, name=name, input=arguments)


# -- Qwen-Agent compatibility -----------------------------------------------------------------


def test_a_qwen_style_tool_works_unchanged() -> None:
    calculator = make_calculator()
    assert calculator.name == "custom_calculator"
    assert TOOL_REGISTRY["custom_calculator"] is calculator
    instance = calculator({"name_for_human": "Calculator"})
    assert instance.call('{"expression": "2 + 3 * 4"}') == "2 + 3 * 4 = 14"
    assert instance.function["name_for_human"] == "Calculator"
    assert instance.function["args_format"] == "Format the arguments as a JSON object."
    assert instance.tool_spec().parameters["required"] == ["expression"]
    with pytest.raises(ValueError, match="expression"):
        instance.call("{}")


async def test_a_sync_call_gets_the_arguments_as_json_text_as_qwen_agent_gives_them() -> None:
    """Qwen-Agent hands `call` the model's arguments, a JSON string: its README's tool reads
    them with `json5.loads(params)`, which takes no dict."""
    import json5  # noqa: PLC0415

    got: list[Any] = []

    class Painter(Tool):
        name = "painter_json_text"
        parameters = [{"name": "prompt", "type": "string", "required": True}]

        def call(self, params: str, **kwargs: Any) -> str:  # type: ignore[override]
            got.append(params)
            return f"drew {json5.loads(params)['prompt']}"

    kit = Toolkit([Painter()])
    # However the model wrote them (lenient text, or parsed by the provider), checked first.
    lenient = await kit.run(call("painter_json_text", "{prompt: 'a dog',}"))
    parsed = await kit.run(call("painter_json_text", {"prompt": "猫"}))
    assert [lenient.output, parsed.output] == ["drew a dog", "drew 猫"]
    assert got == ['{"prompt": "a dog"}', '{"prompt": "猫"}']
    assert (await Painter().acall({"prompt": "x"})) == "drew x"


def test_registry_refuses_duplicates_and_mismatched_names() -> None:
    make_calculator()
    with pytest.raises(ConfigurationError, match="Tool `custom_calculator` already exists!"):
        make_calculator()

    class Named(Tool):
        name = "named"

    with pytest.raises(ValueError, match=r'Named\.name="named" conflicts with'):
        register_tool("other")(Named)

    class Unnamed(Tool):
        pass

    register_tool("custom_calculator", allow_overwrite=True)(Unnamed)
    assert TOOL_REGISTRY["custom_calculator"] is Unnamed
    assert Unnamed.name == "custom_calculator"


def test_qwen_list_form_parameters_become_a_schema() -> None:
    schema = qwen_list_to_schema(
        [
            {"name": "query", "type": "string", "description": "q", "required": True},
            {"name": "max_results", "type": "integer", "required": False, "default": 10},
        ]
    )
    assert schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "q"},
            "max_results": {"type": "integer", "default": 10},
        },
        "required": ["query"],
    }

    class Search(Tool):
        name = "search_list_form"
        parameters = [{"name": "query", "type": "string", "required": True}]

    assert Search()._verify_json_format_args({"query": "x"}) == {"query": "x"}
    with pytest.raises(ToolArgumentsError, match="'query' is a required property"):
        Search()._verify_json_format_args({})
    with pytest.raises(ToolArgumentsError, match="cannot be converted to Json"):
        Search()._verify_json_format_args("{query: 'x'}", strict_json=True)


def test_a_tool_needs_a_name_and_an_object_schema() -> None:
    with pytest.raises(ToolError, match="has no name"):
        Tool()

    class Scalar(Tool):
        name = "scalar"
        parameters = {"type": "string"}

    with pytest.raises(ToolError, match="type: object"):
        Scalar()


# -- arguments ---------------------------------------------------------------------------------


def test_arguments_are_parsed_with_growing_tolerance() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    assert parse_tool_arguments('{"n": 1}', schema) == {"n": 1}
    assert parse_tool_arguments("{n: 1, s: 'x',}", schema) == {"n": 1, "s": "x"}  # JSON5
    assert parse_tool_arguments('{"n": 1, "s": "cut off', schema) == {"n": 1, "s": "cut off"}
    assert parse_tool_arguments("", schema) == {}
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        parse_tool_arguments("[1, 2]", schema)
    with pytest.raises(ToolArgumentsError, match="n: 'x' is not of type 'integer'"):
        parse_tool_arguments('{"n": "x"}', schema)


# -- @tool -------------------------------------------------------------------------------------


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: The city's name.
        unit: celsius or fahrenheit.
    """
    return {"city": city, "temperature": 21, "unit": unit}


@tool(name="slow_add", requires_approval=True, timeout=0.2)
async def add_slowly(a: int, b: int, delay: float = 0.0) -> int:
    """Add two integers, taking `delay` seconds."""
    await asyncio.sleep(delay)
    return a + b


def test_tool_schema_comes_from_hints_and_docstring() -> None:
    spec = get_weather.tool_spec()
    assert spec.name == "get_weather"
    assert spec.description == "Current weather in a city."
    assert spec.parameters["properties"]["city"] == {
        "description": "The city's name.",
        "type": "string",
    }
    assert spec.parameters["required"] == ["city"]
    assert spec.parameters["properties"]["unit"]["default"] == "celsius"
    assert get_weather("Oslo")["city"] == "Oslo"  # still callable as a function
    assert add_slowly.requires_approval
    assert add_slowly.name == "slow_add"


def test_tool_rejects_varargs() -> None:
    def bad(*args: int) -> None: ...

    with pytest.raises(UserError, match=r"\*args or \*\*kwargs"):
        tool(bad)


# -- the toolkit -------------------------------------------------------------------------------


async def test_toolkit_runs_calls_and_reports_failures_as_results() -> None:
    make_calculator()

    def explode() -> None:
        """Always fails."""
        raise RuntimeError("boom")

    kit = Toolkit([get_weather, add_slowly, "custom_calculator", explode])
    assert kit.names == ["get_weather", "slow_add", "custom_calculator", "explode"]
    ok = await kit.run(call("get_weather", '{"city": "Oslo"}'))
    assert not ok.is_error
    assert json.loads(ok.text) == {"city": "Oslo", "temperature": 21, "unit": "celsius"}
    coerced = await kit.run(call("slow_add", '{"a": "2", "b": 3}'))
    assert coerced.output == "5"
    qwen = await kit.run(call("custom_calculator", {"expression": "6 * 7"}))
    assert qwen.output == "6 * 7 = 42"

    unknown = await kit.run(call("get_wether", "{}"))
    assert unknown.is_error
    assert "there is no tool 'get_wether'; available: get_weather" in unknown.text
    bad = await kit.run(call("get_weather", '{"town": "Oslo"}'))
    assert bad.is_error
    assert "city: Field required" in bad.text
    assert "Call the tool again with corrected arguments" in bad.text
    failed = await kit.run(call("explode", "{}"))
    assert failed.is_error
    assert failed.text == "explode failed: RuntimeError: boom"
    slow = await kit.run(call("slow_add", '{"a": 1, "b": 2, "delay": 5}'))
    assert slow.is_error
    assert "did not finish within 0.2 seconds" in slow.text


async def test_parallel_calls_run_concurrently_and_keep_their_order() -> None:
    log: list[str] = []

    @tool
    async def wait(label: str, turns: int) -> str:
        """Yield to the loop `turns` times, then answer the label."""
        log.append(f"start {label}")
        for _ in range(turns):
            await asyncio.sleep(0)
        log.append(f"end {label}")
        return label

    kit = Toolkit([wait])
    # The first call takes the most turns: it ends last, its result still comes first.
    calls = [call("wait", {"label": f"L{i}", "turns": 8 - 2 * i}, f"c{i}") for i in range(4)]
    results = await kit.run_all(calls)
    assert [r.output for r in results] == ["L0", "L1", "L2", "L3"]
    assert [r.tool_call_id for r in results] == ["c0", "c1", "c2", "c3"]
    assert log[:4] == ["start L0", "start L1", "start L2", "start L3"]  # all ran together
    assert log[4:] == ["end L3", "end L2", "end L1", "end L0"]
    log.clear()
    in_order = await kit.run_all(calls, parallel=False)
    assert [r.output for r in in_order] == ["L0", "L1", "L2", "L3"]
    assert log == [f"{edge} L{i}" for i in range(4) for edge in ("start", "end")]


async def test_sync_tools_do_not_block_the_event_loop() -> None:
    released = threading.Event()

    @tool
    def block() -> str:
        """Wait in the thread until the event loop, still running, releases it."""
        return "done" if released.wait(10) else "the loop was blocked"

    async def release() -> None:
        await asyncio.sleep(0)
        released.set()

    task = asyncio.create_task(release())
    result = await Toolkit([block]).run(call("block", {}))
    await task
    assert result.output == "done"


async def test_tools_may_return_media_and_data() -> None:
    image = ImageBlock.from_bytes(b"\x89PNG", "image/png")

    @tool
    def chart() -> list[Any]:
        """Draw a chart."""
        return [TextBlock(text="Sales:"), image]

    @tool
    def rows() -> list[dict[str, int]]:
        """Return rows."""
        return [{"a": 1}]

    kit = Toolkit([chart, rows])
    media = await kit.run(call("chart", "{}"))
    assert media.output == [TextBlock(text="Sales:"), image]
    data = await kit.run(call("rows", "{}"))
    assert data.output == '[{"a": 1}]'


def test_toolkit_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ConfigurationError, match="no tool registered as 'nope'"):
        Toolkit(["nope"])
    with pytest.raises(ConfigurationError, match="already has a tool named 'get_weather'"):
        Toolkit([get_weather, get_weather])
    with pytest.raises(UserError, match="add_mcp_servers"):
        Toolkit([{"mcpServers": {}}])
    with pytest.raises(UserError, match="cannot use 42"):
        Toolkit([42])  # type: ignore[list-item]


def test_built_in_tools_are_found_by_their_qwen_names() -> None:
    kit = Toolkit(["code_interpreter", "doc_parser", "storage", "web_search"])
    assert kit.names == ["code_interpreter", "doc_parser", "storage", "web_search"]


def test_tools_are_idempotent_only_when_marked() -> None:
    from parley.rag.tool import RetrievalTool  # noqa: PLC0415
    from parley.tools.builtin.code_interpreter import CodeInterpreter  # noqa: PLC0415
    from parley.tools.builtin.doc_parser import DocParser  # noqa: PLC0415
    from parley.tools.builtin.web_search import WebSearch  # noqa: PLC0415
    from parley.tools.function import FunctionTool  # noqa: PLC0415

    def find(name: str) -> str:
        """Find it.

        Args:
            name: What.
        """
        return name

    class Lookup(Tool):
        name = "lookup"
        idempotent = True

    assert tool(find).idempotent is False
    assert tool(idempotent=True)(find).idempotent is True
    assert FunctionTool(find, idempotent=True).idempotent is True
    assert Lookup().idempotent is True
    # Built-ins: reading and searching may run again; running code may not.
    assert (WebSearch.idempotent, DocParser.idempotent, RetrievalTool.idempotent) == (
        True,
        True,
        True,
    )
    assert CodeInterpreter.idempotent is False
    kit = Toolkit([find, tool(idempotent=True, name="found")(find)])
    assert kit.is_idempotent(ToolCallBlock(id="1", name="found", input={}))
    assert not kit.is_idempotent(ToolCallBlock(id="2", name="find", input={}))
    assert not kit.is_idempotent(ToolCallBlock(id="3", name="unknown", input={}))
