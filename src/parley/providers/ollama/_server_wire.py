"""Ollama wire-format bodies and stream lines for a scripted answer (`Reply`).

Shapes follow Ollama's `api/types.go` (`ChatResponse`, `Message`, `ToolCall`, `Metrics`) and
`docs/api.md`: a stream is one JSON object a line (NDJSON), the last with `done: true`, the
`done_reason`, the token counts and the durations (nanoseconds); a whole answer is one such
object with the whole message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from parley.providers._server.steps import Faults

__all__ = ["Reply", "ToolCall", "chat_lines", "chat_object"]


@dataclass
class ToolCall:
    """A tool call in a scripted answer.

    Args:
        name: The function's name.
        arguments: Its arguments: an object, as Ollama sends them, or a string (as some
            proxies pass OpenAI's through).
        id: The call's id; None sends none, as servers before v0.12 do.
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class Reply(Faults):
    """One scripted `/api/chat` answer, sent whole or streamed as the request asks.

    Args:
        text: The answer's text.
        thinking: The reasoning (`message.thinking`).
        tool_calls: Tool calls, in order, each sent whole in a line of its own.
        done_reason: The `done_reason` (`stop`, `length`, `load`, `unload`); None sends none.
        prompt_eval_count: Usage: prompt tokens.
        eval_count: Usage: output tokens (default: the number of streamed pieces).
        durations: The durations to report, in nanoseconds (`total_duration`, ...).
        chunk_size: Characters per streamed line.
        model: The model name to report (default: the one asked for).
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an `{"error": ...}` line at this position and end the stream.
        error: That line's error message.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    done_reason: str | None = "stop"
    prompt_eval_count: int = 10
    eval_count: int | None = None
    durations: dict[str, int] = field(
        default_factory=lambda: {
            "total_duration": 250_000_000,
            "load_duration": 50_000_000,
            "prompt_eval_duration": 20_000_000,
            "eval_duration": 150_000_000,
        }
    )
    model: str | None = None
    error: str = "an error was encountered while running the model"

    def out_tokens(self) -> int:
        """The output token count to report."""
        if self.eval_count is not None:
            return self.eval_count
        return len(self.pieces(self.text)) + len(self.pieces(self.thinking)) + 1


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _call(index: int, call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "function": {"index": index, "name": call.name, "arguments": call.arguments}
    }
    if call.id is not None:
        wire = {"id": call.id, **wire}
    return wire


def _end(reply: Reply) -> dict[str, Any]:
    end: dict[str, Any] = {"done": True}
    if reply.done_reason is not None:
        end["done_reason"] = reply.done_reason
    end.update(reply.durations)
    end["prompt_eval_count"] = reply.prompt_eval_count
    end["eval_count"] = reply.out_tokens()
    return end


def chat_object(reply: Reply, model: str) -> dict[str, Any]:
    """A whole (`stream: false`) `/api/chat` answer."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if reply.thinking:
        message["thinking"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [_call(i, c) for i, c in enumerate(reply.tool_calls)]
    head = {"model": reply.model or model, "created_at": _now(), "message": message}
    return {**head, **_end(reply)}


def _messages(reply: Reply) -> Iterator[dict[str, Any]]:
    for piece in reply.pieces(reply.thinking):
        yield {"role": "assistant", "content": "", "thinking": piece}
    for piece in reply.pieces(reply.text):
        yield {"role": "assistant", "content": piece}
    for index, call in enumerate(reply.tool_calls):
        yield {"role": "assistant", "content": "", "tool_calls": [_call(index, call)]}


def chat_lines(reply: Reply, model: str) -> list[bytes]:
    """The lines of a streamed answer, each ending in a newline, `done: true` last."""
    name, created = reply.model or model, _now()
    objects = [
        {"model": name, "created_at": created, "message": message, "done": False}
        for message in _messages(reply)
    ]
    last = {"role": "assistant", "content": ""}
    objects.append({"model": name, "created_at": created, "message": last, **_end(reply)})
    return [json.dumps(line).encode() + b"\n" for line in objects]
