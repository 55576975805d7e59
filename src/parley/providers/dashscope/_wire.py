"""DashScope's native answers, whole or streamed, as parley deltas.

A native answer (`result_format: "message"`) is `{"output": {"choices": [{"message": {...},
"finish_reason": ...}]}, "usage": {...}, "request_id": ...}`. The message holds `content` (a
string from text generation, a list of `{"text": ...}` parts from multimodal generation),
`reasoning_content` (thinking) and `tool_calls` (OpenAI's shape, with an `index` when
streamed). A stream (`X-DashScope-SSE: enable`) sends one such object per event,
`event:result`, with `finish_reason` the string `"null"` until the last; a failure mid-way is
an `event:error` with `{"code", "message", "request_id"}`. Usage comes in every event; it is
read once, at the end.

With `incremental_output` (parley's default for streams) each event carries the new text
only. Without it DashScope repeats the whole message so far in every event: the reader then
hands on only what is past what it has seen, so the caller gets the same deltas either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from parley.models._wire import read_json
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage, FinishReason
from parley.providers.dashscope._errors import error_from_code

__all__ = ["StreamReader", "completion_deltas", "finish_reason", "native_usage"]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


def finish_reason(value: Any) -> FinishReason | None:
    """The finish reason for DashScope's; None mid-stream (`"null"`) and for unknown ones."""
    return _FINISH.get(value) if isinstance(value, str) else None


def native_usage(usage: dict[str, Any]) -> ChatUsage:
    """Usage from a native `usage` object.

    `output_tokens` includes the thinking (`output_tokens_details.reasoning_tokens`);
    cached prompt tokens are in `prompt_tokens_details.cached_tokens`.
    """
    details = usage.get("prompt_tokens_details") or {}
    return ChatUsage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cached_tokens=details.get("cached_tokens") or 0,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal generation: `[{"text": ...}, ...]`
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return ""


def _arguments(function: dict[str, Any]) -> str:
    arguments = function.get("arguments")
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments, ensure_ascii=False)


def _raise_error(body: dict[str, Any], *, model: str, provider: str) -> None:
    if body.get("code"):
        raise error_from_code(
            None, body["code"], body.get("message"), body, model=model, provider=provider
        )


def _choice(body: dict[str, Any]) -> dict[str, Any]:
    output = body.get("output") or {}
    choices = output.get("choices")
    if choices:
        first: dict[str, Any] = choices[0]
        return first
    # `result_format: "text"`: the text and finish reason on the output itself.
    return {
        "message": {"content": output.get("text")},
        "finish_reason": output.get("finish_reason"),
    }


def completion_deltas(body: dict[str, Any], *, model: str, provider: str) -> Iterator[Delta]:
    """The deltas of a whole (non-streamed) native answer.

    Raises:
        ModelError: The body reports an error (`code`).
    """
    _raise_error(body, model=model, provider=provider)
    choice = _choice(body)
    message = choice.get("message") or {}
    if (reasoning := message.get("reasoning_content")) or message.get("reasoning_signature"):
        yield ThinkingDelta(reasoning or "", signature=message.get("reasoning_signature"))
    if text := _text(message.get("content")):
        yield TextDelta(text)
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        yield ToolCallDelta(
            index, call.get("id") or None, function.get("name"), _arguments(function)
        )
    usage = body.get("usage")
    yield MetaDelta(
        usage=native_usage(usage) if usage else None,
        finish_reason=finish_reason(choice.get("finish_reason")),
        response_id=body.get("request_id"),
    )


class _Seen:
    """What a cumulative stream has sent so far, to hand on only what is new."""

    __slots__ = ("arguments", "reasoning", "text")

    def __init__(self) -> None:
        self.text = 0
        self.reasoning = 0
        self.arguments: dict[int | str, int] = {}


