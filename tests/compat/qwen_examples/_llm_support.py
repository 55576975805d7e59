"""What the model-interface example tests share: replies in the prompt formats, the weather
function, stand-ins.

Qwen-Agent writes functions into the prompt by default, so a stand-in server that plays the
model answers with text: `nous_call` (`<tool_call>` JSON) or `qwen_call` (`✿FUNCTION✿`
lines). `registered_stand_in` registers a local tool under a network tool's name for one
test (parley's own may be registered, or not yet) and puts the registry back after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from parley.tools import TOOL_REGISTRY, Tool, register_tool

WEATHER_FUNCTIONS: list[dict[str, Any]] = [
    {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location"],
        },
    }
]
"""The function the examples' weather questions are asked with (`get_current_weather`)."""


def nous_call(name: str, arguments: dict[str, Any]) -> str:
    """A call as a model writes it in the `nous` format."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def qwen_call(name: str, arguments: dict[str, Any]) -> str:
    """A call as a model writes it in the `qwen` format."""
    return f"✿FUNCTION✿: {name}\n✿ARGS✿: {json.dumps(arguments, ensure_ascii=False)}\n"


def tools_in_prompt(system: str) -> list[dict[str, Any]]:
    """The function descriptions a `nous` system prompt lists."""
    inside = system[system.index("<tools>\n") + len("<tools>\n") : system.index("\n</tools>")]
    return [json.loads(line)["function"] for line in inside.splitlines()]


@contextmanager
def registered_stand_in(name: str, cls: type[Tool]) -> Iterator[type[Tool]]:
    """`cls` registered as `name` for the block; the registry as it was afterwards."""
    before = TOOL_REGISTRY.get(name)
    register_tool(name, allow_overwrite=True)(cls)
    try:
        yield cls
    finally:
        if before is None:
            TOOL_REGISTRY.pop(name, None)
        else:
            register_tool(name, allow_overwrite=True)(before)
