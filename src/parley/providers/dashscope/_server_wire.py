"""DashScope native wire-format bodies and stream events for a scripted answer (`Reply`).

Shapes follow Model Studio's API reference for the native API and the `dashscope` SDK's
parsers (`dashscope.common.utils._handle_stream`, `dashscope.v2.types.completions`):

- a whole answer: `{"output": {"choices": [{"finish_reason", "message"}]}, "usage",
  "request_id"}`, the message's `content` a string (text generation) or a list of
  `{"text": ...}` parts (multimodal generation);
- a stream: one server-sent event per chunk, `id:N`, `event:result`, the comment
  `:HTTP_STATUS/200`, `data:{...}` (the same object, `finish_reason` the string `"null"`
  until the last, usage counted so far in each); with `incremental_output` each event
  carries the new text only, else the whole message so far;
- an error: `{"code", "message", "request_id"}`, as a JSON body or an `event:error`;
- an embedding answer (`Embeddings`): `{"output": {"embeddings": [...]}, "usage",
  "request_id"}`, each vector `{"text_index", "embedding"}` from text embedding and
  `{"index", "embedding", "type"}` from multimodal embedding; usage `{"total_tokens"}`, or
  `{"input_tokens", "image_tokens", "total_tokens"}` as qwen3-vl-embedding counts.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from parley.providers._server.embeddings import MEDIA_TOKENS, Embeddings, text_tokens
from parley.providers._server.steps import ChatReply, Faults, ToolCall
from parley.providers._server.tone import render

__all__ = [
    "Embeddings",
    "Reply",
    "Speech",
    "ToolCall",
    "embedding_answer",
    "error_event",
    "event",
    "speech_answer",
    "speech_events",
    "stream_events",
    "whole_answer",
]

_ids = itertools.count(1)


def request_id() -> str:
    """A fresh request id, as DashScope's (a UUID-like string)."""
    return f"{next(_ids):08d}-0000-4000-8000-000000000000"


@dataclass
class Reply(ChatReply):
    """One scripted answer, in the wire format of the endpoint called.

    Sent whole or streamed as the request asks (`X-DashScope-SSE: enable`), incrementally or
    cumulatively as its `incremental_output` asks; the fault fields make it misbehave.

    Args:
        text: The answer's text.
        reasoning: Thinking (`reasoning_content`).
        tool_calls: Tool calls, in order.
        finish_reason: The finish reason (default `tool_calls` or `stop`).
        input_tokens: Usage: prompt tokens.
        output_tokens: Usage: output tokens (default: the number of chunks).
        cached_tokens: Usage: prompt tokens served from cache.
        chunk_size: Characters per streamed piece.
        response_id: The `request_id` to report.
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an `event:error` at this position and end the stream.
        error: The error event's `code` and `message`.
        error_status: The status the error event's comment names.
    """

    response_id: str | None = None
    error: dict[str, Any] = field(
        default_factory=lambda: {
            "code": "InternalError",
            "message": "An internal error has occured",
        }
    )
    error_status: int = 500

    def out_tokens(self) -> int:
        """The output token count to report."""
        if self.output_tokens is not None:
            return self.output_tokens
        calls = sum(len(self.pieces(c.raw())) for c in self.tool_calls)
        return len(self.pieces(self.text)) + len(self.pieces(self.reasoning)) + calls


@dataclass
class Speech(Faults):
    """A scripted Qwen-TTS answer: the request's `input.text` spoken by the test voice.

    Streamed (`X-DashScope-SSE: enable`) as one event per `chunk_size` characters, each with
    `output.audio.data` (base64 PCM, 24 kHz) and the usage so far, then a last event with
    `finish_reason: "stop"`, empty data and the whole audio's URL; whole, as that last
    event's body. The fault fields are `Reply`'s.

    Args:
        chunk_size: Characters per audio event.
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an `event:error` at this position and end the stream.
        error: The error event's `code` and `message`.
        error_status: The status the error event's comment names.
    """

    chunk_size: int = 3
    error: dict[str, Any] = field(
        default_factory=lambda: {"code": "InternalError", "message": "An internal error"}
    )
    error_status: int = 500


