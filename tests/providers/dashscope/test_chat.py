"""`DashScopeChatModel` through the real `dashscope` SDK against the local native-API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.errors import (
    ContentFilterError,
    ModelHTTPError,
    UserError,
)
from parley.messages import ThinkingBlock, ToolCallBlock
from parley.providers.dashscope.server import (
    TEXT_PATH,
    DashScopeServer,
    HTTPError,
    Reply,
    ToolCall,
)
from tests._requires import require_module
from tests.providers._chat import HI, TOOLS, WEATHER_FUNCTION
from tests.providers._fixtures import ModelFactory

require_module("dashscope", "dashscope")


# -- answers --------------------------------------------------------------------------------


async def test_the_request_and_the_cached_tokens(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # The answer, its finish and its usage, as every provider's: test_chat_contract.py.
    server.add(Reply(text="Hello!", input_tokens=12, output_tokens=3, cached_tokens=8))
    response = await make_model().chat(HI)
    assert response.usage is not None
    assert response.usage.cached_tokens == 8
    [request] = server.requests
    assert request.path == TEXT_PATH
    assert request.json == {
        "model": "qwen-plus",
        "input": {"messages": [{"role": "user", "content": "Hi"}]},
        "parameters": {"result_format": "message"},
    }
    assert request.headers["authorization"] == "Bearer sk-test"
    assert "x-dashscope-sse" not in request.headers
    server.assert_consumed()


async def test_the_request_id_is_the_response_id(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="a", response_id="req-1"), Reply(text="b", response_id="req-2"))
    model = make_model()
    assert (await model.chat(HI)).id == "req-1"
    assert (await model.chat_stream(HI).collect()).id == "req-2"


async def test_a_stream_asks_for_server_sent_increments(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # The stream's chunks and usage, as every provider's: tests/providers/test_chat_contract.py.
    server.add(Reply(text="Hello, world", chunk_size=5))
    await make_model().chat_stream(HI).collect()
    [request] = server.requests
    assert request.headers["x-dashscope-sse"] == "enable"
    assert request.json["parameters"] == {"result_format": "message", "incremental_output": True}


async def test_a_stream_that_repeats_the_whole_text_gives_the_same_deltas(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # Without incremental_output DashScope sends the whole message so far in every event.
    calls = [ToolCall("weather", {"city": "Paris"}, "call_a")]
    reply = Reply(reasoning="Think.", text="Hello, world", tool_calls=calls, chunk_size=5)
    server.add(reply, reply)
    model = make_model()
    cumulative = [c async for c in model.chat_stream(HI, tools=TOOLS, incremental_output=False)]
    incremental = [c async for c in model.chat_stream(HI, tools=TOOLS)]
    bodies = server.bodies()
    assert bodies[0]["parameters"]["incremental_output"] is False
    assert bodies[1]["parameters"]["incremental_output"] is True

    def seen(chunks: list[Any]) -> list[tuple[str, str, str]]:
        return [
            (c.thinking, c.text, "".join(t.raw_input or "" for t in c.tool_calls))
            for c in chunks[:-1]
        ]

    assert seen(cumulative) == seen(incremental)
    assert [c.text for c in cumulative[:-1] if c.text] == ["Hello", ", wor", "ld"]
    for final in (cumulative[-1], incremental[-1]):
        assert (final.thinking, final.text) == ("Think.", "Hello, world")
        assert [(c.id, c.name, c.input) for c in final.tool_calls] == [
            ("call_a", "weather", {"city": "Paris"})
        ]
        assert final.finish_reason == "tool_calls"


async def test_two_models_on_two_endpoints_at_once(make_model: ModelFactory) -> None:
    # Each model keeps its own endpoint: no process-wide `dashscope.base_http_api_url`.
    with DashScopeServer() as beijing, DashScopeServer() as singapore:
        beijing.add(Reply(text="from Beijing", chunk_size=2, chunk_delay=0.01))
        singapore.add(Reply(text="from Singapore", chunk_size=2, chunk_delay=0.01))
        first = make_model(credential=beijing.credential("sk-cn"))
        second = make_model(credential=singapore.credential("sk-intl"))
        answers = await asyncio.gather(
            first.chat_stream(HI).collect(), second.chat_stream(HI).collect()
        )
        assert [a.text for a in answers] == ["from Beijing", "from Singapore"]
        assert beijing.requests[0].headers["authorization"] == "Bearer sk-cn"
        assert singapore.requests[0].headers["authorization"] == "Bearer sk-intl"
        beijing.assert_consumed()
        singapore.assert_consumed()


async def test_the_workspace_goes_in_its_header(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    await make_model(credential=server.credential(workspace="ws-123")).chat(HI)
    assert server.requests[0].headers["x-dashscope-workspace"] == "ws-123"


# -- thinking -------------------------------------------------------------------------------


async def test_thinking_streams_first_and_is_kept(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(reasoning="Let me think.", text="42", chunk_size=4))
    chunks = [c async for c in make_model().chat_stream(HI, enable_thinking=True)]
    assert "".join(c.thinking for c in chunks[:-1]) == "Let me think."
    final = chunks[-1]
    assert isinstance(final.content[0], ThinkingBlock)
    assert (final.thinking, final.text) == ("Let me think.", "42")
    assert server.bodies()[0]["parameters"]["enable_thinking"] is True


async def test_thinking_models_answer_whole_calls_by_streaming(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    # QwQ, and Qwen3's open models while thinking, answer only streamed calls.
    server.add(Reply(reasoning="r", text="qwq"), Reply(reasoning="r", text="qwen3"))
    server.add(Reply(text="no thinking"))
    assert (await make_model("qwq-plus").chat(HI, thinking_budget=100)).text == "qwq"
    assert (await make_model("qwen3-32b").chat(HI)).thinking == "r"
    assert (await make_model("qwen3-32b").chat(HI, enable_thinking=False)).text == "no thinking"
    streamed = [r.headers.get("x-dashscope-sse") for r in server.requests]
    assert streamed == ["enable", "enable", None]
    assert server.bodies()[0]["parameters"]["thinking_budget"] == 100


async def test_a_thinking_tool_round_trip(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(reasoning="Need weather.", tool_calls=[ToolCall("weather", {"city": "Oslo"}, "c1")]),
        Reply(reasoning="Got it.", text="Cold."),
    )
    model = make_model()
    first = await model.chat_stream(HI, tools=TOOLS, enable_thinking=True).collect()
    history = [*HI, first.to_msg(), Msg.tool_result("c1", "-5C", name="weather")]
    second = await model.chat_stream(history, tools=TOOLS, enable_thinking=True).collect()
    assert second.text == "Cold."
    sent = server.bodies()[1]["input"]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "content": "-5C", "tool_call_id": "c1", "name": "weather"}


# -- tools ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "tools", "wire"),
    [
        ("auto", TOOLS, "auto"),
        ("none", TOOLS, "none"),
        ("time", TOOLS, {"type": "function", "function": {"name": "time"}}),
        # DashScope has no `required`: with one tool, naming it means the same.
        ("required", TOOLS[:1], {"type": "function", "function": {"name": "weather"}}),
        ("required", TOOLS, "auto"),
    ],
)
async def test_tool_choice_on_the_wire(
    server: DashScopeServer, make_model: ModelFactory, choice: str, tools: Any, wire: Any
) -> None:
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": True}).chat(HI, tools, choice)
    parameters = server.bodies()[0]["parameters"]
    assert parameters["tool_choice"] == wire
    assert parameters["parallel_tool_calls"] is True
    assert parameters["tools"][0] == WEATHER_FUNCTION


async def test_parameters_on_the_wire(server: DashScopeServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    model = make_model(parameters={"temperature": 0.5, "max_tokens": 100, "top_k": 20})
    await model.chat(
        HI,
        seed=7,
        stop=["END"],
        repetition_penalty=1.1,
        enable_search=True,
        extra_parameters={"translation_options": {"target_lang": "English"}},
    )
    parameters = server.bodies()[0]["parameters"]
    assert parameters == {
        "result_format": "message",
        "temperature": 0.5,
        "max_tokens": 100,
        "top_k": 20,
        "seed": 7,
        "stop": ["END"],
        "repetition_penalty": 1.1,
        "enable_search": True,
        "translation_options": {"target_lang": "English"},
    }


async def test_unknown_parameter_is_a_user_error(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="unknown parameter 'temprature'"):
        await make_model().chat(HI, temprature=1)


@pytest.mark.parametrize(
    ("reason", "expected"), [("stop", "stop"), ("length", "length"), ("tool_calls", "tool_calls")]
)
async def test_finish_reasons(
    server: DashScopeServer, make_model: ModelFactory, reason: str, expected: str
) -> None:
    server.add(Reply(text="abc", finish_reason=reason), Reply(text="abc", finish_reason=reason))
    model = make_model()
    assert (await model.chat(HI)).finish_reason == expected
    assert (await model.chat_stream(HI).collect()).finish_reason == expected


# -- structured output ----------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_turns_thinking_off_when_forcing_is_refused(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "InvalidParameter", "tool_choice is not supported in thinking mode"),
        Reply(tool_calls=[ToolCall("generate_response", {"name": "Rome", "population": 3})]),
    )
    model = make_model(parameters={"enable_thinking": True})
    result = await model.generate_structured_output(HI, City)
    assert (result.strategy, result.content) == ("thinking_off", {"name": "Rome", "population": 3})
    first, second = server.requests
    assert first.json["parameters"]["enable_thinking"] is True
    assert second.json["parameters"]["enable_thinking"] is False
    # Thinking off, the whole answer comes back whole.
    assert "x-dashscope-sse" not in second.headers


async def test_structured_output_by_json_schema_then_auto_then_text(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    refused = HTTPError(400, "InvalidParameter", "tool_choice is not supported")
    server.add(
        refused,
        refused,
        HTTPError(400, "InvalidParameter", "json_schema is not supported by this model"),
        Reply(text="I will not call tools."),
        Reply(text='Here: ```json\n{"name": "Lima", "population": 9}\n```'),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert (result.strategy, result.content) == ("text", {"name": "Lima", "population": 9})
    native = server.bodies()[2]["parameters"]
    assert native["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": City.model_json_schema()},
    }
    assert "tools" not in native
    auto = server.bodies()[3]["parameters"]
    assert auto["tool_choice"] == "auto"
    server.assert_consumed()


async def test_json_object_mode_is_a_parameter(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text='{"a": 1}'))
    await make_model().chat([Msg.user("Answer in JSON.")], json_object=True)
    assert server.bodies()[0]["parameters"]["response_format"] == {"type": "json_object"}


# -- retries and faults ---------------------------------------------------------------------


async def test_throttling_without_retry_after_is_retried_with_backoff(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError(429, "Throttling.AllocationQuota", "quota"), Reply(text="ok"))
    assert (await make_model().chat(HI)).text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "InvalidParameter"),
        (401, "InvalidApiKey"),
        (403, "AccessDenied"),
        (404, "ModelNotFound"),
        (422, "InvalidParameter"),
    ],
)
async def test_client_errors_are_not_retried(
    server: DashScopeServer, make_model: ModelFactory, status: int, code: str
) -> None:
    server.add(HTTPError(status, code, "nope"), Reply(text="unused"))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model().chat(HI)
    assert caught.value.status_code == status
    assert caught.value.body["code"] == code
    assert "nope" in str(caught.value)
    assert code in str(caught.value)
    assert caught.value.body["request_id"] in str(caught.value)
    assert len(server.requests) == 1


async def test_output_moderation_mid_stream_is_a_content_filter_error(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    moderated = {
        "code": "DataInspectionFailed",
        "message": "Output data may contain inappropriate content.",
    }
    server.add(Reply(text="abcdef", chunk_size=2, error_at=1, error=moderated, error_status=400))
    with pytest.raises(ContentFilterError, match="inappropriate"):
        await make_model().chat_stream(HI).collect()
    assert len(server.requests) == 1


# -- error mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("step", "error"),
    # A rate limit, a prompt too long, filtered input: the contract suite.
    [
        (HTTPError(401, "InvalidApiKey", "Invalid API-key provided."), ModelHTTPError),
        (
            HTTPError(
                400,
                "Arrearage",
                "Access denied, please make sure your account is in good standing.",
            ),
            ModelHTTPError,
        ),
    ],
)
async def test_other_codes_are_plain_http_errors(
    server: DashScopeServer,
    make_model: ModelFactory,
    step: HTTPError,
    error: type[Exception],
    streamed: bool,
) -> None:
    server.add(step)
    model = make_model(max_retries=0)
    with pytest.raises(error) as caught:
        await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    assert type(caught.value) is error
    assert step.message in str(caught.value)


# -- an agent on the scripted server ---------------------------------------------------------


async def test_an_agent_runs_a_tool_round(
    server: DashScopeServer, make_model: ModelFactory
) -> None:
    from parley.agents import Agent  # noqa: PLC0415
    from tests.sample_tools import add  # noqa: PLC0415

    server.add(
        Reply(tool_calls=[ToolCall("add", {"a": 2, "b": 3}, "call_1")], chunk_size=5),
        Reply(text="It is 5."),
    )
    agent = Agent("calc", make_model(stream=True), system_prompt="You add.", tools=[add])
    final = await agent.reply("What is 2 + 3?")
    assert final.text == "It is 5."
    second = server.bodies()[1]["input"]["messages"]
    assert second[0] == {"role": "system", "content": "You add."}
    assert second[-1] == {"role": "tool", "content": "5", "tool_call_id": "call_1", "name": "add"}
    assert second[-2]["tool_calls"][0]["function"]["name"] == "add"
    assert isinstance((await agent.memory.get())[1].content[0], ToolCallBlock)
    server.assert_consumed()
