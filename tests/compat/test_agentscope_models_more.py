"""AgentScope's Moonshot, xAI, Gemini embedding and speech models under their own names.

As in test_agentscope_models: snippets in AgentScope's style with only `agentscope` imports
changed to `parley.compat.agentscope`, against `parley.testing` stand-in servers, checking
the request the server got and the answer in AgentScope's shapes.
"""

from __future__ import annotations

import json
from typing import Any

from parley.compat.agentscope.credential import MoonshotCredential, XAICredential
from parley.compat.agentscope.message import Msg, TextBlock, ToolCallBlock
from parley.compat.agentscope.model import ChatResponse, MoonshotChatModel, XAIChatModel
from parley.testing.openai_server import OpenAIServer, Reply, ToolCall

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def user(text: str) -> Msg:
    return Msg(name="user", role="user", content=[TextBlock(text=text)])


async def collect(stream: Any) -> list[ChatResponse]:
    return [chunk async for chunk in stream]


# -- Moonshot -------------------------------------------------------------------------------


async def test_moonshot_streams_and_sends_the_thinking_switch() -> None:
    reply = Reply(text="Kimi here.", reasoning="Greet back.", reasoning_field="reasoning_content")
    with OpenAIServer([reply]) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k2.6",
            parameters=MoonshotChatModel.Parameters(
                thinking_enable=True, max_tokens=256, temperature=0.6
            ),
        )
        chunks = await collect(await model([user("Hello")]))
        await model.aclose()
    assert model.stream is True
    assert model.context_size == 131072
    final = chunks[-1]
    assert final.is_last
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Greet back."  # type: ignore[union-attr]
    assert final.content[1].text == "Kimi here."  # type: ignore[union-attr]
    body = server.bodies()[0]
    assert body["model"] == "kimi-k2.6"
    assert body["stream"] is True
    assert body["thinking"] == {"type": "enabled"}
    assert (body["max_tokens"], body["temperature"]) == (256, 0.6)


async def test_moonshot_sends_thinking_disabled_by_default_and_tool_input_as_json() -> None:
    steps = [Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Beijing"})])]
    with OpenAIServer(steps) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k2-0905-preview",
            stream=False,
        )
        response = await model([user("Weather in Beijing?")], tools=[WEATHER_TOOL])
        await model.aclose()
    assert isinstance(response, ChatResponse)
    (call,) = response.content
    assert isinstance(call, ToolCallBlock)
    assert call.name == "get_weather"
    assert isinstance(call.input, str)  # AgentScope holds tool input as a JSON string
    assert json.loads(call.input) == {"city": "Beijing"}
    body = server.bodies()[0]
    # AgentScope's Moonshot model switches thinking off unless asked, on every call.
    assert body["thinking"] == {"type": "disabled"}
    assert body["tools"][0]["function"]["name"] == "get_weather"


async def test_moonshot_kimi_k3_takes_effort_and_max_completion_tokens() -> None:
    with OpenAIServer([Reply(text="Done.")]) as server:
        model = MoonshotChatModel(
            credential=MoonshotCredential(api_key="sk-test", base_url=server.url),
            model="kimi-k3",
            parameters=MoonshotChatModel.Parameters(reasoning_effort="high", max_tokens=500),
        )
        await collect(await model([user("Go.")]))
        await model.aclose()
    body = server.bodies()[0]
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 500
    assert "max_tokens" not in body
    assert "thinking" not in body


# -- xAI ------------------------------------------------------------------------------------


async def test_xai_streams_with_effort_only_when_thinking() -> None:
    reply = Reply(text="42.", reasoning="Count.", reasoning_field="reasoning_content")
    with OpenAIServer([reply, Reply(text="Again 42.")]) as server:
        thinking = XAIChatModel(
            credential=XAICredential(api_key="xai-test", base_url=server.url),
            model="grok-3-mini",
            parameters=XAIChatModel.Parameters(
                thinking_enable=True, reasoning_effort="medium", top_p=0.9
            ),
        )
        chunks = await collect(await thinking([user("Answer?")]))
        plain = XAIChatModel(
            credential=XAICredential(api_key="xai-test", base_url=server.url),
            model="grok-3-mini",
            parameters=XAIChatModel.Parameters(reasoning_effort="high"),
            stream=False,
        )
        response = await plain([user("Answer?")])
        await thinking.aclose()
        await plain.aclose()
    assert [b.type for b in chunks[-1].content] == ["thinking", "text"]
    assert isinstance(response, ChatResponse)
    assert response.content[0].text == "Again 42."  # type: ignore[union-attr]
    first, second = server.bodies()
    assert first["model"] == "grok-3-mini"
    assert first["stream"] is True
    assert (first["reasoning_effort"], first["top_p"]) == ("medium", 0.9)
    # As AgentScope: the effort goes only with thinking_enable.
    assert "reasoning_effort" not in second
    assert server.requests[0].headers["authorization"] == "Bearer xai-test"


def test_xai_defaults_are_agentscope_s() -> None:
    model = XAIChatModel(credential=XAICredential(api_key="k"), model="grok-4")
    assert (model.stream, model.max_retries, model.retry_delay) == (True, 3, 1.0)
    assert model.context_size == 131072
    assert model.parameters == XAIChatModel.Parameters()
