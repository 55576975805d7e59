"""OpenAI wire-format bodies and stream events for a scripted answer (`Reply`).

Shapes follow OpenAI's API reference for Chat Completions (`chat.completion`,
`chat.completion.chunk`) and the Responses API (`response` and its stream events).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from parley.providers._server.steps import ChatReply, ToolCall

__all__ = [
    "Reply",
    "ToolCall",
    "chat_chunks",
    "chat_completion",
    "response_events",
    "response_object",
]

_ids = itertools.count(1)


def _id(prefix: str) -> str:
    return f"{prefix}{next(_ids):08d}"


@dataclass
class Reply(ChatReply):
    """One scripted answer, in the wire format of the endpoint called.

    Sent whole or streamed as the request asks; the fault fields make it misbehave.

    Args:
        text: The answer's text.
        reasoning: Reasoning text (Chat Completions: in `reasoning_field`; Responses: a
            reasoning item's summary).
        tool_calls: Tool calls, in order.
        finish_reason: Chat Completions' finish reason (default `tool_calls` or `stop`);
            `length` makes a Responses answer `incomplete`.
        input_tokens: Usage: prompt tokens.
        output_tokens: Usage: output tokens (default: the number of chunks).
        cached_tokens: Usage: prompt tokens served from cache.
        chunk_size: Characters per streamed delta.
        reasoning_field: Where Chat Completions reasoning goes (`reasoning_content`, as
            DeepSeek; `reasoning`, as OpenRouter and vLLM).
        content_parts: Chat Completions: send `content` as a list of typed parts, the
            reasoning as `thinking` parts among them instead of in `reasoning_field` (as
            Mistral's reasoning models do), whole and in each stream delta.
        encrypted_reasoning: The Responses reasoning item's `encrypted_content`.
        model: The model name to report (default: the one asked for).
        response_id: The id to report.
        delay: Seconds before answering at all (a slow server; see `Faults`).
        chunk_delay: Seconds before each stream event.
        cut_after: Drop the connection after this many stream events.
        malformed_at: Replace this stream event (0-based) with broken JSON.
        error_at: Send an error event at this position and end the stream.
        error: The error event's payload.
    """

    reasoning_field: str = "reasoning_content"
    content_parts: bool = False
    encrypted_reasoning: str | None = None
    model: str | None = None
    response_id: str | None = None
    error: dict[str, Any] = field(
        default_factory=lambda: {"message": "The server had an error", "type": "server_error"}
    )

    def out_tokens(self) -> int:
        """The output token count to report."""
        if self.output_tokens is not None:
            return self.output_tokens
        return len(self.pieces(self.text)) + len(self.pieces(self.reasoning)) + 1


# -- Chat Completions -------------------------------------------------------------------------


def _chat_usage(reply: Reply) -> dict[str, Any]:
    output = reply.out_tokens()
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": output,
        "total_tokens": reply.input_tokens + output,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": len(reply.pieces(reply.reasoning))},
    }


def _call_ids(reply: Reply) -> list[str]:
    return [call.id or _id("call_") for call in reply.tool_calls]


def _thinking_part(text: str) -> dict[str, Any]:
    # Mistral's `ThinkChunk`: the reasoning as a list of text chunks.
    return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}


def _content_parts(reply: Reply) -> list[dict[str, Any]]:
    parts = [_thinking_part(reply.reasoning)] if reply.reasoning else []
    return parts + ([{"type": "text", "text": reply.text}] if reply.text else [])


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    """A whole `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.content_parts:
        message["content"] = _content_parts(reply)
    elif reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": c.name, "arguments": c.raw()}}
            for call_id, c in zip(_call_ids(reply), reply.tool_calls, strict=True)
        ]
    return {
        "id": reply.response_id or _id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish(), "logprobs": None}
        ],
        "usage": _chat_usage(reply),
        "system_fingerprint": None,
    }


def _chat_deltas(reply: Reply) -> Iterator[dict[str, Any]]:
    yield {"role": "assistant", "content": ""}
    for piece in reply.pieces(reply.reasoning):
        yield (
            {"content": [_thinking_part(piece)]}
            if reply.content_parts
            else {reply.reasoning_field: piece}
        )
    for piece in reply.pieces(reply.text):
        yield {"content": [{"type": "text", "text": piece}] if reply.content_parts else piece}
    for index, (call_id, call) in enumerate(zip(_call_ids(reply), reply.tool_calls, strict=True)):
        function = {"name": call.name, "arguments": ""}
        yield {
            "tool_calls": [
                {"index": index, "id": call_id, "type": "function", "function": function}
            ]
        }
        for piece in reply.pieces(call.raw()):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def chat_chunks(reply: Reply, model: str, *, include_usage: bool) -> list[str]:
    """The `data:` payloads of a streamed completion, `[DONE]` last."""
    base = {
        "id": reply.response_id or _id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": reply.model or model,
        "system_fingerprint": None,
    }
    events = []
    for delta in _chat_deltas(reply):
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        events.append({**base, "choices": [choice]})
    last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": reply.finish()}
    events.append({**base, "choices": [last]})
    if include_usage:
        events.append({**base, "choices": [], "usage": _chat_usage(reply)})
    return [json.dumps(event) for event in events] + ["[DONE]"]


# -- Responses API ----------------------------------------------------------------------------


def _responses_usage(reply: Reply) -> dict[str, Any]:
    output = reply.out_tokens()
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": len(reply.pieces(reply.reasoning))},
        "total_tokens": reply.input_tokens + output,
    }


def _output_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning or reply.encrypted_reasoning:
        item: dict[str, Any] = {"id": _id("rs_"), "type": "reasoning", "summary": []}
        if reply.reasoning:
            item["summary"] = [{"type": "summary_text", "text": reply.reasoning}]
        if reply.encrypted_reasoning:
            item["encrypted_content"] = reply.encrypted_reasoning
        items.append(item)
    if reply.text:
        part = {"type": "output_text", "text": reply.text, "annotations": []}
        items.append(
            {
                "id": _id("msg_"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for call_id, call in zip(_call_ids(reply), reply.tool_calls, strict=True):
        items.append(
            {
                "id": _id("fc_"),
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": call.name,
                "arguments": call.raw(),
            }
        )
    return items


def response_object(
    reply: Reply, model: str, output: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A whole `response` object."""
    incomplete = reply.finish_reason == "length"
    return {
        "id": reply.response_id or _id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "error": None,
        "model": reply.model or model,
        "output": _output_items(reply) if output is None else output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _responses_usage(reply),
    }


def _item_events(index: int, item: dict[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
    kind, item_id = item["type"], item["id"]
    ref = {"item_id": item_id, "output_index": index}
    if kind == "reasoning":
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "summary": []},
        }
        for piece in reply.pieces(reply.reasoning):
            yield {
                "type": "response.reasoning_summary_text.delta",
                **ref,
                "summary_index": 0,
                "delta": piece,
            }
    elif kind == "message":
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "content": []},
        }
        for piece in reply.pieces(reply.text):
            yield {"type": "response.output_text.delta", **ref, "content_index": 0, "delta": piece}
        yield {"type": "response.output_text.done", **ref, "content_index": 0, "text": reply.text}
    else:
        yield {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "arguments": ""},
        }
        for piece in reply.pieces(item["arguments"]):
            yield {"type": "response.function_call_arguments.delta", **ref, "delta": piece}
        yield {
            "type": "response.function_call_arguments.done",
            **ref,
            "arguments": item["arguments"],
        }
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def response_events(reply: Reply, model: str) -> list[tuple[str, str]]:
    """The `(event, data)` pairs of a streamed response, `response.completed` last."""
    output = _output_items(reply)
    final = response_object(reply, model, output)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(output):
        events.extend(_item_events(index, item, reply))
    ended = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": ended, "response": final})
    return [
        (event["type"], json.dumps({**event, "sequence_number": number}))
        for number, event in enumerate(events)
    ]
