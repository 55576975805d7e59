"""Structured output through each strategy, and an agent's tool loop, on the scripted server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.agents import Agent
from parley.providers.anthropic.server import (
    AnthropicServer,
    HTTPError,
    RecordedRequest,
    Reply,
    ToolUse,
)
from parley.tools import tool
from tests.providers._fixtures import ModelFactory

HI = [Msg.user("Name a city.")]
FORCED = {"type": "tool", "name": "generate_response"}
THINKING_WITH_FORCED = "Thinking may not be enabled when tool_choice forces tool use."


class City(BaseModel):
    name: str
    population: int


def city_call(**arguments: Any) -> Reply:
    return Reply(
        tool_calls=[ToolUse("generate_response", arguments or {"name": "Oslo", "population": 1})]
    )


async def test_forced_tool_on_a_model_that_does_not_think_by_default(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(city_call())
    result = await make_model("claude-opus-4-8").generate_structured_output(HI, City)
    assert (result.strategy, result.parsed) == ("forced", City(name="Oslo", population=1))
    (body,) = server.bodies()
    assert body["tool_choice"] == FORCED
    assert body["tools"][0]["input_schema"] == City.model_json_schema()
    assert "thinking" not in body


async def test_a_thinking_model_answers_with_thinking_off_in_one_request(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # Sonnet 5 thinks unless told not to: the forced call is not even sent while it would.
    server.add(city_call())
    result = await make_model("claude-sonnet-5").generate_structured_output(HI, City)
    assert result.strategy == "thinking_off"
    (body,) = server.bodies()
    assert (body["thinking"], body["tool_choice"]) == ({"type": "disabled"}, FORCED)


async def test_the_api_refusing_forced_choice_falls_back_to_thinking_off(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    def refuse_while_thinking(request: RecordedRequest) -> Any:
        if (request.json.get("thinking") or {}).get("type") == "disabled":
            return city_call(name="Rome", population=3)
        return HTTPError(400, THINKING_WITH_FORCED)

    server.add(refuse_while_thinking, refuse_while_thinking)
    result = await make_model("claude-opus-4-8").generate_structured_output(HI, City)
    assert result.strategy == "thinking_off"
    assert result.content == {"name": "Rome", "population": 3}
    assert len(server.requests) == 2
    server.assert_consumed()


@pytest.mark.parametrize("model", ["claude-fable-5-2", "claude-sonnet-5-5"])
async def test_a_model_refusing_forced_choice_uses_the_apis_json_schema_output(
    server: AnthropicServer, make_model: ModelFactory, model: str
) -> None:
    # Fable thinks always; Sonnet 5.5 takes no `disabled` and no forced choice in any mode:
    # neither tool strategy is sent.
    server.add(Reply(text='{"name": "Lima", "population": 10}'))
    result = await make_model(model).generate_structured_output(HI, City)
    assert (result.strategy, result.content) == ("native", {"name": "Lima", "population": 10})
    (body,) = server.bodies()
    schema = body["output_config"]["format"]
    assert schema["type"] == "json_schema"
    # The SDK's transform makes every object closed, as the API's structured outputs want.
    assert schema["schema"]["additionalProperties"] is False
    assert set(schema["schema"]["required"]) == {"name", "population"}
    assert "tools" not in body


async def test_auto_then_text_when_the_api_refuses_the_rest(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    refused = [HTTPError(400, "not supported") for _ in range(3)]
    server.add(*refused, city_call(name="Bern", population=2))
    result = await make_model("claude-opus-4-8").generate_structured_output(HI, City)
    assert (result.strategy, result.content) == ("auto", {"name": "Bern", "population": 2})
    assert server.bodies()[3]["tool_choice"] == {"type": "auto"}

    server.add(
        *refused,
        Reply(text="No tool, sorry."),
        Reply(text='```json\n{"name": "Kyiv", "population": 3}\n```'),
    )
    result = await make_model("claude-opus-4-8").generate_structured_output(HI, City)
    assert (result.strategy, result.content) == ("text", {"name": "Kyiv", "population": 3})
    server.assert_consumed()


async def test_an_invalid_answer_is_sent_back_once_as_a_tool_error(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(city_call(name="Oslo", population="many"), city_call(name="Oslo", population=700))
    result = await make_model("claude-opus-4-8").generate_structured_output(HI, City)
    assert (result.attempts, result.content["population"]) == (2, 700)
    retry = server.bodies()[1]["messages"]
    assert retry[-1]["content"][0]["type"] == "tool_result"
    assert retry[-1]["content"][0]["is_error"] is True


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_an_agent_calls_a_tool_and_answers(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(thinking="Use the tool.", tool_calls=[ToolUse("add", {"a": 2, "b": 3}, "toolu_add")]),
        Reply(text="2 + 3 = 5"),
    )
    agent = Agent("calc", make_model(), system_prompt="You add.", tools=[add])
    answer = await agent.reply(Msg.user("What is 2 + 3?"))
    assert answer.text == "2 + 3 = 5"
    first, second = server.bodies()
    assert first["system"] == [{"type": "text", "text": "You add."}]
    assert first["tools"][0]["name"] == "add"
    assert second["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_add",
        "name": "add",
        "input": {"a": 2, "b": 3},
    }
    assert second["messages"][1]["content"][0]["type"] == "thinking"
    assert second["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_add", "content": "5"}],
    }
