"""Scripted steps every test server understands: a reset, a raw answer, a tool call."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Raw", "Reset", "ToolCall"]


@dataclass
class Reset:
    """Drop the connection without answering (a reset), after `delay` seconds."""

    delay: float = 0.0


@dataclass
class Raw:
    """An answer sent exactly as given."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ToolCall:
    """A tool call in a scripted answer; `arguments` as a dict or a raw (maybe broken) string."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def raw(self) -> str:
        """The argument string."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)
