"""Gemini wire-format bodies and stream events for a scripted answer (`Reply`).

Shapes follow the Gemini API reference (`GenerateContentResponse`, `Candidate`, `Part`,
`UsageMetadata`, `PromptFeedback`) and `google-genai`'s types: camelCase JSON, a stream of
`data:` events each holding a whole `GenerateContentResponse`, the last with `finishReason`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FunctionCall", "Reply", "generate_content", "stream_chunks"]

_ids = itertools.count(1)


@dataclass
class FunctionCall:
    """A function call in a scripted answer.

    Args:
        name: The function's name.
        args: Its arguments.
        id: The call's id (the Gemini API often gives none).
        signature: A thought signature on the call's part.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None
    signature: str | None = None

    def part(self) -> dict[str, Any]:
        """The `functionCall` part."""
        call: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.id is not None:
            call["id"] = self.id
        part: dict[str, Any] = {"functionCall": call}
        if self.signature is not None:
            part["thoughtSignature"] = self.signature
        return part


@dataclass
class Reply:
    """One scripted answer, whole or streamed as the request asks.

    Args:
        text: The answer's text.
        thinking: A thought summary (`thought: true` parts).
        thought_signature: A signature on the last thought part.
        text_signature: A signature on the last text part.
        trailing_signature: A signature on an empty text part after the rest (as streams
            end).
        function_calls: Function calls, all in one event when streamed.
        parts: Extra parts (media, ...) sent as given, after the text.
        finish_reason: The candidate's finish reason (`STOP` by default).
        block_reason: Answer with no candidate and `promptFeedback.blockReason` set.
        input_tokens: `promptTokenCount`.
        output_tokens: `candidatesTokenCount` (default: the number of streamed pieces).
        thoughts_tokens: `thoughtsTokenCount`.
        cached_tokens: `cachedContentTokenCount`.
        chunk_size: Characters per streamed piece.
        model_version: The `modelVersion` to report (default: the model asked for).
        response_id: The `responseId` to report.
        delay: Seconds before answering at all.
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an error event at this position and end the stream.
        error: The error event's `error` object.
    """

    text: str = ""
    thinking: str = ""
    thought_signature: str | None = None
    text_signature: str | None = None
    trailing_signature: str | None = None
    function_calls: list[FunctionCall] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "STOP"
    block_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int | None = None
    thoughts_tokens: int = 0
    cached_tokens: int = 0
    chunk_size: int = 4
    model_version: str | None = None
    response_id: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut_after: int | None = None
    malformed_at: int | None = None
    error_at: int | None = None
    error: dict[str, Any] = field(
        default_factory=lambda: {"code": 500, "message": "Internal error", "status": "INTERNAL"}
    )

    def pieces(self, text: str) -> list[str]:
        """`text` in streamed pieces."""
        size = max(1, self.chunk_size)
        return [text[i : i + size] for i in range(0, len(text), size)]

    def out_tokens(self) -> int:
        """The `candidatesTokenCount` to report."""
        if self.output_tokens is not None:
            return self.output_tokens
        return len(self.pieces(self.text)) + len(self.function_calls) + 1


def _usage(reply: Reply, *, final: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": reply.input_tokens}
    total = reply.input_tokens
    if final:
        output = reply.out_tokens()
        usage["candidatesTokenCount"] = output
        total += output + reply.thoughts_tokens
        if reply.thoughts_tokens:
            usage["thoughtsTokenCount"] = reply.thoughts_tokens
        if reply.cached_tokens:
            usage["cachedContentTokenCount"] = reply.cached_tokens
    usage["totalTokenCount"] = total
    return usage


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    return {**part, "thoughtSignature": signature} if signature is not None else part


def _groups(reply: Reply, *, stream: bool) -> Iterator[list[dict[str, Any]]]:
    """The parts, grouped as they go out: one group per stream event (one group if whole)."""
    thoughts = reply.pieces(reply.thinking) if stream else [reply.thinking] * bool(reply.thinking)
    for index, piece in enumerate(thoughts):
        last = index == len(thoughts) - 1
        part = {"text": piece, "thought": True}
        yield [_signed(part, reply.thought_signature if last else None)]
    texts = reply.pieces(reply.text) if stream else [reply.text] * bool(reply.text)
    for index, piece in enumerate(texts):
        last = index == len(texts) - 1
        yield [_signed({"text": piece}, reply.text_signature if last else None)]
    if reply.parts:
        yield list(reply.parts)
    if reply.function_calls:
        yield [call.part() for call in reply.function_calls]
    if reply.trailing_signature is not None:
        yield [{"text": "", "thoughtSignature": reply.trailing_signature}]


def _response(
    reply: Reply, model: str, parts: list[dict[str, Any]] | None, *, final: bool, response_id: str
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if reply.block_reason is not None:
        body["promptFeedback"] = {"blockReason": reply.block_reason}
    else:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts or []}}
        if final:
            candidate["finishReason"] = reply.finish_reason
        candidate["index"] = 0
        body["candidates"] = [candidate]
    body["usageMetadata"] = _usage(reply, final=final)
    body["modelVersion"] = reply.model_version or model
    body["responseId"] = response_id
    return body


def generate_content(reply: Reply, model: str) -> dict[str, Any]:
    """A whole `GenerateContentResponse`."""
    parts = [part for group in _groups(reply, stream=False) for part in group]
    response_id = reply.response_id or f"resp-{next(_ids):06d}"
    return _response(reply, model, parts, final=True, response_id=response_id)


def stream_chunks(reply: Reply, model: str) -> list[dict[str, Any]]:
    """The `GenerateContentResponse` of each stream event; the last has the finish reason."""
    response_id = reply.response_id or f"resp-{next(_ids):06d}"
    if reply.block_reason is not None:
        return [_response(reply, model, None, final=True, response_id=response_id)]
    groups = list(_groups(reply, stream=True)) or [[]]
    return [
        _response(reply, model, group, final=i == len(groups) - 1, response_id=response_id)
        for i, group in enumerate(groups)
    ]
