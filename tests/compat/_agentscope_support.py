"""What the AgentScope model tests share: the tools they offer, a user message, a stream read,
a scripted weather call."""

from __future__ import annotations

from typing import Any

from parley.compat.agentscope.message import Msg, TextBlock
from parley.compat.agentscope.model import ChatResponse
from parley.providers.openai.server import Reply, ToolCall

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
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the time.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def user(text: str) -> Msg:
    """A user's text message, as AgentScope writes one."""
    return Msg(name="user", role="user", content=[TextBlock(text=text)])


async def collect(stream: Any) -> list[ChatResponse]:
    """Every chunk of a model's stream."""
    return [chunk async for chunk in stream]


def paris_weather_steps(answer: str) -> list[Reply]:
    """An OpenAI-wire model that calls `get_weather` for Paris (as `c1`), then answers `answer`."""
    return [
        Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"}, id="c1")]),
        Reply(text=answer),
    ]
