"""Prompt-based tool calling (Qwen-Agent's `nous` format) over a model without tools."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from parley.agents import Agent, PromptedToolsModel
from parley.agents._nous import NousParser, nous_messages, tools_prompt
from parley.messages import Msg, ToolCallBlock
from parley.models import TextDelta, ToolCallDelta
from parley.models.testing import ScriptedModel
from parley.models.tools import ToolSpec
from parley.tools import tool

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def feed_in_pieces(text: str, size: int) -> list[Any]:
    parser = NousParser()
    out: list[Any] = []
    for start in range(0, len(text), size):
        out += parser.feed(text[start : start + size])
    return out + parser.close()


def texts(deltas: list[Any]) -> str:
    return "".join(d.text for d in deltas if isinstance(d, TextDelta))


def calls(deltas: list[Any]) -> list[tuple[str | None, Any]]:
    return [(d.name, json.loads(d.arguments)) for d in deltas if isinstance(d, ToolCallDelta)]


# -- rendering -------------------------------------------------------------------------------------


def test_tools_go_into_the_system_prompt_in_qwens_words() -> None:
    rendered = nous_messages([Msg.system("Be kind."), Msg.user("Hi")], [WEATHER], None)
    system = rendered[0].text
    assert system.startswith("Be kind.\n\n# Tools\n\nYou may call one or more functions")
    assert json.dumps(WEATHER.openai()) in system
    assert "<tools>\n" in system
    assert '{"name": <function-name>, "arguments": <args-json-object>}' in system
    assert rendered[1].text == "Hi"
    # No system message: one is added.
    assert nous_messages([Msg.user("Hi")], [WEATHER], None)[0].role == "system"


def test_calls_and_results_are_written_as_text() -> None:
    first = ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"})
    second = ToolCallBlock(id="c2", name="get_weather", raw_input='{"city": "Rome"}')
    msgs = [
        Msg.user("Weather?"),
        Msg.assistant("Let me look.", first, second),
        Msg.tool_result("c1", "sunny", name="get_weather"),
        Msg.tool_result("c2", "rain", name="get_weather"),
        Msg.assistant("Sunny and rain."),
    ]
    rendered = nous_messages(msgs, [], None)
    assert [m.role for m in rendered] == ["user", "assistant", "user", "assistant"]
    assert rendered[1].text == (
        "Let me look.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    )
    # Consecutive results share one user turn, as in Qwen-Agent.
    assert rendered[2].text == (
        "<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>"
    )


def test_forcing_is_asked_in_the_prompt() -> None:
    assert tools_prompt([WEATHER], "get_weather").endswith("Call the function get_weather now.")
    assert tools_prompt([WEATHER], "required").endswith("Call at least one function now.")
    hi = Msg.user("Hi")
    assert nous_messages([hi], [WEATHER], "none") == [hi]


# -- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 1000])
def test_calls_are_parsed_whatever_the_chunking(size: int) -> None:
    text = f"Let me check.\n{CALL}\n{CALL.replace('Paris', 'Rome')}"
    deltas = feed_in_pieces(text, size)
    assert texts(deltas) == "Let me check."
    assert calls(deltas) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    assert [d.key for d in deltas if isinstance(d, ToolCallDelta)] == [0, 1]


def test_a_partial_tag_at_a_chunk_end_never_leaks_as_text() -> None:
    parser = NousParser()
    assert texts(parser.feed("Checking <tool")) == "Checking"
    assert parser.feed("_ca") == []
    out = parser.feed('ll>{"name": "get_weather", "arguments": {}}</tool_call>')
    assert calls(out) == [("get_weather", {})]
    # A '<' that turns out not to be the tag is text after all.
    parser = NousParser()
    assert texts(parser.feed("a <to")) == "a"
    assert texts(parser.feed("p> b")) == " <top> b"


def test_text_without_calls_streams_through() -> None:
    deltas = feed_in_pieces("Paris is sunny, 21 < 30.", 4)
    assert texts(deltas) == "Paris is sunny, 21 < 30."
    assert calls(deltas) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"name": "get_weather", "arguments": {"city": "Paris"}', {"city": "Paris"}),  # no brace
        ("{'name': 'get_weather', 'arguments': {'city': 'Paris',}}", {"city": "Paris"}),  # json5
        ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}', {"city": "Paris"}),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}', {"city": "Paris"}),
    ],
)
def test_malformed_calls_are_repaired(body: str, expected: dict[str, Any]) -> None:
    deltas = feed_in_pieces(f"<tool_call>{body}</tool_call>", 3)
    assert calls(deltas) == [("get_weather", expected)]


def test_what_names_no_tool_stays_text_and_an_unclosed_call_is_still_read() -> None:
    assert texts(feed_in_pieces("<tool_call>just words</tool_call>", 4)) == (
        "<tool_call>just words</tool_call>"
    )
    unclosed = feed_in_pieces(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}', 4
    )
    assert calls(unclosed) == [("get_weather", {"city": "Oslo"})]


def test_arguments_that_cannot_be_read_are_kept_raw_for_the_tool_layer() -> None:
    parser = NousParser()
    out = parser.feed('<tool_call>{"name": "get_weather", "arguments": {city: ???}}</tool_call>')
    [delta] = [d for d in out if isinstance(d, ToolCallDelta)]
    assert delta.name == "get_weather"
    assert delta.arguments


# -- the model -------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 4, 9])
async def test_the_wrapped_model_streams_text_then_gives_the_call(chunk_size: int) -> None:
    inner = ScriptedModel([f"Looking it up.\n{CALL}"], chunk_size=chunk_size)
    model = PromptedToolsModel(inner)

    stream = model.chat_stream([Msg.user("Weather in Paris?")], tools=[WEATHER])
    chunks = [chunk async for chunk in stream]

    deltas = chunks[:-1]
    streamed_text = "".join(c.text for c in deltas)
    assert streamed_text == "Looking it up."
    assert "<" not in streamed_text
    final = chunks[-1]
    assert final.is_last
    assert final.text == "Looking it up."
    assert [(c.name, c.input) for c in final.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert final.finish_reason == "tool_calls"
    assert final.usage is not None
    sent = inner.requests[0]
    assert sent.tools == []
    assert sent.parameters.parallel_tool_calls is None
    assert "<tools>" in sent.messages[0].text


async def test_an_agent_calls_tools_through_the_prompt() -> None:
    @tool
    def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: The city.
        """
        return f"Sunny in {city}"

    inner = ScriptedModel([CALL, "It is sunny in Paris."])
    agent = Agent("w", PromptedToolsModel(inner), tools=[get_weather])

    final = await agent.reply("Weather in Paris?")

    assert final.text == "It is sunny in Paris."
    history = await agent.memory.get()
    assert history[2].tool_results[0].output == "Sunny in Paris"
    second = inner.requests[1].messages
    assert second[-1].role == "user"
    assert second[-1].text == "<tool_response>\nSunny in Paris\n</tool_response>"
    assert '"name": "get_weather"' in second[-2].text


