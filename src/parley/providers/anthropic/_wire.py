"""Messages API answers, whole or streamed, as parley deltas.

Read from plain dicts parsed by `jiter` (events split by `_sse`). The stream's events, from the
Messages API's streaming guide and the SDK's event types: `message_start` (the message's id,
model and first usage), per content block `content_block_start`, `content_block_delta`
(`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`, `citations_delta`)
and `content_block_stop`, then `message_delta` (stop reason, usage) and `message_stop`;
`ping` anywhere, and `error` when the server fails mid-way.

- Text and thinking stream as they come; a thinking block's signature arrives in a
  `signature_delta` just before the block ends and is kept with it.
- Tool calls (`tool_use`) stream their argument JSON in pieces (`input_json_delta`).
- Blocks parley has no class for (`redacted_thinking`, `server_tool_use`,
  `web_search_tool_result`, `web_fetch_tool_result`, `code_execution_tool_result`, ...,
  and types added later) are kept whole, as the API sent them, in a `ThinkingBlock` whose
  `extra["anthropic_block"]` holds the block (`thinking` empty), so that the formatter can
  send them back: the API asks for them unchanged on the next turn.
- Usage: `message_start` carries the input side (`input_tokens`, `cache_creation_input_tokens`,
  `cache_read_input_tokens`) and an early `output_tokens`; `message_delta` carries cumulative
  counts that replace those it names (`output_tokens` always). Reading only one of the two
  under-reports by orders of magnitude. Parley's `input_tokens` is the whole prompt
  (`input_tokens` + cache writes + cache reads, as Anthropic defines the total),
  `cached_tokens` the cache reads and `cache_write_tokens` the cache writes, so that a price
  counts each token once, at its own rate.
- Stop reasons map to parley's finish reasons; `stop_reason` and `stop_sequence` are also
  kept as sent in the response's `metadata`. `pause_turn` (the server paused a long turn of
  server tools) is `stop` with `metadata["paused"] = True` (`ChatResponse.paused`): the
  answer goes back as it is, last, for Claude to continue the turn, in the same code
  execution container: its id is kept as `metadata["container"]`.
- Citations on text (`citations_delta`) are not kept: parley's text blocks carry none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import json_repair

from parley.messages import ThinkingBlock
from parley.models._wire import EventReader, FinishReasons, loads, read_json
from parley.models.accumulator import (
    BlockDelta,
    Delta,
    MetaDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from parley.models.response import CONTAINER, PAUSED, ChatUsage
from parley.providers.anthropic._errors import error_from_event
from parley.providers.anthropic.formatter import RAW_BLOCK

__all__ = [
    "MessageStreamReader",
    "UsageTally",
    "finish_reason",
    "message_deltas",
    "raw_block",
    "stop_metadata",
]

finish_reason = FinishReasons(
    {
        "end_turn": "stop",
        "stop_sequence": "stop",
        # The server paused a long turn (server tools); sending the answer back continues it.
        "pause_turn": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "refusal": "content_filter",
    }
)
"""Parley's finish reason for an Anthropic `stop_reason`; None for unknown ones."""


def stop_metadata(stop: dict[str, Any]) -> dict[str, Any] | None:
    """`stop_reason` and `stop_sequence` as sent, and the container's id, for `metadata`.

    Several stop reasons share one finish reason; a caller tells them apart here. A
    `pause_turn` answer is also marked `paused` (`ChatResponse.paused`): the server paused
    the turn, which goes on when the answer is sent back as it is, as the last message
    (Anthropic's server tools guide); `end_turn` is final. The `container` code execution
    ran in (the message's, or in a stream `message_delta`'s) is kept by id: the request
    continuing the turn names it.
    """
    kept: dict[str, Any] = {
        name: stop[name] for name in ("stop_reason", "stop_sequence") if stop.get(name)
    }
    if stop.get("stop_reason") == "pause_turn":
        kept[PAUSED] = True
    container = stop.get("container")
    if isinstance(container, dict) and isinstance(container.get("id"), str):
        kept[CONTAINER] = container["id"]
    return kept or None


