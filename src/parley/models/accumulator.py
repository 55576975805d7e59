"""The one stream accumulator every provider feeds: text, thinking and tool-call deltas.

A provider's stream adapter turns its wire events into the small delta records below; the
accumulator turns each into a delta `ChatResponse` for the caller and keeps the fragments, so
the final chunk carries the whole content. Fragments are joined once, at the end: the work is
linear in the stream's length.

Callers often keep every delta chunk (a UI redrawing, a logger), so a delta is built lean: a
text delta is three objects the garbage collector tracks (the `ChatResponse`, its content
list, the `TextBlock`), not six, because the fields live in the instances' inline values
rather than in dicts and the fields sets are shared (`parley.messages._base.bare`; four on
Python 3.13, which keeps a pydantic model's fields in a dict). The collector's passes over
kept chunks are what made a kept 20,000-chunk stream cost more per chunk than a 2,000-chunk
one (`benchmarks/models.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from parley.messages import Block, TextBlock, ThinkingBlock, ToolCallBlock, new_call_id, new_id
from parley.messages._base import (
    _new,
    _set_extra,
    _set_fields_set,
    _set_private,
    bare,
    every_field,
)
from parley.models.response import ChatResponse, ChatUsage, FinishReason

__all__ = [
    "BlockDelta",
    "Delta",
    "MetaDelta",
    "StreamAccumulator",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "made_by",
    "parse_arguments",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More answer text."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """More reasoning, or the reasoning's signature or provider extras (which may come last)."""

    thinking: str = ""
    signature: str | None = None
    extra: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """Part of a tool call: the first part names it, later ones add argument text.

    `key` tells calls apart within one response (OpenAI's `index`, Anthropic's block index);
    `name` may come only with the first part, `id` with any part (the first one given is
    kept). A call whose first part has no id is held back, keyed by `key`, until its id
    comes (or anything else does: then it carries a generated id), so that it is announced
    once, under the id it keeps.
    """

    key: int | str
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class BlockDelta:
    """A whole block that arrives at once (an image or audio the model produced)."""

    block: Block


@dataclass(frozen=True, slots=True)
class MetaDelta:
    """Facts about the response: usage, finish reason, the provider's response id, the model.

    `metadata` holds provider facts for the final chunk's `metadata` (merged, later keys win).
    """

    usage: ChatUsage | None = None
    finish_reason: FinishReason | None = None
    response_id: str | None = None
    model: str | None = None
    metadata: dict[str, Any] | None = None


Delta = TextDelta | ThinkingDelta | ToolCallDelta | BlockDelta | MetaDelta


def made_by(content: list[Block], provider: str) -> None:
    """Record `provider` on the thinking blocks of an answer's content that name none.

    A thinking block's signature and fields are its provider's (`ThinkingBlock.provider`):
    each formatter sends them to that provider only.
    """
    for block in content:
        if isinstance(block, ThinkingBlock) and block.provider is None:
            block.provider = provider


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's argument string: `(input, raw_input)`.

    Valid JSON objects give `(input, None)`; anything else keeps the raw string so that the
    tool layer can repair it or report it to the model: `({}, raw)`.
    """
    if not raw.strip():
        return {}, None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}, raw
    if isinstance(parsed, dict):
        return parsed, None
    return {}, raw


@dataclass
class _Slot:
    kind: str  # "text", "thinking", "tool_call" or "block"
    parts: list[str] = field(default_factory=list)
    signatures: list[str] | None = None
    """The signature's pieces (None: no signature came), joined once at the end, as `parts`."""
    extra: dict[str, Any] | None = None
    """The provider's fields, merged into this dict of the slot's own as they come."""
    call_id: str = ""
    generated_id: bool = False
    """The call's id is parley's own, standing in until the provider sends one."""
    name: str = ""
    block: Block | None = None

    def to_block(self) -> Block:
        if self.kind == "text":
            return TextBlock(text="".join(self.parts))
        if self.kind == "thinking":
            signature = None if self.signatures is None else "".join(self.signatures)
            return ThinkingBlock(
                thinking="".join(self.parts), signature=signature, extra=self.extra
            )
        if self.kind == "tool_call":
            arguments, raw = parse_arguments("".join(self.parts))
            if not self.name.strip():
                # A provider sent no name: kept as it came (not a MessageError mid-stream), so
                # the tool layer answers the model that no tool has that name.
                return ToolCallBlock.model_construct(
                    id=self.call_id, name=self.name, input=arguments, raw_input=raw
                )
            return ToolCallBlock(id=self.call_id, name=self.name, input=arguments, raw_input=raw)
        assert self.block is not None
        return self.block