def _speech_body(rid: str, audio: bytes, text: str, done: int, *, final: bool) -> dict[str, Any]:
    # Usage as qwen-tts counts it (text tokens in, 50 audio tokens a second out) beside
    # qwen3-tts's billed characters.
    usage = {
        "characters": len(text),
        "input_tokens": len(text),
        "output_tokens": done,  # one audio token per character (20 ms)
    }
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    data = base64.b64encode(audio).decode("ascii")
    url = f"https://dashscope-result.example/{rid}.wav" if final else ""
    output = {
        "finish_reason": "stop" if final else "null",
        "audio": {"data": data, "url": url, "id": f"audio_{rid}", "expires_at": 0},
    }
    return {"output": output, "usage": usage, "request_id": rid}


def _speech_text(body: Any) -> str:
    data = (body or {}).get("input") if isinstance(body, dict) else None
    text = (data or {}).get("text")
    if not isinstance(text, str) or not text:
        raise ValueError("input.text must be a non-empty string")
    return text


def speech_events(step: Speech, body: Any) -> list[bytes]:
    """The server-sent events of a streamed Qwen-TTS answer to a request `body`.

    Raises:
        ValueError: The body has no text (the server answers 400).
    """
    text = _speech_text(body)
    rid = request_id()
    size = max(1, step.chunk_size)
    events = []
    for number, start in enumerate(range(0, len(text), size), 1):
        piece = text[start : start + size]
        answer = _speech_body(rid, render(piece), text, start + len(piece), final=False)
        events.append(event(number, "result", 200, json.dumps(answer)))
    last = _speech_body(rid, b"", text, len(text), final=True)
    events.append(event(len(events) + 1, "result", 200, json.dumps(last)))
    return events


def speech_answer(body: Any) -> dict[str, Any]:
    """A whole Qwen-TTS answer: the audio's URL, no data (as DashScope answers).

    Raises:
        ValueError: The body has no text.
    """
    text = _speech_text(body)
    return _speech_body(request_id(), b"", text, len(text), final=True)


def _usage(reply: Reply, output: int, *, final: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": reply.input_tokens,
        "output_tokens": output,
        "total_tokens": reply.input_tokens + output,
    }
    if final:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        if reply.reasoning:
            usage["output_tokens_details"] = {
                "reasoning_tokens": len(reply.pieces(reply.reasoning))
            }
    return usage


def _content(text: str, multimodal: bool) -> Any:
    return ([{"text": text}] if text else []) if multimodal else text


def _calls(calls: list[ToolCall], ids: list[str], arguments: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "index": index,
            "id": ids[index],
            "type": "function",
            "function": {"name": call.name, "arguments": arguments[index]},
        }
        for index, call in enumerate(calls)
    ]


def _call_ids(reply: Reply) -> list[str]:
    return [call.id or f"call_{next(_ids):08d}" for call in reply.tool_calls]


def whole_answer(reply: Reply, *, multimodal: bool) -> dict[str, Any]:
    """A whole (non-streamed) answer."""
    message: dict[str, Any] = {"role": "assistant", "content": _content(reply.text, multimodal)}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        raw = [call.raw() for call in reply.tool_calls]
        message["tool_calls"] = _calls(reply.tool_calls, _call_ids(reply), raw)
    return {
        "output": {"choices": [{"finish_reason": reply.finish(), "message": message}]},
        "usage": _usage(reply, reply.out_tokens(), final=True),
        "request_id": reply.response_id or request_id(),
    }


def _incremental(reply: Reply, multimodal: bool) -> list[dict[str, Any]]:
    empty = _content("", multimodal)
    messages = [{"content": empty, "reasoning_content": p} for p in reply.pieces(reply.reasoning)]
    messages += [
        {"content": _content(p, multimodal), "reasoning_content": ""}
        for p in reply.pieces(reply.text)
    ]
    for index, (call_id, call) in enumerate(zip(_call_ids(reply), reply.tool_calls, strict=True)):
        for number, piece in enumerate(reply.pieces(call.raw()) or [""]):
            function: dict[str, Any] = {"arguments": piece}
            if number == 0:
                function["name"] = call.name
            part = {"index": index, "id": call_id if number == 0 else "", "type": "function"}
            messages.append(
                {
                    "content": _content("", multimodal),
                    "tool_calls": [{**part, "function": function}],
                }
            )
    return messages


