"""The tool registry, as Qwen-Agent's: tools registered by name, looked up by name."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from parley.errors import ConfigurationError
from parley.tools.base import Tool

__all__ = ["TOOL_REGISTRY", "register_tool"]

logger = logging.getLogger("parley.tools")

TOOL_REGISTRY: dict[str, type[Tool]] = {}
"""Every registered tool class, by name."""

T = TypeVar("T", bound=type[Tool])


def register_tool(name: str, allow_overwrite: bool = False) -> Callable[[T], T]:
    """Register a tool class under `name` (a class decorator), as Qwen-Agent's does.

    Raises:
        ConfigurationError: The name is taken (unless `allow_overwrite`), or the class already
            has another `name`. It is also a `ValueError`, as Qwen-Agent raises.
    """

    def decorator(cls: T) -> T:
        if name in TOOL_REGISTRY:
            if not allow_overwrite:
                raise ConfigurationError(
                    f"Tool `{name}` already exists! Please ensure that the tool name is unique."
                )
            logger.warning("Tool `%s` already exists! Overwriting with class %s.", name, cls)
        if cls.name and cls.name != name:
            raise ConfigurationError(
                f'{cls.__name__}.name="{cls.name}" conflicts with @register_tool(name="{name}").'
            )
        cls.name = name
        TOOL_REGISTRY[name] = cls
        return cls

    return decorator
