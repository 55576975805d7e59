"""Every tool-call format end to end on the shipped SmolLM2 model, run by llama.cpp.

SmolLM2's own template knows no tools, so each format runs with a minimal template of its
family (`tool_templates`). The model is tiny: the tests check what the machinery guarantees
(calls that parse, arguments valid for the schema, text otherwise, a tool round, a
cancellation that stops the worker), not the quality of its choices.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Generator
from typing import Any

import jsonschema
import pytest

from parley import Msg
from parley.agents import Agent, MessageCompleted, ToolCallEnded
from parley.messages import ToolCallBlock
from parley.providers.local import LocalChatModel, _native
from parley.providers.local._tool_formats import SYNTAXES, parse_body
from parley.tools import tool
from tests._requires import require_module
from tests.models.local.tool_templates import TEMPLATES

require_module("llama_cpp", "local")

FORMATS = ["hermes", "llama3", "phi4", "gemma"]
WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
PYTHON = {
    "name": "run_python",
    "description": "Run Python code and return what it prints.",
    "parameters": {
        "type": "object",
        "properties": {"code": {"type": "string"}},
        "required": ["code"],
    },
}
QUESTION = [Msg.system("You are a helpful assistant."), Msg.user("What is the weather in Paris?")]


def local(fmt: str) -> LocalChatModel:
    return LocalChatModel(parameters={"seed": 7}, tool_format=fmt, chat_template=TEMPLATES[fmt])


def valid(call: ToolCallBlock, *tools: dict[str, Any]) -> None:
    assert call.raw_input is None  # the arguments parsed as JSON
    [schema] = [t["parameters"] for t in tools if t["name"] == call.name]
    jsonschema.validate(call.input, schema)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_named_tool_is_called_with_arguments_valid_for_its_schema(fmt: str) -> None:
    response = local(fmt).chat_sync(QUESTION, tools=[WEATHER, PYTHON], tool_choice="get_weather")
    assert response.finish_reason == "tool_calls"
    [call] = response.tool_calls
    assert call.name == "get_weather"
    valid(call, WEATHER)
    assert response.usage is not None
    assert response.usage.input_tokens > 100  # the tools are in the prompt


@pytest.mark.parametrize("fmt", FORMATS)
def test_required_calls_one_of_the_tools(fmt: str) -> None:
    ask = [Msg.user("What is 12*7? Use Python to compute it.")]
    response = local(fmt).chat_sync(ask, tools=[WEATHER, PYTHON], tool_choice="required")
    assert response.tool_calls
    for call in response.tool_calls:
        valid(call, WEATHER, PYTHON)


def _shot(city: str, n: int) -> list[Msg]:
    call = ToolCallBlock(id=f"c{n}", name="get_weather", input={"city": city, "unit": "celsius"})
    return [
        Msg.user(f"What is the weather in {city}?"),
        Msg.assistant(call),
        Msg.tool_result(f"c{n}", "Sunny, 21 degrees", name="get_weather"),
        Msg.assistant(f"It is sunny in {city}."),
    ]


FEW_SHOT = [
    Msg.system("You are a helpful assistant."),
    *_shot("Paris", 1),
    *_shot("Berlin", 2),
    Msg.user("What is the weather in Rome?"),
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_auto_answers_with_text_or_a_call_that_parses(fmt: str) -> None:
    response = local(fmt).chat_sync(FEW_SHOT, tools=[WEATHER], tool_choice="auto", max_tokens=40)
    if response.tool_calls:
        assert response.finish_reason == "tool_calls"
        for call in response.tool_calls:
            valid(call, WEATHER)
    else:
        assert response.text
        assert not any(m in response.text for m in SYNTAXES[fmt].triggers)  # type: ignore[index]


def test_a_call_opened_in_free_text_goes_on_under_the_grammar() -> None:
    # With two calls before it, greedy SmolLM2 opens its Gemma-format reply with `{`: the
    # free generation stops there and the call is generated under the grammar.
    response = local("gemma").chat_sync(FEW_SHOT, tools=[WEATHER], tool_choice="auto")
    [call] = response.tool_calls
    valid(call, WEATHER)
    assert response.finish_reason == "tool_calls"
    assert response.text == ""


def _two(first: str, second: str, n: int) -> list[Msg]:
    calls = [
        ToolCallBlock(id=f"{c}{n}", name="get_weather", input={"city": city, "unit": "celsius"})
        for c, city in (("a", first), ("b", second))
    ]
    return [
        Msg.user(f"What is the weather in {first} and in {second}?"),
        Msg.assistant(*calls),
        Msg.tool_result(f"a{n}", "Sunny", name="get_weather"),
        Msg.tool_result(f"b{n}", "Rainy", name="get_weather"),
        Msg.assistant(f"Sunny in {first}, rainy in {second}."),
    ]


PAIRS = [
    Msg.system("You are a helpful assistant."),
    *_two("Paris", "Berlin", 1),
    *_two("Oslo", "Lima", 2),
    Msg.user("What is the weather in Rome and in Madrid?"),
]


def test_hermes_calls_follow_one_another_when_parallel_calls_are_allowed() -> None:
    # After each call the model goes on: greedy SmolLM2, shown pairs of calls, opens a second.
    model = local("hermes")
    both = model.chat_sync(PAIRS, tools=[WEATHER], tool_choice="required", max_tokens=120)
    assert len(both.tool_calls) == 2
    assert both.tool_calls[0].input["city"] == "Rome"
    for call in both.tool_calls:
        valid(call, WEATHER)
    assert len({c.id for c in both.tool_calls}) == 2
    one = model.chat_sync(
        PAIRS, tools=[WEATHER], tool_choice="required", max_tokens=120, parallel_tool_calls=False
    )
    [call] = one.tool_calls
    assert call.input == both.tool_calls[0].input


@pytest.mark.parametrize("fmt", FORMATS)
def test_auto_streams_text_until_a_call_would_open(fmt: str) -> None:
    async def main() -> list[Any]:
        stream = local(fmt).chat_stream(
            [Msg.user("Tell me about Paris.")], tools=[WEATHER], tool_choice="auto", max_tokens=30
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(main())
    final = chunks[-1]
    if final.tool_calls:
        valid(final.tool_calls[0], WEATHER)
    else:
        assert len(chunks) > 3  # text came in pieces, not whole
        assert "".join(c.text for c in chunks[:-1]) == final.text


@pytest.mark.parametrize("fmt", FORMATS)
def test_none_answers_in_text_after_a_tool_round(fmt: str) -> None:
    history = [*FEW_SHOT[:3], Msg.tool_result("c1", "Sunny, 21 degrees", name="get_weather")]
    response = local(fmt).chat_sync(history, tools=[WEATHER], tool_choice="none", max_tokens=30)
    assert not response.tool_calls
    assert response.text


@pytest.mark.parametrize("fmt", FORMATS)
async def test_an_agent_completes_a_tool_round_in_each_format(fmt: str) -> None:
    asked: list[int] = []

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two whole numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        asked.append(a * b)
        return a * b

    agent = Agent(
        "calc",
        LocalChatModel(
            parameters={"seed": 7, "max_tokens": 48},
            tool_format=fmt,
            chat_template=TEMPLATES[fmt],
        ),
        system_prompt="You are a helpful assistant.",
        tools=[multiply],
        tool_choice=lambda index: "required" if index == 0 else "none",
        max_iters=3,
    )
    events = [event async for event in agent.stream("What is 12 times 7?")]

    [ended] = [e for e in events if isinstance(e, ToolCallEnded)]
    assert ended.call.name == "multiply"
    assert isinstance(ended.call.input["a"], int)  # typed by the grammar
    assert isinstance(ended.call.input["b"], int)
    assert asked == [ended.call.input["a"] * ended.call.input["b"]]
    completed = [e.msg for e in events if isinstance(e, MessageCompleted)]
    assert [m.role for m in completed] == ["assistant", "tool", "assistant"]
    assert events[-1].status == "completed"
    assert events[-1].final.text.strip()


# -- cancellation ------------------------------------------------------------------------------

LONG = {
    "name": "write",
    "description": "Write a story.",
    "parameters": {
        "type": "object",
        "properties": {"story": {"type": "string", "minLength": 2000}},
        "required": ["story"],
    },
}


@pytest.fixture
def constrained(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Marks when a call's constrained generation starts, and keeps the body it returns."""
    seen: dict[str, Any] = {"started": threading.Event(), "bodies": []}
    real = _native._constrained

    def recording(*args: Any) -> Generator[Any, None, str]:
        seen["started"].set()
        body = yield from real(*args)
        seen["bodies"].append(body)
        return body

    monkeypatch.setattr(_native, "_constrained", recording)
    return seen


