"""Chat Completions answers, whole or streamed, as parley deltas.

Read from plain dicts (see `_sse`). Besides OpenAI's own fields this reads what compatible
servers add: reasoning as `reasoning_content` (DeepSeek, DashScope, Kimi, xAI) or
`reasoning` (OpenRouter, vLLM), content as a list of typed parts, reasoning among them as
`thinking` parts (Mistral's reasoning models, in streams too), and cached prompt tokens
wherever each provider reports them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from parley.models._wire import EventReader, FinishReasons, read_json
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage, FinishReason
from parley.providers.openai._errors import error_from_payload

__all__ = ["ChatStreamReader", "chat_usage", "completion_deltas", "finish_reason"]

finish_reason = FinishReasons(
    {
        "stop": "stop",
        "length": "length",
        "tool_calls": "tool_calls",
        "function_call": "tool_calls",  # the legacy functions API
        "content_filter": "content_filter",
        "insufficient_system_resource": "error",  # DeepSeek: the answer was cut by load
        "error": "error",  # OpenRouter: the upstream provider failed mid-stream
    }
)
"""Parley's finish reason for a provider's; None for unknown ones (inferred later)."""


def chat_usage(usage: dict[str, Any]) -> ChatUsage:
    """Usage from a `usage` object; cached tokens from wherever the provider puts them."""
    details = usage.get("prompt_tokens_details") or {}
    cached = (
        details.get("cached_tokens")  # OpenAI, DashScope, xAI
        or usage.get("prompt_cache_hit_tokens")  # DeepSeek
        or usage.get("cached_tokens")  # Moonshot
        or 0
    )
    return ChatUsage(
        input_tokens=usage.get("prompt_tokens") or 0,
        output_tokens=usage.get("completion_tokens") or 0,
        cached_tokens=cached,
    )


def _reasoning(message: dict[str, Any]) -> Any:
    # Servers in transition send both fields with the same text; take one.
    return message.get("reasoning_content") or message.get("reasoning")


def _arguments(function: dict[str, Any]) -> str:
    arguments = function.get("arguments")
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments, ensure_ascii=False)  # a few servers send an object


def _part_text(value: Any) -> str:
    """The text of a part's value: a string, or a list of `text` parts (Mistral's thinking)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_part_text(p.get("text")) for p in value if isinstance(p, dict))
    return ""


def _content_deltas(content: list[Any], out: list[Delta]) -> None:
    """Deltas for `content` given as typed parts: `text` parts, and `thinking` parts.

    Mistral's reasoning models send `[{"type": "thinking", "thinking": [{"type": "text",
    "text": ...}]}, {"type": "text", "text": ...}]` (its API reference, `ThinkChunk`), in
    whole answers and in each stream delta. Neighbouring parts of one kind make one delta;
    parts of other types (references, images a server echoes) carry no answer text and are
    left out.
    """
    kind, pieces = "", list[str]()
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "thinking":
            piece, part_kind = _part_text(part.get("thinking")), "thinking"
        elif part.get("type") in ("text", None):
            piece, part_kind = _part_text(part.get("text")), "text"
        else:
            continue
        if piece and part_kind != kind:
            _flush_parts(kind, pieces, out)
            kind, pieces = part_kind, []
        if piece:
            pieces.append(piece)
    _flush_parts(kind, pieces, out)


def _flush_parts(kind: str, pieces: list[str], out: list[Delta]) -> None:
    if pieces:
        text = "".join(pieces)
        out.append(ThinkingDelta(text) if kind == "thinking" else TextDelta(text))


def completion_deltas(body: dict[str, Any], *, model: str, provider: str) -> Iterator[Delta]:
    """The deltas of a whole (non-streamed) chat completion."""
    if body.get("error"):
        raise error_from_payload(body["error"], model=model, provider=provider)
    choices = body.get("choices") or [{}]
    choice = choices[0]
    message = choice.get("message") or {}
    if reasoning := _reasoning(message):
        yield ThinkingDelta(reasoning)
    content = message.get("content")
    if isinstance(content, list):  # content parts (Mistral, a few other servers)
        parts: list[Delta] = []
        _content_deltas(content, parts)
        yield from parts
    elif text := (content if isinstance(content, str) else "") or message.get("refusal"):
        yield TextDelta(text)
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        yield ToolCallDelta(index, call.get("id"), function.get("name"), _arguments(function))
    usage = body.get("usage")
    yield MetaDelta(
        usage=chat_usage(usage) if usage else None,
        finish_reason=finish_reason(choice.get("finish_reason")),
        response_id=body.get("id"),
        model=body.get("model"),
    )


class ChatStreamReader(EventReader):
    """Turns the data of each Chat Completions stream event into deltas.

    It is `done` at `data: [DONE]`; its arguments are `EventReader`'s.
    """

    def __init__(self, *, model: str, provider: str) -> None:
        super().__init__(model=model, provider=provider)
        self._names: dict[int | str, str] = {}

    def feed(self, name: str, data: bytes) -> list[Delta]:
        """The deltas in one event (`name` is unused: Chat Completions names no events)."""
        return self.read(data)

    def read(self, data: bytes) -> list[Delta]:
        """The deltas in one event's data.

        Raises:
            ModelOutputError: The data is not a JSON object.
            ModelError: The provider reported an error in the stream.
        """
        if data == b"[DONE]":
            self.done = True
            return []
        chunk = read_json(data, model=self.model, provider=self.provider)
        if chunk.get("error"):
            raise error_from_payload(chunk["error"], model=self.model, provider=self.provider)
        deltas: list[Delta] = []
        reason: FinishReason | None = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) == 0:
                self._delta(choice.get("delta") or {}, deltas)
                reason = finish_reason(choice.get("finish_reason")) or reason
                self.finished = self.finished or bool(choice.get("finish_reason"))
        usage = chunk.get("usage")
        self.meta(chunk, deltas, chat_usage(usage) if usage else None, reason)
        return deltas

    def _delta(self, delta: dict[str, Any], out: list[Delta]) -> None:
        if reasoning := _reasoning(delta):
            out.append(ThinkingDelta(reasoning))
        content = delta.get("content")
        if type(content) is list:  # typed parts (Mistral's reasoning models); text is a str
            _content_deltas(content, out)
        elif text := content or delta.get("refusal"):
            out.append(TextDelta(text))
        for position, call in enumerate(delta.get("tool_calls") or ()):
            out.append(self._tool_call(call.get("index", position), call))

    def _tool_call(self, key: int | str, call: dict[str, Any]) -> ToolCallDelta:
        function = call.get("function") or {}
        name = function.get("name") or None
        if name is not None:
            # OpenAI names a call once; some compatible servers repeat the whole name in
            # every chunk, which must not be appended to itself.
            seen = self._names.get(key, "")
            name = None if seen == name else name
            self._names[key] = seen + (name or "")
        return ToolCallDelta(key, call.get("id") or None, name, _arguments(function))