def _cumulative(reply: Reply, multimodal: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    reasoning = text = ""
    for piece in reply.pieces(reply.reasoning):
        reasoning += piece
        messages.append({"content": _content("", multimodal), "reasoning_content": reasoning})
    for piece in reply.pieces(reply.text):
        text += piece
        messages.append({"content": _content(text, multimodal), "reasoning_content": reasoning})
    ids = _call_ids(reply)
    arguments = ["" for _ in reply.tool_calls]
    for index, call in enumerate(reply.tool_calls):
        for piece in reply.pieces(call.raw()) or [""]:
            arguments[index] += piece
            calls = _calls(reply.tool_calls[: index + 1], ids, arguments)
            messages.append(
                {
                    "content": _content(text, multimodal),
                    "reasoning_content": reasoning,
                    "tool_calls": calls,
                }
            )
    return messages


def stream_events(reply: Reply, *, multimodal: bool, incremental: bool) -> list[bytes]:
    """The server-sent events of a streamed answer, the finish reason in the last."""
    rid = reply.response_id or request_id()
    messages = (_incremental if incremental else _cumulative)(reply, multimodal)
    if incremental or not messages:
        last: dict[str, Any] = {"content": _content("", multimodal), "reasoning_content": ""}
    else:
        last = dict(messages[-1])
    messages.append(last)
    total = reply.out_tokens()
    events = []
    for number, message in enumerate(messages, 1):
        final = number == len(messages)
        output = total if final else min(total, number)
        body = {
            "output": {
                "choices": [
                    {
                        "message": {"role": "assistant", **message},
                        "finish_reason": reply.finish() if final else "null",
                    }
                ]
            },
            "usage": _usage(reply, output, final=final),
            "request_id": rid,
        }
        events.append(event(number, "result", 200, json.dumps(body, ensure_ascii=False)))
    return events


def event(number: int, name: str, status: int, data: str) -> bytes:
    """One server-sent event as DashScope frames it."""
    return f"id:{number}\nevent:{name}\n:HTTP_STATUS/{status}\ndata:{data}\n\n".encode()


def error_event(number: int, status: int, code: str, message: str, rid: str | None = None) -> bytes:
    """An `event:error` with DashScope's error object."""
    body = {"code": code, "message": message, "request_id": rid or request_id()}
    return event(number, "error", status, json.dumps(body))


def _embedding_keys(body: Any, *, multimodal: bool) -> list[tuple[str, str]]:
    """`(kind, key)` of each input of an embedding request, or ValueError for a bad body."""
    data = (body or {}).get("input") if isinstance(body, dict) else None
    items = (data or {}).get("contents" if multimodal else "texts")
    if not isinstance(items, list) or not items:
        raise ValueError(f"input.{'contents' if multimodal else 'texts'} must be a non-empty list")
    if not multimodal:
        if not all(isinstance(text, str) for text in items):
            raise ValueError("input.texts must hold strings")
        return [("text", text) for text in items]
    keys = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise ValueError(f"each content must have one key (text, image or video): {item!r}")
        [(kind, value)] = item.items()
        if kind not in ("text", "image", "video") or not isinstance(value, str):
            raise ValueError(f"unknown content {item!r}")
        keys.append((kind, value))
    return keys


def embedding_answer(step: Embeddings, body: Any, *, multimodal: bool) -> dict[str, Any]:
    """The answer of text embedding or multimodal embedding to a request `body`.

    Raises:
        ValueError: The body is not such a request (the server answers 400).
    """
    keys = _embedding_keys(body, multimodal=multimodal)
    dimension = ((body or {}).get("parameters") or {}).get("dimension")
    vectors = step.vectors([key for _, key in keys], dimension)
    index_name = "index" if multimodal else "text_index"
    found = []
    for index, vector in enumerate(vectors):
        item: dict[str, Any] = {index_name: index, "embedding": vector}
        if multimodal:
            item["type"] = keys[index][0]
        found.append(item)
    if step.reverse:
        found.reverse()
    text = sum(text_tokens(key) for kind, key in keys if kind == "text")
    media = MEDIA_TOKENS * sum(kind != "text" for kind, _ in keys)
    if step.usage is not None:
        usage = step.usage
    elif multimodal:  # as qwen3-vl-embedding counts: media apart from text
        usage = {"input_tokens": text, "image_tokens": media, "total_tokens": text + media}
    else:
        usage = {"total_tokens": text}
    answer: dict[str, Any] = {"output": {"embeddings": found}, "request_id": request_id()}
    if usage:
        answer["usage"] = usage
    return answer