@pytest.mark.parametrize("fmt", ["hermes", "phi4"])
def test_cancelling_mid_call_stops_the_worker_and_frees_the_model(
    fmt: str, constrained: dict[str, Any]
) -> None:
    model = local(fmt)

    async def main() -> str:
        async def call() -> None:
            await model.chat(
                [Msg.user("Write me a long story.")],
                tools=[LONG],
                tool_choice="write",
                max_tokens=1500,
            )

        task = asyncio.create_task(call())
        started = await asyncio.to_thread(constrained["started"].wait, 120)
        assert started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        after = await model.chat([Msg.user("Hi")], max_tokens=4)
        return after.text

    assert asyncio.run(main())  # the model was free for the next generation
    [body] = constrained["bodies"]
    # Stopped inside the call: the body is a cut-off call, nowhere near its 2000 characters.
    assert parse_body(SYNTAXES[fmt], body) is None  # type: ignore[index]
    assert len(json.dumps(body)) < 2000


@pytest.mark.parametrize("fmt", ["hermes", "llama3", "gemma"])
def test_a_forced_call_streams_its_arguments(fmt: str) -> None:
    async def main() -> list[Any]:
        stream = local(fmt).chat_stream(QUESTION, tools=[WEATHER], tool_choice="get_weather")
        return [chunk async for chunk in stream]

    chunks = asyncio.run(main())
    pieces = [c.content[0] for c in chunks[:-1]]
    assert len(pieces) > 3  # the name first, then the arguments as they are written
    assert all(isinstance(p, ToolCallBlock) for p in pieces)
    assert pieces[0].name == "get_weather"
    [call] = chunks[-1].tool_calls
    valid(call, WEATHER)
    assert chunks[-1].finish_reason == "tool_calls"


def test_cancelling_a_streamed_call_interrupts_it(constrained: dict[str, Any]) -> None:
    model = local("hermes")

    async def main() -> tuple[Any, int]:
        stream = model.chat_stream(
            [Msg.user("Write me a long story.")], tools=[LONG], tool_choice="write", max_tokens=1500
        )
        seen = 0
        async for chunk in stream:
            if chunk.is_last:
                break
            seen += 1
            if seen == 5:
                stream.cancel()
        await model.chat([Msg.user("Hi")], max_tokens=4)
        return stream.response, seen

    final, seen = asyncio.run(main())
    assert seen == 5
    assert final.finish_reason == "interrupted"
    [body] = constrained["bodies"]
    assert parse_body(SYNTAXES["hermes"], body) is None  # stopped inside the call