class StreamReader:
    """Turns each event of a native stream into deltas.

    Args:
        model: The model's name, for errors.
        provider: The provider's name, for errors.
        incremental: Whether the request asked for `incremental_output` (else every event
            repeats the whole message so far).
    """

    def __init__(self, *, model: str, provider: str, incremental: bool = True) -> None:
        self.model = model
        self.provider = provider
        self.finished = False
        """A finish reason arrived: the answer is whole even if the stream ends now."""
        self._seen = None if incremental else _Seen()
        self._started = False
        self._usage: dict[str, Any] | None = None
        self._names: dict[int | str, str] = {}
        self._ids: dict[int | str, str] = {}
        self._signature = ""

    @property
    def complete(self) -> bool:
        """Whether DashScope said the answer is whole."""
        return self.finished

    @property
    def stopped(self) -> bool:
        """Whether later events are to be read past (none are: the last event ends it)."""
        return False

    def feed(self, name: str, data: bytes) -> list[Delta]:
        """The deltas in one event (`name` is `result`, or `error` for a failure).

        Raises:
            ModelOutputError: The data is not a JSON object.
            ModelError: DashScope reported an error in the stream.
        """
        body = read_json(data, model=self.model, provider=self.provider)
        if name == "error" or body.get("code"):
            _raise_error(
                {"code": "InternalError", **body}, model=self.model, provider=self.provider
            )
        deltas: list[Delta] = []
        choice = _choice(body)
        self._message(choice.get("message") or {}, deltas)
        if usage := body.get("usage"):
            self._usage = usage
        reason = finish_reason(choice.get("finish_reason"))
        if reason is not None or not self._started:
            self._started = True
            self.finished = self.finished or reason is not None
            usage = self._usage if reason is not None else None
            deltas.append(
                MetaDelta(
                    usage=native_usage(usage) if usage else None,
                    finish_reason=reason,
                    response_id=body.get("request_id"),
                )
            )
        return deltas

    def _message(self, message: dict[str, Any], out: list[Delta]) -> None:
        reasoning = message.get("reasoning_content")
        text = message.get("content")
        seen = self._seen
        if seen is not None:
            reasoning, seen.reasoning = _past(reasoning, seen.reasoning)
            text, seen.text = _past(_text(text), seen.text)
        elif not isinstance(text, str):
            text = _text(text)
        signature = None
        if value := message.get("reasoning_signature"):
            signature, self._signature = _extension(value, self._signature)
        if reasoning or signature:
            out.append(ThinkingDelta(reasoning or "", signature=signature or None))
        if text:
            out.append(TextDelta(text))
        for position, call in enumerate(message.get("tool_calls") or ()):
            if (delta := self._tool_call(call.get("index", position), call)) is not None:
                out.append(delta)

    def _tool_call(self, key: int | str, call: dict[str, Any]) -> ToolCallDelta | None:
        function = call.get("function") or {}
        name = function.get("name") or None
        if name is not None:
            name, self._names[key] = _extension(name, self._names.get(key, ""))
        arguments = _arguments(function)
        if self._seen is not None:
            arguments, self._seen.arguments[key] = _past(
                arguments, self._seen.arguments.get(key, 0)
            )
        call_id = call.get("id") or None
        if call_id is not None:
            if self._ids.get(key) == call_id:
                call_id = None  # repeated, as in every event of a cumulative stream
            else:
                self._ids[key] = call_id
        if not (name or arguments or call_id):
            return None
        return ToolCallDelta(key, call_id, name or None, arguments)


def _extension(value: str, seen: str) -> tuple[str, str]:
    """`(new part, all seen)` of a name or signature sent once, in pieces, or repeated whole.

    Names are repeated in later pieces, and everything in every event of a cumulative stream.
    """
    new = value[len(seen) :] if value.startswith(seen) else value
    return new, seen + new


def _past(value: Any, seen: int) -> tuple[str, int]:
    """The part of a cumulative `value` past the `seen` characters, and the new length."""
    if not isinstance(value, str) or len(value) <= seen:
        return "", max(seen, len(value) if isinstance(value, str) else 0)
    return value[seen:], len(value)
