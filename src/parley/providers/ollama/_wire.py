"""`/api/chat` answers, whole or streamed as NDJSON, as parley deltas.

Each streamed line is a JSON object: `message` holds what is new (`content`, `thinking`,
whole `tool_calls`), and the last line has `done: true`, the `done_reason` and the usage
(`prompt_eval_count`, `eval_count`, durations in nanoseconds). A whole answer is one such
object. Shapes from Ollama's `api/types.go` (`ChatResponse`, `Message`, `ToolCall`) and
`docs/api.md`.

Quirks read here:
- a tool call comes whole, in one line, its arguments a JSON object; servers before
  v0.12 send no `id` (parley generates a unique one), newer ones send one (kept);
- `done_reason` is `stop` even when the model called tools (read as `tool_calls` then),
  `length` at the token limit, and `load` / `unload` for a call without messages (which
  loads the model, or unloads it with `keep_alive: 0`);
- an error in the middle of a stream is a line `{"error": "..."}`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from parley.models._wire import FinishReasons, read_json
from parley.models.accumulator import Delta, MetaDelta, TextDelta, ThinkingDelta, ToolCallDelta
from parley.models.response import ChatUsage
from parley.providers.ollama._errors import PROVIDER, error_from_payload

__all__ = ["ChatReader", "iter_lines", "parse_object"]

_FINISH = FinishReasons(
    {
        "stop": "stop",
        "length": "length",
        # A call without messages only loads or unloads the model: it ended as asked.
        "load": "stop",
        "unload": "stop",
    }
)
_DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


async def iter_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The non-empty lines of an NDJSON byte stream.

    A last line without its newline is kept (the server ended the body there); a stream
    cut in the middle of a line then shows as that line's malformed JSON.
    """
    pending = b""
    async for chunk in chunks:
        lines = (pending + chunk if pending else chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line and not line.isspace():
                yield line
    if pending.strip():
        yield pending


def parse_object(data: bytes, *, model: str) -> dict[str, Any]:
    """Parse one JSON object Ollama sent.

    Raises:
        ModelOutputError: It is not a JSON object.
    """
    return read_json(data, model=model, provider=PROVIDER)


def _arguments(function: dict[str, Any]) -> str:
    arguments = function.get("arguments")
    if arguments is None:
        return ""
    if isinstance(arguments, str):  # proxies that pass OpenAI's string through
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _usage(chunk: dict[str, Any]) -> ChatUsage | None:
    prompt, output = chunk.get("prompt_eval_count"), chunk.get("eval_count")
    if prompt is None and output is None:
        return None
    return ChatUsage(input_tokens=prompt or 0, output_tokens=output or 0)


def _metadata(chunk: dict[str, Any]) -> dict[str, Any]:
    """`done_reason` as sent, and the durations in seconds (Ollama counts nanoseconds)."""
    metadata: dict[str, Any] = {}
    if reason := chunk.get("done_reason"):
        metadata["done_reason"] = reason
    durations = {
        name.removesuffix("_duration"): chunk[name] / 1e9
        for name in _DURATIONS
        if isinstance(chunk.get(name), int | float)
    }
    if durations:
        metadata["durations"] = durations
    return metadata


class ChatReader:
    """Turns `/api/chat` objects (stream lines, or one whole answer) into deltas.

    Args:
        model: The model's name, for errors.
        host: The server's base URL, for errors.
    """

    def __init__(self, *, model: str, host: str) -> None:
        self.model = model
        self.host = host
        self.done = False
        """The object with `done: true` arrived: the answer is whole."""
        self._calls = 0
        self._started = False

    def read_line(self, line: bytes) -> list[Delta]:
        """The deltas in one streamed line.

        Raises:
            ModelOutputError: The line is not a JSON object.
            ModelError: The line reports an error.
        """
        return self.read(parse_object(line, model=self.model))

    def read(self, chunk: dict[str, Any]) -> list[Delta]:
        """The deltas in one object.

        Raises:
            ModelError: The object reports an error.
        """
        if error := chunk.get("error"):
            raise error_from_payload(error, model=self.model, host=self.host)
        deltas: list[Delta] = []
        message = chunk.get("message")
        if message:
            if thinking := message.get("thinking"):
                deltas.append(ThinkingDelta(thinking))
            if content := message.get("content"):
                deltas.append(TextDelta(content))
            if calls := message.get("tool_calls"):
                deltas.extend(self._tool_call(call) for call in calls)
        if not self._started:
            self._started = True
            deltas.append(MetaDelta(model=chunk.get("model")))
        if chunk.get("done"):
            self.done = True
            deltas.append(self._end(chunk))
        return deltas

    def _tool_call(self, call: dict[str, Any]) -> ToolCallDelta:
        # Each call arrives whole, in one line: each gets a key of its own (servers before
        # v0.12 send no `index`).
        key = self._calls
        self._calls += 1
        function = call.get("function") or {}
        return ToolCallDelta(
            key, call.get("id") or None, function.get("name"), _arguments(function)
        )

    def _end(self, chunk: dict[str, Any]) -> MetaDelta:
        raw = chunk.get("done_reason")
        reason = _FINISH(raw)
        if reason == "stop" and self._calls:
            reason = "tool_calls"  # Ollama says `stop` after tool calls too
        return MetaDelta(usage=_usage(chunk), finish_reason=reason, metadata=_metadata(chunk))
