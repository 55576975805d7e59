"""What the Qwen compatibility tests share: a tool written as Qwen-Agent's docs write one, the
demo MCP server's config, and a message's plain Qwen fields."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from parley.compat.qwen import BaseTool, Message
from parley.providers.openai.server import Reply, ToolCall

MCP_SERVER = Path(__file__).parents[1] / "tools" / "mcp_servers" / "demo_server.py"
"""The tests' MCP server (tools `add`, `echo`, ...), run over stdio."""


def demo_mcp_servers() -> dict[str, Any]:
    """A function-list entry opening the demo MCP server as `demo` (Qwen-Agent's form)."""
    return {"mcpServers": {"demo": {"command": sys.executable, "args": [str(MCP_SERVER), "stdio"]}}}


def plain(message: Message | dict[str, Any]) -> dict[str, Any]:
    """A message's Qwen fields, `extra` kept to `function_id` (parley adds its records)."""
    data = message.model_dump() if isinstance(message, Message) else dict(message)
    extra = data.pop("extra", None) or {}
    if "function_id" in extra:
        data["function_id"] = extra["function_id"]
    return data


class CityWeather(BaseTool):
    """The weather of a city; a test module registers a subclass (which gets its own `asked`)."""

    description = "Get the current weather for a city."
    parameters: ClassVar[list[dict[str, Any]]] = [
        {"name": "city", "type": "string", "description": "The city name.", "required": True}
    ]
    asked: ClassVar[list[dict[str, Any]]] = []
    """The arguments of every call, in order (each subclass has its own list)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.asked = []

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        args = self._verify_json_format_args(params)
        self.asked.append(args)
        return f"Sunny, 21 degrees C in {args['city']}"


@dataclass(frozen=True)
class ParisWeather:
    """A scripted exchange over the OpenAI wire: the model reasons, calls `tool` for Paris as
    `call_id`, then answers; with the Qwen response it makes and the requests it sends."""

    tool: str
    call_id: str

    def steps(self) -> list[Reply]:
        """The model's two turns, for an `OpenAIServer`."""
        return [
            Reply(
                reasoning="The user wants Paris.",
                tool_calls=[ToolCall(self.tool, {"city": "Paris"}, id=self.call_id)],
            ),
            Reply(text="It is sunny in Paris."),
        ]

    def response(self) -> list[dict[str, Any]]:
        """The Qwen response (as `plain` shows it), as Qwen-Agent gives it: the reasoning, the
        call, the function's result, the answer."""
        return [
            {"role": "assistant", "content": "", "reasoning_content": "The user wants Paris."},
            {
                "role": "assistant",
                "content": "",
                "function_call": {"name": self.tool, "arguments": '{"city": "Paris"}'},
                "function_id": self.call_id,
            },
            {
                "role": "function",
                "content": "Sunny, 21 degrees C in Paris",
                "name": self.tool,
                "function_id": self.call_id,
            },
            {"role": "assistant", "content": "It is sunny in Paris."},
        ]

    def check_requests(self, first: dict[str, Any], second: dict[str, Any]) -> None:
        """The two requests of an agent on `qwen3-8b` whose system message is "You are
        helpful.": the tool offered natively, its result sent back for the call."""
        assert first["model"] == "qwen3-8b"
        assert first["messages"][0] == {"role": "system", "content": "You are helpful."}
        assert first["tools"][0]["function"]["name"] == self.tool
        tool_message = second["messages"][-1]
        assert (tool_message["role"], tool_message["tool_call_id"]) == ("tool", self.call_id)
