"""Anthropic Messages API bodies and stream events for a scripted answer (`Reply`).

Shapes follow the Messages API reference and its streaming guide, and the `anthropic` SDK's
types (`Message`, `RawMessageStreamEvent`): a whole answer is a `message` object; a stream
is `message_start`, then per content block `content_block_start`, its deltas and
`content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`, with a
`ping` after the first block starts. As the API does, `message_start` carries the input
side of the usage and `message_delta` only the output count.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from parley.providers._server.steps import Faults

__all__ = [
    "Block",
    "Redacted",
    "Reply",
    "ServerBlock",
    "Text",
    "Thinking",
    "ToolUse",
    "message_events",
    "message_object",
]

_ids = itertools.count(1)

Event: TypeAlias = tuple[str, dict[str, Any]]


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids):024d}"


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[Event]:
    events: list[Event] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


@dataclass
class Text:
    """A text block."""

    text: str

    def whole(self) -> dict[str, Any]:
        """The block in a whole message."""
        return {"type": "text", "text": self.text, "citations": None}

    def events(self, index: int, size: int) -> list[Event]:
        """The block's stream events."""
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(self.text, size)]
        return _block_events(index, {"type": "text", "text": "", "citations": None}, deltas)

    def tokens(self, size: int) -> int:
        """Streamed pieces, counted as output tokens."""
        return len(_pieces(self.text, size))


@dataclass
class Thinking:
    """A thinking block with its signature."""

    thinking: str
    signature: str = field(default_factory=lambda: _id("sig_"))

    def whole(self) -> dict[str, Any]:
        """The block in a whole message."""
        return {"type": "thinking", "thinking": self.thinking, "signature": self.signature}

    def events(self, index: int, size: int) -> list[Event]:
        """The block's stream events: thinking pieces, then the signature in one delta."""
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(self.thinking, size)]
        deltas.append({"type": "signature_delta", "signature": self.signature})
        return _block_events(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)

    def tokens(self, size: int) -> int:
        """Streamed pieces, counted as output tokens."""
        return len(_pieces(self.thinking, size))


@dataclass
class Redacted:
    """A redacted thinking block (opaque data)."""

    data: str = field(default_factory=lambda: _id("redacted_"))

    def whole(self) -> dict[str, Any]:
        """The block in a whole message."""
        return {"type": "redacted_thinking", "data": self.data}

    def events(self, index: int, size: int) -> list[Event]:
        """The block's stream events: whole in its start."""
        return _block_events(index, self.whole(), [])

    def tokens(self, size: int) -> int:
        """Counted as one output token."""
        return 1


@dataclass
class ToolUse:
    """A tool call; `input` as a dict, or a raw (maybe broken) JSON string."""

    name: str
    input: dict[str, Any] | str = field(default_factory=dict)
    id: str = field(default_factory=lambda: _id("toolu_"))
    kind: str = "tool_use"
    """`tool_use`, or `server_tool_use` for a server tool (web search, code execution)."""

    def raw(self) -> str:
        """The input's JSON text."""
        return self.input if isinstance(self.input, str) else json.dumps(self.input)

    def whole(self) -> dict[str, Any]:
        """The block in a whole message."""
        parsed = self.input if isinstance(self.input, dict) else {}
        return {"type": self.kind, "id": self.id, "name": self.name, "input": parsed}

    def events(self, index: int, size: int) -> list[Event]:
        """The block's stream events: the input JSON in pieces."""
        start = {"type": self.kind, "id": self.id, "name": self.name, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p} for p in _pieces(self.raw(), size)
        ]
        return _block_events(index, start, deltas)

    def tokens(self, size: int) -> int:
        """Streamed pieces, counted as output tokens."""
        return len(_pieces(self.raw(), size))


@dataclass
class ServerBlock:
    """Any other block (a server tool's result, a container upload), sent whole."""

    block: dict[str, Any]

    def whole(self) -> dict[str, Any]:
        """The block in a whole message."""
        return self.block

    def events(self, index: int, size: int) -> list[Event]:
        """The block's stream events: whole in its start."""
        return _block_events(index, self.block, [])

    def tokens(self, size: int) -> int:
        """Counted as one output token."""
        return 1


