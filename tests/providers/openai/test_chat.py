"""`OpenAIChatModel` through the real `openai` SDK against the local wire-format server."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from parley.errors import (
    ContextLengthError,
    UserError,
)
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply
from tests.providers._chat import HI, TOOLS, WEATHER_FUNCTION
from tests.providers._fixtures import ModelFactory

# -- answers --------------------------------------------------------------------------------


# The answers, faults and retries every provider shares: tests/providers/test_chat_contract.py.


async def test_the_request_and_the_cached_tokens(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello!", input_tokens=12, output_tokens=3, cached_tokens=8))
    response = await make_model().chat(HI)
    assert response.usage is not None
    assert response.usage.cached_tokens == 8
    assert server.bodies() == [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    ]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    server.assert_consumed()


async def test_a_stream_asks_for_its_usage(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="Hello, world", chunk_size=5))
    await make_model().chat_stream(HI).collect()
    body = server.bodies()[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("time", {"type": "function", "function": {"name": "time"}}),
    ],
)
async def test_tool_choice_on_the_wire(
    server: OpenAIServer, make_model: ModelFactory, choice: str, wire: Any
) -> None:
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": False}).chat(HI, TOOLS, choice)
    body = server.bodies()[0]
    assert body["tool_choice"] == wire
    assert body["parallel_tool_calls"] is False
    assert body["tools"][0] == WEATHER_FUNCTION


async def test_parameters_on_the_wire(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    model = make_model(parameters={"temperature": 0.5, "max_tokens": 100})
    await model.chat(HI, reasoning_effort="low", seed=7, stop=["END"])
    body = server.bodies()[0]
    assert body["temperature"] == 0.5
    assert body["max_completion_tokens"] == 100
    assert "max_tokens" not in body
    assert (body["reasoning_effort"], body["seed"], body["stop"]) == ("low", 7, ["END"])


async def test_unknown_parameter_is_a_user_error(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="unknown parameter 'temprature'"):
        await make_model().chat(HI, temprature=1)


# -- structured output ----------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_falls_back_when_tool_choice_is_refused(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "tool_choice is not supported", code="invalid_request"),
        Reply(text='{"name": "Oslo", "population": 1}'),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "native"
    assert result.content == {"name": "Oslo", "population": 1}
    second = server.bodies()[1]
    assert second["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": City.model_json_schema()},
    }
    assert "tools" not in second
    server.assert_consumed()


# -- error mapping ---------------------------------------------------------------------------


async def test_a_context_length_error_without_its_code_is_read_from_the_message(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # By `code` (and the other statuses): the contract suite; some servers send only this.
    server.add(HTTPError(400, "This model's maximum context length is 8192 tokens"))
    with pytest.raises(ContextLengthError):
        await make_model(max_retries=0).chat(HI)


# -- content as typed parts (Mistral's reasoning models) -------------------------------------


async def test_stream_of_content_parts_gives_thinking_then_text(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(reasoning="Two and two.", text="Four.", chunk_size=4, content_parts=True))
    chunks = [c async for c in make_model().chat_stream(HI)]
    deltas = [
        (b.type, b.thinking if b.type == "thinking" else b.text)
        for c in chunks[:-1]
        for b in c.content
    ]
    assert deltas == [
        ("thinking", "Two "),
        ("thinking", "and "),
        ("thinking", "two."),
        ("text", "Four"),
        ("text", "."),
    ]
    final = chunks[-1]
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert (final.thinking, final.text) == ("Two and two.", "Four.")
    assert final.finish_reason == "stop"


async def test_whole_answer_of_content_parts(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(reasoning="Two and two.", text="Four.", content_parts=True))
    response = await make_model().chat(HI)
    assert [b.type for b in response.content] == ["thinking", "text"]
    assert (response.thinking, response.text) == ("Two and two.", "Four.")