class StreamAccumulator:
    """Collects deltas into the final response, handing out one delta chunk per delta.

    Args:
        model: The model name to put on the chunks.
    """

    def __init__(self, model: str | None = None) -> None:
        self.model = model
        self.response_id = new_id()
        self.usage: ChatUsage | None = None
        self.finish_reason: FinishReason | None = None
        self.metadata: dict[str, Any] = {}
        self._slots: list[_Slot] = []
        self._calls: dict[int | str, _Slot] = {}
        self._held: _Slot | None = None
        """A tool call not announced yet: it has no id of the provider's so far."""
        self.chunks = 0

    def add(self, delta: Delta) -> ChatResponse | None:
        """Take one delta; return the chunk to hand to the caller, or None (nothing visible)."""
        if delta.__class__ is TextDelta and self._held is None:
            # A piece of text, most of a stream's deltas: its chunk built in one call.
            text = delta.text
            if text and text.__class__ is str:
                slots = self._slots
                slot = slots[-1] if slots and slots[-1].kind == "text" else self._last("text")
                slot.parts.append(text)
                self.chunks += 1
                return _text_chunk(text, self.response_id, self.model)
        released = None
        if self._held is not None and self._ends_hold(delta):
            # Something else came first: the held call will have no id of the provider's.
            released = self._release_held()
        block: Block | None
        if isinstance(delta, TextDelta):
            block = self._text(delta)
        elif isinstance(delta, ThinkingDelta):
            block = self._thinking(delta)
        elif isinstance(delta, ToolCallDelta):
            block = self._tool_call(delta)
        elif isinstance(delta, BlockDelta):
            self._slots.append(_Slot("block", block=delta.block))
            block = delta.block
        else:
            self._meta(delta)
            block = None
        if released is not None:
            return self._chunk([released] if block is None else [released, block])
        if block is None:
            return None
        self.chunks += 1
        return _delta_chunk(block, self.response_id, self.model)

    def release(self) -> ChatResponse | None:
        """The chunk announcing a tool call still held back (at the stream's end), or None."""
        if self._held is None:
            return None
        return self._chunk([self._release_held()])

    def _ends_hold(self, delta: Delta) -> bool:
        """Whether `delta` shows something besides the held call (which then comes first)."""
        if isinstance(delta, ToolCallDelta):
            return self._calls.get(delta.key) is not self._held
        if isinstance(delta, TextDelta):
            return bool(delta.text)
        if isinstance(delta, ThinkingDelta):
            return bool(delta.thinking or delta.signature or delta.extra)
        return isinstance(delta, BlockDelta)

    def _release_held(self) -> Block:
        """The held call as one delta: its name and its arguments so far."""
        slot, self._held = self._held, None
        assert slot is not None
        return _call_block(slot.call_id, slot.name, "".join(slot.parts) or None)

    def _chunk(self, blocks: list[Block]) -> ChatResponse:
        self.chunks += 1
        chunk = _delta_chunk(blocks[0], self.response_id, self.model)
        chunk.content.extend(blocks[1:])
        return chunk

    def _last(self, kind: str) -> _Slot:
        if not self._slots or self._slots[-1].kind != kind:
            self._slots.append(_Slot(kind))
        return self._slots[-1]

    def _text(self, delta: TextDelta) -> Block | None:
        text = delta.text
        if not text:
            return None
        slots = self._slots
        slot = slots[-1] if slots and slots[-1].kind == "text" else self._last("text")
        slot.parts.append(text)
        if type(text) is not str:
            return TextBlock(text=text)  # validation words the error
        block = bare(TextBlock, _TEXT_FIELDS)
        _set(block, "type", "text")
        _set(block, "text", text)
        return block

    def _thinking(self, delta: ThinkingDelta) -> Block | None:
        slot = self._last("thinking")
        if delta.thinking:
            slot.parts.append(delta.thinking)
        # Pieces kept and merged in place: a provider that sends a signature or fields with
        # every delta would otherwise have them copied whole at each one (quadratic).
        if delta.signature is not None:
            if slot.signatures is None:
                slot.signatures = []
            slot.signatures.append(delta.signature)
        if delta.extra:
            if slot.extra is None:
                slot.extra = {}
            slot.extra.update(delta.extra)
        if not (delta.thinking or delta.signature or delta.extra):
            return None
        return _thinking_block(delta.thinking, delta.signature, delta.extra)

    def _tool_call(self, delta: ToolCallDelta) -> Block | None:
        slot = self._calls.get(delta.key)
        if slot is None:
            given = delta.id or None
            slot = _Slot("tool_call", call_id=given or new_call_id(), generated_id=given is None)
            self._calls[delta.key] = slot
            self._slots.append(slot)
            if given is None:
                # Some servers name the call first and send its id with a later part
                # (the provider's id is the one its API expects back with the result):
                # announced under the generated id, it would look like two calls.
                self._held = slot
        elif delta.id and slot.generated_id:
            slot.call_id = delta.id
            slot.generated_id = False
        if delta.name:
            # Some providers stream the name in pieces too.
            slot.name += delta.name
        if delta.arguments:
            slot.parts.append(delta.arguments)
        if slot is self._held:
            return self._release_held() if not slot.generated_id else None
        return _call_block(slot.call_id, slot.name, delta.arguments or None)

    def _meta(self, delta: MetaDelta) -> None:
        if delta.usage is not None:
            self.usage = delta.usage
        if delta.finish_reason is not None:
            self.finish_reason = delta.finish_reason
        if delta.response_id:
            self.response_id = delta.response_id
        if delta.model:
            self.model = delta.model
        if delta.metadata:
            self.metadata.update(delta.metadata)

    def content(self) -> list[Block]:
        """The content so far, fragments joined."""
        return [slot.to_block() for slot in self._slots]

    def final(self, finish_reason: FinishReason | None = None) -> ChatResponse:
        """The last chunk: the whole content, the usage and the finish reason.

        Args:
            finish_reason: Overrides what the provider said (as `interrupted` does on cancel).
        """
        content = self.content()
        reason = finish_reason or self.finish_reason
        if reason is None:
            reason = "tool_calls" if any(b.type == "tool_call" for b in content) else "stop"
        return ChatResponse(
            content=content,
            is_last=True,
            usage=self.usage,
            finish_reason=reason,
            id=self.response_id,
            model=self.model,
            metadata=dict(self.metadata),
        )


