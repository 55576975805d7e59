"""Scripted steps every test server understands: a reset, a raw answer, a tool call.

`Faults` holds what every provider's scripted answer (`Reply`, `Speech`) may do wrong on
purpose, and the way its text is cut into streamed pieces; `scripted.send_stream` carries
the faults out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatReply", "ErrorAnswer", "Faults", "Raw", "Reset", "ToolCall", "retry_headers"]


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


@dataclass(kw_only=True)
class Faults:
    """A scripted answer's faults, and its streamed pieces' size (the base of each `Reply`).

    Args:
        chunk_size: Characters per streamed piece.
        delay: Seconds before answering at all (a slow server).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an error event at this position and end the stream.
    """

    chunk_size: int = 4
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut_after: int | None = None
    malformed_at: int | None = None
    error_at: int | None = None

    def pieces(self, text: str) -> list[str]:
        """`text` in streamed pieces."""
        size = max(1, self.chunk_size)
        return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class ChatReply(Faults):
    """What the OpenAI-shaped `Reply`s have in common (OpenAI's and DashScope's native).

    Args:
        text: The answer's text.
        reasoning: Reasoning text.
        tool_calls: Tool calls, in order.
        finish_reason: The finish reason (default `tool_calls` or `stop`).
        input_tokens: Usage: prompt tokens.
        output_tokens: Usage: output tokens (default: the number of chunks).
        cached_tokens: Usage: prompt tokens served from cache.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int | None = None
    cached_tokens: int = 0

    def finish(self) -> str:
        """The finish reason of the answer (its last event, when streamed)."""
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


@dataclass
class ErrorAnswer:
    """The base of each provider's `HTTPError` step: an error status with the provider's body.

    A subclass adds its body's fields (`message`, `code`...) after `status` and writes its
    body in `error_body`.

    Args:
        status: The HTTP status.
        headers: Extra headers (e.g. `Retry-After`).
        body: The whole body, instead of the provider's.
        delay: Seconds before answering.
    """

    status: int
    headers: dict[str, str] = field(default_factory=dict, kw_only=True)
    body: Any = field(default=None, kw_only=True)
    delay: float = field(default=0.0, kw_only=True)

    def payload(self) -> Any:
        """The body to send."""
        return self.body if self.body is not None else self.error_body()

    def error_body(self) -> Any:
        """The provider's error body for this status."""
        raise NotImplementedError


def retry_headers(seconds: float | None, name: str = "Retry-After") -> dict[str, str]:
    """The header asking to wait `seconds` (none when None)."""
    return {} if seconds is None else {name: f"{seconds:g}"}