Block: TypeAlias = Text | Thinking | Redacted | ToolUse | ServerBlock


@dataclass
class Reply(Faults):
    """One scripted answer, sent whole or streamed as the request asks.

    The content is `content` when given, else built from the shorthand fields in this
    order: thinking, text, tool calls.

    Args:
        text: The answer's text.
        thinking: Thinking text (a signed thinking block before the text).
        tool_calls: Tool calls, after the text.
        content: The blocks, in order (overrides the three above).
        stop_reason: Default: `tool_use` with tool calls, else `end_turn`.
        stop_sequence: The stop sequence that ended the answer.
        input_tokens: Usage: uncached input tokens.
        cache_creation_tokens: Usage: input tokens written to the cache.
        cache_read_tokens: Usage: input tokens read from the cache.
        output_tokens: Usage: output tokens (default: the streamed pieces, plus one).
        chunk_size: Characters per streamed delta.
        model: The model name to report (default: the one asked for).
        response_id: The message id to report.
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an `error` event at this position and end the stream.
        error: The `error` event's `error` object.
        container: The code execution container the answer ran in (`{"id", "expires_at"}`),
            in the message, or in a stream's `message_delta`, as the API reports it.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolUse] = field(default_factory=list)
    content: list[Block] | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None
    input_tokens: int = 10
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int | None = None
    model: str | None = None
    response_id: str | None = None
    error: dict[str, Any] = field(
        default_factory=lambda: {"type": "overloaded_error", "message": "Overloaded"}
    )
    container: dict[str, Any] | None = None

    def blocks(self) -> list[Block]:
        """The content blocks, in order."""
        if self.content is not None:
            return list(self.content)
        blocks: list[Block] = []
        if self.thinking:
            blocks.append(Thinking(self.thinking))
        if self.text:
            blocks.append(Text(self.text))
        blocks.extend(self.tool_calls)
        return blocks

    def reason(self) -> str:
        """The stop reason."""
        if self.stop_reason:
            return self.stop_reason
        calls = any(isinstance(b, ToolUse) and b.kind == "tool_use" for b in self.blocks())
        return "tool_use" if calls else "end_turn"

    def out_tokens(self) -> int:
        """The output token count to report."""
        if self.output_tokens is not None:
            return self.output_tokens
        return sum(block.tokens(self.chunk_size) for block in self.blocks()) + 1

    def usage(self, *, output: int) -> dict[str, Any]:
        """A usage object with the input side and `output` tokens."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "output_tokens": output,
        }


def message_object(reply: Reply, model: str) -> dict[str, Any]:
    """A whole `message` answer."""
    return {
        "id": reply.response_id or _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": [block.whole() for block in reply.blocks()],
        "stop_reason": reply.reason(),
        "stop_sequence": reply.stop_sequence,
        "usage": reply.usage(output=reply.out_tokens()),
        "container": reply.container,
    }


def message_events(reply: Reply, model: str) -> Iterator[Event]:
    """The stream events of an answer, `(event name, data)` each."""
    message = {
        **message_object(reply, model),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": reply.usage(output=1),
        "container": None,  # told with the stop reason
    }
    yield "message_start", {"type": "message_start", "message": message}
    for index, block in enumerate(reply.blocks()):
        events = block.events(index, reply.chunk_size)
        yield events[0]
        if index == 0:
            yield "ping", {"type": "ping"}
        yield from events[1:]
    delta: dict[str, Any] = {"stop_reason": reply.reason(), "stop_sequence": reply.stop_sequence}
    if reply.container is not None:
        delta["container"] = reply.container
    # As the API sends it: the output count only; the input side came in `message_start`.
    usage = {"output_tokens": reply.out_tokens()}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
    yield "message_stop", {"type": "message_stop"}