# The delta chunks and their blocks, built lean (see the module's docstring): without
# re-validating what was just built here, each field set in the class's order.

_set = object.__setattr__
_CHUNK_FIELDS = every_field(ChatResponse)
_TEXT_FIELDS = every_field(TextBlock)
_THINKING_FIELDS = every_field(ThinkingBlock)
_CALL_FIELDS = every_field(ToolCallBlock)


def _delta_chunk(block: Block, response_id: str, model: str | None) -> ChatResponse:
    chunk = bare(ChatResponse, _CHUNK_FIELDS)
    _set(chunk, "content", [block])
    _set(chunk, "is_last", False)
    _set(chunk, "usage", None)
    _set(chunk, "finish_reason", None)
    _set(chunk, "id", response_id)
    _set(chunk, "model", model)
    # A dict of its own, which a caller may fill; empty, the collector does not track it.
    _set(chunk, "metadata", {})
    return chunk


def _text_chunk(text: str, response_id: str, model: str | None) -> ChatResponse:
    """`_delta_chunk` of a `TextBlock` of `text`, `bare`'s work for both done inline."""
    block = _new(TextBlock)
    _set_fields_set(block, _TEXT_FIELDS)
    _set_extra(block, None)
    _set_private(block, None)
    _set(block, "type", "text")
    _set(block, "text", text)
    chunk = _new(ChatResponse)
    _set_fields_set(chunk, _CHUNK_FIELDS)
    _set_extra(chunk, None)
    _set_private(chunk, None)
    _set(chunk, "content", [block])
    _set(chunk, "is_last", False)
    _set(chunk, "usage", None)
    _set(chunk, "finish_reason", None)
    _set(chunk, "id", response_id)
    _set(chunk, "model", model)
    _set(chunk, "metadata", {})
    return chunk


def _thinking_block(thinking: str, signature: str | None, extra: dict[str, Any] | None) -> Block:
    if not (
        type(thinking) is str
        and (signature is None or type(signature) is str)
        and (extra is None or type(extra) is dict)
    ):
        return ThinkingBlock(thinking=thinking, signature=signature, extra=extra)  # words the error
    block = bare(ThinkingBlock, _THINKING_FIELDS)
    _set(block, "type", "thinking")
    _set(block, "thinking", thinking)
    _set(block, "signature", signature)
    _set(block, "extra", None if extra is None else dict(extra))  # not the provider's dict
    _set(block, "provider", None)
    return block


def _call_block(call_id: str, name: str, raw_input: str | None) -> Block:
    if not (
        type(call_id) is str and type(name) is str and (raw_input is None or type(raw_input) is str)
    ):
        return ToolCallBlock(id=call_id, name=name, raw_input=raw_input)  # words the error
    block = bare(ToolCallBlock, _CALL_FIELDS)
    _set(block, "type", "tool_call")
    _set(block, "id", call_id)
    _set(block, "name", name)
    _set(block, "input", {})
    _set(block, "raw_input", raw_input)
    return block