class UsageTally:
    """A message's usage, from `message_start`'s and then `message_delta`'s counts.

    Counts are cumulative: a later event's count replaces the earlier one; a count an event
    leaves out (or sends as null) keeps its earlier value.
    """

    __slots__ = ("cache_creation", "cache_read", "input", "output")

    def __init__(self) -> None:
        self.input = 0
        self.cache_creation = 0
        self.cache_read = 0
        self.output = 0

    def update(self, usage: dict[str, Any]) -> ChatUsage:
        """Take an event's `usage` object; the usage so far."""
        if (value := usage.get("input_tokens")) is not None:
            self.input = value
        if (value := usage.get("cache_creation_input_tokens")) is not None:
            self.cache_creation = value
        if (value := usage.get("cache_read_input_tokens")) is not None:
            self.cache_read = value
        if (value := usage.get("output_tokens")) is not None:
            self.output = value
        return self.usage()

    def usage(self) -> ChatUsage:
        """The usage so far, in parley's terms."""
        return ChatUsage(
            input_tokens=self.input + self.cache_creation + self.cache_read,
            output_tokens=self.output,
            cached_tokens=self.cache_read,
            cache_write_tokens=self.cache_creation,
        )


def raw_block(block: dict[str, Any]) -> ThinkingBlock:
    """A content block parley has no class for, kept as the API sent it."""
    return ThinkingBlock(thinking="", extra={RAW_BLOCK: block})


def _thinking_block(block: dict[str, Any]) -> ThinkingBlock:
    return ThinkingBlock(
        thinking=block.get("thinking") or "", signature=block.get("signature") or None
    )


def message_deltas(body: dict[str, Any], *, model: str, provider: str) -> Iterator[Delta]:
    """The deltas of a whole (non-streamed) message.

    Raises:
        ModelError: The body is an error.
    """
    if body.get("type") == "error":
        raise error_from_event(body, model=model, provider=provider)
    for index, block in enumerate(body.get("content") or ()):
        kind = block.get("type")
        if kind == "text":
            if text := block.get("text"):
                yield TextDelta(text)
        elif kind == "thinking":
            # Whole blocks: two thinking blocks in a row stay two.
            yield BlockDelta(_thinking_block(block))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            yield ToolCallDelta(index, block.get("id"), block.get("name"), arguments)
        else:
            yield BlockDelta(raw_block(block))
    tally = UsageTally()
    yield MetaDelta(
        usage=tally.update(body.get("usage") or {}),
        finish_reason=finish_reason(body.get("stop_reason")),
        response_id=body.get("id"),
        model=body.get("model"),
        metadata=stop_metadata(body),
    )


@dataclass
class _Held:
    """A block kept until its end: a raw block (its input JSON may stream) or a thinking block."""

    block: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    signature: str = ""

    def finish(self) -> ThinkingBlock:
        if self.block.get("type") == "thinking":
            thinking = (self.block.get("thinking") or "") + "".join(self.parts)
            signature = (self.block.get("signature") or "") + self.signature
            return ThinkingBlock(thinking=thinking, signature=signature or None)
        block = dict(self.block)
        if self.parts:
            raw = "".join(self.parts)
            try:
                block["input"] = json.loads(raw)
            except ValueError:
                block["input"] = json_repair.loads(raw)
        return raw_block(block)


Handler = Callable[[dict[str, Any]], list[Delta]]
DeltaHandler = Callable[[int, dict[str, Any]], list[Delta]]