async def test_tool_choice_none_leaves_tools_out_and_text_unparsed() -> None:
    inner = ScriptedModel([CALL])
    response = await PromptedToolsModel(inner).chat(
        [Msg.user("Hi")], tools=[WEATHER], tool_choice="none"
    )
    assert response.tool_calls == []
    assert response.text == CALL
    assert "<tools>" not in inner.requests[0].messages[0].text


async def test_structured_output_is_the_inner_models() -> None:
    class City(BaseModel):
        name: str

    answer = ScriptedModel.tool_call("generate_response", {"name": "Paris"})
    inner = ScriptedModel([answer])
    call = ToolCallBlock(id="c1", name="get_weather", input={"city": "Paris"})
    history = [
        Msg.user("Weather?"),
        Msg.assistant(call),
        Msg.tool_result("c1", "sunny", name="get_weather"),
    ]
    result = await PromptedToolsModel(inner).generate_structured_output(history, City)
    assert result.parsed == City(name="Paris")
    assert [m.role for m in inner.requests[0].messages] == ["user", "assistant", "user"]


def test_the_wrapper_reports_the_inner_models_settings() -> None:
    inner = ScriptedModel(context_size=2048, parameters={"temperature": 0.5})
    model = PromptedToolsModel(inner)
    assert model.context_size == 2048
    assert model.parameters.temperature == 0.5
    assert model.model == inner.model
    assert "ScriptedModel" in repr(model)


def test_thought_in_content_streams_as_thinking_and_hides_calls_in_it() -> None:
    from parley.agents._nous import ThinkSplitter  # noqa: PLC0415
    from parley.models.accumulator import TextDelta as Text  # noqa: PLC0415
    from parley.models.accumulator import ThinkingDelta as Thinking  # noqa: PLC0415

    text = "<think>Call <tool_call> later.</think>\nAnswer."
    splitter = ThinkSplitter()
    deltas = [d for i in range(0, len(text), 3) for d in splitter.feed(text[i : i + 3])]
    deltas += splitter.close()
    thought = "".join(d.thinking for d in deltas if isinstance(d, Thinking))
    answer = "".join(d.text for d in deltas if isinstance(d, Text))
    assert (thought, answer) == ("Call <tool_call> later.", "Answer.")
    # Without the opening tag, only `expected` makes it a thought; else it is the answer.
    held = ThinkSplitter(expected=True)
    assert held.feed("no tag") == []
    assert held.close() == [Text("no tag")]
    plain = ThinkSplitter()
    assert plain.feed("Hi </think>") == [Text("Hi </think>")]
