"""Gemini answers, whole or streamed, as parley deltas.

A whole answer (`:generateContent`) and each event of a stream
(`:streamGenerateContent?alt=sse`) are both a `GenerateContentResponse`: `candidates[0]`
with `content.parts`, `finishReason` on the last one, `usageMetadata`, `promptFeedback`,
`modelVersion`, `responseId`. A stream ends without a sentinel: the event with a finish
reason is the last one, and a stream that ends before it was cut.

Parts become deltas in order: thought parts (`thought: true`) thinking, with their
signature; text; `functionCall` a whole tool call (the Gemini API sends each call complete,
in one event; its `id` when it gives one); `inlineData` / `fileData` a media block. A
signature on a text or function-call part travels on a thinking delta just before it (see
`parley.providers.gemini.formatter`). The last event's finish reason is mapped to parley's
(`FINISH_REASONS`) and kept as Gemini sent it in the response's `metadata`
(`finish_reason`, with `finish_message` when Gemini explains it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from parley.models._wire import EventReader, read_json
from parley.models.accumulator import (
    BlockDelta,
    Delta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from parley.models.response import ChatUsage, FinishReason
from parley.providers.gemini._errors import blocked_prompt, error_from_payload
from parley.providers.gemini._media import block_from_part
from parley.providers.gemini.formatter import PART_SIGNATURE

__all__ = ["FINISH_REASONS", "ResponseReader", "finish_reason", "usage"]

_FILTERED: FinishReason = "content_filter"
FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    # Token generation paused at the per-request limit; the answer is not whole.
    "CONTINUATION": "length",
    "SAFETY": _FILTERED,
    "RECITATION": _FILTERED,
    "LANGUAGE": _FILTERED,  # an unsupported language, flagged by Google's filters
    "BLOCKLIST": _FILTERED,
    "PROHIBITED_CONTENT": _FILTERED,
    "SPII": _FILTERED,
    "IMAGE_SAFETY": _FILTERED,
    "IMAGE_PROHIBITED_CONTENT": _FILTERED,
    "IMAGE_RECITATION": _FILTERED,
    "MODEL_ARMOR": _FILTERED,
    "ESCALATION": _FILTERED,
    "PUP_LIMITED_DISABLED": _FILTERED,
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "MISSING_THOUGHT_SIGNATURE": "error",
    "MALFORMED_RESPONSE": "error",
    "IMAGE_OTHER": "error",
    "NO_IMAGE": "error",
    "OTHER": "error",
    "FINISH_REASON_UNSPECIFIED": "error",
}
"""Gemini's finish reasons (API reference, `FinishReason`) as parley's.

`STOP` ends tool-calling answers too: it is read as `tool_calls` when the answer called one.
A reason not listed here (a newer one) is left for the accumulator to infer.
"""


def finish_reason(value: Any, *, called_tools: bool) -> FinishReason | None:
    """The parley finish reason for a Gemini one; None for an unknown one."""
    reason = FINISH_REASONS.get(value) if isinstance(value, str) else None
    if reason == "stop" and called_tools:
        return "tool_calls"
    return reason


def usage(metadata: Mapping[str, Any]) -> ChatUsage:
    """Usage from `usageMetadata`.

    Thinking is billed as output: output tokens are the answer's plus the thoughts'
    (`thoughtsTokenCount`). Input tokens are the prompt's plus what tools added to it
    (`toolUsePromptTokenCount`); cached tokens are those of the prompt served from a cache
    (`cachedContentTokenCount`), part of the input.
    """
    return ChatUsage(
        input_tokens=(metadata.get("promptTokenCount") or 0)
        + (metadata.get("toolUsePromptTokenCount") or 0),
        output_tokens=(metadata.get("candidatesTokenCount") or 0)
        + (metadata.get("thoughtsTokenCount") or 0),
        cached_tokens=metadata.get("cachedContentTokenCount") or 0,
    )


def _finish_facts(candidate: Mapping[str, Any]) -> dict[str, Any]:
    """Gemini's own finish reason and its `finishMessage`, for the response's `metadata`.

    Many reasons share one parley reason (`SAFETY` and `RECITATION` are both
    `content_filter`, `MALFORMED_FUNCTION_CALL` and `OTHER` both `error`): the raw one says
    which, and the message (given for a malformed call, for instance) what went wrong.
    """
    facts: dict[str, Any] = {"finish_reason": candidate["finishReason"]}
    if message := candidate.get("finishMessage"):
        facts["finish_message"] = message
    return facts


class ResponseReader(EventReader):
    """Turns `GenerateContentResponse` objects (a whole answer, or stream events) into deltas.

    `finished`: a finish reason (or a blocked prompt) arrived; never `done`, as Gemini's last
    event is data.

    Args:
        model: The model's name, for errors.
    """

    id_field: ClassVar[str] = "responseId"
    model_field: ClassVar[str] = "modelVersion"

    def __init__(self, *, model: str) -> None:
        super().__init__(model=model, provider="gemini")
        self._calls = 0
        self._metadata: Any = None

    def feed(self, name: str, data: bytes) -> list[Delta]:
        """The deltas in one stream event (`name` is unused: Gemini names no events)."""
        return self.read(read_json(data, model=self.model, provider=self.provider))

    def read(self, chunk: Mapping[str, Any]) -> list[Delta]:
        """The deltas in one `GenerateContentResponse`.

        Raises:
            ContentFilterError: Gemini blocked the prompt (`promptFeedback.blockReason`).
            ModelError: The response is an error object (`{"error": {...}}`).
        """
        if chunk.get("error"):
            raise error_from_payload(chunk["error"], model=self.model)
        candidates = chunk.get("candidates") or ()
        feedback = chunk.get("promptFeedback")
        if not candidates and feedback and feedback.get("blockReason"):
            raise blocked_prompt(feedback, model=self.model)
        deltas: list[Delta] = []
        reason: FinishReason | None = None
        facts: dict[str, Any] | None = None
        if candidates:
            candidate = candidates[0]
            for part in (candidate.get("content") or {}).get("parts") or ():
                self._part(part, deltas)
            raw_reason = candidate.get("finishReason")
            if raw_reason:
                self.finished = True
                reason = finish_reason(raw_reason, called_tools=self._calls > 0)
                facts = _finish_facts(candidate)
        metadata = chunk.get("usageMetadata")
        if metadata == self._metadata:
            metadata = None  # Gemini repeats it in every event: read it when it changes
        else:
            self._metadata = metadata
        self.meta(chunk, deltas, usage(metadata) if metadata else None, reason, facts)
        return deltas

    def _part(self, part: Mapping[str, Any], out: list[Delta]) -> None:
        signature = part.get("thoughtSignature")
        if part.get("thought"):
            text = part.get("text") or ""
            if text or signature:
                out.append(ThinkingDelta(text, signature=signature or None))
            return
        if signature:
            out.append(ThinkingDelta("", extra={PART_SIGNATURE: signature}))
        if text := part.get("text"):
            out.append(TextDelta(text))
        elif call := part.get("functionCall"):
            self._calls += 1
            arguments = call.get("args")
            raw = json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""
            out.append(ToolCallDelta(self._calls, call.get("id") or None, call.get("name"), raw))
        elif block := block_from_part(part):
            out.append(BlockDelta(block))