class MessageStreamReader(EventReader):
    """Turns the Messages API's stream events into deltas (see the module docstring).

    It is `finished` at a stop reason in `message_delta`, `done` at `message_stop`; its
    arguments are `EventReader`'s.
    """

    def __init__(self, *, model: str, provider: str) -> None:
        super().__init__(model=model, provider=provider)
        self._usage = UsageTally()
        self._kinds: dict[int, str] = {}
        self._held: dict[int, _Held] = {}
        self._tool_inputs: dict[int, dict[str, Any]] = {}
        self._last = ""
        self._handlers: dict[str, Handler] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
            "error": self._error,
        }
        self._delta_handlers: dict[str, DeltaHandler] = {
            "thinking_delta": self._thinking_delta,
            "signature_delta": self._signature_delta,
            "input_json_delta": self._input_delta,
        }

    def feed(self, name: str, data: bytes) -> list[Delta]:
        """The deltas in one event.

        Raises:
            ModelOutputError: The data is not a JSON object.
            ModelError: The provider reported an error in the stream.
        """
        if name == "content_block_delta":  # most events, text ones first
            try:
                delta = loads(data)["delta"]
                if delta["type"] == "text_delta":
                    text = delta["text"]
                    return [TextDelta(text)] if text else []
            except (ValueError, KeyError, TypeError):
                pass  # the general path below says what is wrong, if anything
            return self._block_delta(read_json(data, model=self.model, provider=self.provider))
        if name == "ping":
            return []
        event = read_json(data, model=self.model, provider=self.provider)
        # Unknown events are skipped: the API may add event types within a version.
        handler = self._handlers.get(name or str(event.get("type") or ""))
        return handler(event) if handler is not None else []

    # -- message events ---------------------------------------------------------------------

    def _message_start(self, event: dict[str, Any]) -> list[Delta]:
        message = event.get("message") or {}
        usage = self._usage.update(message.get("usage") or {})
        return [MetaDelta(usage=usage, response_id=message.get("id"), model=message.get("model"))]

    def _message_delta(self, event: dict[str, Any]) -> list[Delta]:
        delta = event.get("delta") or {}
        reason = delta.get("stop_reason")
        self.finished = self.finished or reason is not None
        usage = event.get("usage")
        return [
            MetaDelta(
                usage=self._usage.update(usage) if usage else None,
                finish_reason=finish_reason(reason),
                metadata=stop_metadata(delta),
            )
        ]

    def _message_stop(self, event: dict[str, Any]) -> list[Delta]:
        self.done = True
        return []

    def _error(self, event: dict[str, Any]) -> list[Delta]:
        raise error_from_event(event, model=self.model, provider=self.provider)

    # -- content blocks ---------------------------------------------------------------------

    def _block_start(self, event: dict[str, Any]) -> list[Delta]:
        index = int(event.get("index") or 0)
        block = event.get("content_block") or {}
        kind = block.get("type")
        if kind == "text":
            self._kinds[index] = self._last = "text"
            text = block.get("text")
            return [TextDelta(text)] if text else []
        if kind == "thinking" and self._last != "thinking":
            self._kinds[index] = self._last = "thinking"
            out: list[Delta] = []
            if thinking := block.get("thinking"):
                out.append(ThinkingDelta(thinking))
            if signature := block.get("signature"):
                out.append(ThinkingDelta(signature=signature))
            return out
        if kind == "tool_use":
            self._kinds[index] = self._last = "tool"
            self._tool_inputs[index] = block.get("input") or {}
            return [ToolCallDelta(index, block.get("id"), block.get("name"))]
        # Kept whole until it ends: a raw block, or a thinking block right after another,
        # which streamed would run into the first one.
        self._kinds[index] = "held"
        self._last = "block"
        self._held[index] = _Held(block)
        return []

    def _block_delta(self, event: dict[str, Any]) -> list[Delta]:
        delta = event.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":  # most events: checked first
            text = delta.get("text")
            return [TextDelta(text)] if text else []
        handler = self._delta_handlers.get(str(kind))
        if handler is None:
            return []  # citations, and delta types added later
        return handler(int(event.get("index") or 0), delta)

    def _thinking_delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        thinking = delta.get("thinking") or ""
        held = self._held.get(index)
        if held is not None:
            held.parts.append(thinking)
            return []
        return [ThinkingDelta(thinking)] if thinking else []

    def _signature_delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        signature = delta.get("signature") or ""
        held = self._held.get(index)
        if held is not None:
            held.signature += signature
            return []
        return [ThinkingDelta(signature=signature)] if signature else []

    def _input_delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        partial = delta.get("partial_json") or ""
        held = self._held.get(index)
        if held is not None:
            held.parts.append(partial)
            return []
        self._tool_inputs.pop(index, None)  # the pieces make the input
        return [ToolCallDelta(index, arguments=partial)] if partial else []

    def _block_stop(self, event: dict[str, Any]) -> list[Delta]:
        index = int(event.get("index") or 0)
        kind = self._kinds.pop(index, None)
        if kind == "held":
            return [BlockDelta(self._held.pop(index).finish())]
        if kind == "tool":
            given = self._tool_inputs.pop(index, None)
            if given:  # an input sent whole in the start event, with no pieces after
                return [ToolCallDelta(index, arguments=json.dumps(given, ensure_ascii=False))]
        return []
