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

A stream is read a network read at a time (`StreamReader.read`): its events cut from the
bytes (`EventSplitter`, DashScope's own framing of `id:`, `event:result`, a
`:HTTP_STATUS/200` comment and one `data:` line recognized whole), each read into deltas
without an async generator's step per event. A stream's cost per event is what parley is
measured on against the SDK (benchmarks/models_dashscope.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from parley.models._wire import Event, EventReader, FinishReasons, LineSplitter, loads, read_json
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage, FinishReason
from parley.providers.dashscope._errors import error_from_code

__all__ = [
    "EventSplitter",
    "StreamReader",
    "completion_deltas",
    "finish_reason",
    "native_usage",
]

finish_reason = FinishReasons(
    {
        "stop": "stop",
        "length": "length",
        "tool_calls": "tool_calls",
        "function_call": "tool_calls",
    }
)
"""Parley's finish reason for DashScope's; None mid-stream (`"null"`) and for unknown ones."""


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


class StreamReader(EventReader):
    """Turns each event of a native stream into deltas (never `done`: the last event ends it).

    Args:
        model: The model's name, for errors.
        provider: The provider's name, for errors.
        incremental: Whether the request asked for `incremental_output` (else every event
            repeats the whole message so far).
    """

    def __init__(self, *, model: str, provider: str, incremental: bool = True) -> None:
        super().__init__(model=model, provider=provider)
        self._seen = None if incremental else _Seen()
        self._usage: dict[str, Any] | None = None
        self._names: dict[int | str, str] = {}
        self._ids: dict[int | str, str] = {}
        self._signature = ""
        self._events = EventSplitter()
        self.failure: Exception | None = None
        """An event's error, raised by `read` after the deltas before it (see `read`)."""

    def read(self, chunk: bytes) -> list[Delta]:
        """The deltas of the events that end in `chunk`, a read of the body.

        When an event fails, the deltas of the events before it in `chunk` are handed out
        first: `failure` then holds the error, for the caller to raise after them.

        Raises:
            ModelOutputError: An event's data is not a JSON object.
            ModelError: DashScope reported an error in the stream.
        """
        deltas: list[Delta] = []
        try:
            for block in self._events.blocks(chunk):
                data = _result_data(block)
                if data is not None:
                    self._event("result", data, deltas)
                elif (event := _event_by_lines(block)) is not None:
                    self._event(*event, deltas)
        except Exception as exc:
            if not deltas:
                raise
            self.failure = exc
        return deltas

    def end(self) -> list[Delta]:
        """The deltas of the event still open when the body ended, if its lines were whole."""
        deltas: list[Delta] = []
        for name, data in self._events.end():
            self._event(name, data, deltas)
        return deltas

    def feed(self, name: str, data: bytes) -> list[Delta]:
        """The deltas in one event (`name` is `result`, or `error` for a failure).

        Raises:
            ModelOutputError: The data is not a JSON object.
            ModelError: DashScope reported an error in the stream.
        """
        deltas: list[Delta] = []
        self._event(name, data, deltas)
        return deltas

    def _event(self, name: str, data: bytes, deltas: list[Delta]) -> None:
        try:
            body = loads(data)
        except ValueError:
            body = None
        if type(body) is not dict:  # what is wrong with it, said as for every provider
            body = read_json(data, model=self.model, provider=self.provider)
        if name == "error" or body.get("code"):
            _raise_error(
                {"code": "InternalError", **body}, model=self.model, provider=self.provider
            )
        try:
            choice = body["output"]["choices"][0]
        except (KeyError, TypeError, IndexError):
            choice = _choice(body)
        message = choice.get("message")
        if message:
            # Most events of a stream: a new piece of text alone (read without a call).
            text = message.get("content")
            if (
                self._seen is None
                and type(text) is str
                and "reasoning_content" not in message
                and "tool_calls" not in message
                and "reasoning_signature" not in message
            ):
                if text:
                    deltas.append(TextDelta(text))
            else:
                self._message(message, deltas)
        if usage := body.get("usage"):
            self._usage = usage
        reason = choice.get("finish_reason")
        if (reason is not None and reason != "null") or not self._started:
            self._meta(body, finish_reason(reason), deltas)

    def _meta(self, body: dict[str, Any], reason: FinishReason | None, out: list[Delta]) -> None:
        """The stream's first event, or its last (with the finish reason and the usage)."""
        self._started = True
        self.finished = self.finished or reason is not None
        usage = self._usage if reason is not None else None
        out.append(
            MetaDelta(
                usage=native_usage(usage) if usage else None,
                finish_reason=reason,
                response_id=body.get("request_id"),
            )
        )

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


# -- server-sent events, a read at a time ---------------------------------------------------


class EventSplitter:
    """Cuts server-sent events from a body's bytes, a read at a time.

    It reads the SSE format as `parley.models._wire.iter_events` does (`data:` lines joined
    by newlines, `event:` names the event, comments (`:` lines), `id:` and `retry:` ignored,
    a blank line ends an event; an event still open when the body ends is kept if its lines
    were whole), and recognizes DashScope's every event (`id:`, `event:result`, a
    `:HTTP_STATUS/200` comment, one `data:` line) with a few searches of its bytes instead of
    a pass over each line.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def blocks(self, chunk: bytes) -> list[bytes]:
        """The lines of each event that ends in `chunk` (the bytes after the last are kept)."""
        buffer = self._pending + chunk if self._pending else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")  # a `\r` cut from its `\n`: joined next time
        blocks = buffer.split(b"\n\n")
        self._pending = blocks.pop()
        return blocks

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that end in `chunk`."""
        events: list[Event] = []
        for block in self.blocks(chunk):
            data = _result_data(block)
            if data is not None:
                events.append(("result", data))
            elif (event := _event_by_lines(block)) is not None:
                events.append(event)
        return events

    def end(self) -> list[Event]:
        """The event still open when the body ended, if its lines were whole."""
        rest, self._pending = self._pending, b""
        whole = rest.rpartition(b"\n")[0]  # a line cut in half is dropped
        event = _event_by_lines(whole) if whole else None
        return [event] if event is not None else []


_RESULT = b"\nevent:result\n:HTTP_STATUS/200\ndata:"


def _result_data(block: bytes) -> bytes | None:
    """The data of a block that is DashScope's `result` event exactly, else None.

    That is `id:<n>`, `event:result`, `:HTTP_STATUS/200` and one `data:` line, in that
    order: found by searches of the block, without copying its lines out.
    """
    at = block.find(_RESULT)
    if at < 3 or not block.startswith(b"id:") or block.find(b"\n", 3, at) != -1:
        return None
    start = at + len(_RESULT)
    if block.find(b"\n", start) != -1 or block[start : start + 1] == b" ":
        return None  # more lines after the data, or a space to strip: read line by line
    return block[start:]


def _event_by_lines(block: bytes) -> Event | None:
    """The event in a block of lines (no blank line inside), or None when it has no data."""
    events = LineSplitter().feed(block + b"\n\n")
    return events[0] if events else None
