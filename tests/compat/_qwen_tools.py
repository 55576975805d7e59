"""A Qwen-Agent tool the Qwen compatibility tests share, written as Qwen-Agent's docs write one."""

from __future__ import annotations

from typing import Any, ClassVar

from parley.compat.qwen import BaseTool


class CityWeather(BaseTool):
    """The weather of a city; a test module registers a subclass with its own `asked` list."""

    description = "Get the current weather for a city."
    parameters: ClassVar[list[dict[str, Any]]] = [
        {"name": "city", "type": "string", "description": "The city name.", "required": True}
    ]
    asked: ClassVar[list[dict[str, Any]]] = []
    """The arguments of every call, in order."""

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        args = self._verify_json_format_args(params)
        self.asked.append(args)
        return f"Sunny, 21 degrees C in {args['city']}"
