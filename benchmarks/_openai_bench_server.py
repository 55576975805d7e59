"""A fast OpenAI-compatible server for `models.py`: pre-rendered answers, kept-alive connections.

The wire-format test server (`parley.providers.openai.server`) serves one thread per
connection and renders every answer afresh: right for tests, too slow to keep out of a
benchmark's way. This one is `_harness.RenderingServer`'s bare `asyncio.start_server`
HTTP/1.1 loop, which renders each distinct answer once and then writes the same bytes, in one
write, to every request that asks for it. `models.py` runs it in a process of its own, so that
its CPU never shares the client's event loop.

Answers (`POST .../v1/chat/completions`):

- not streamed, no `tools` in the request: a `chat.completion` with a 60-word text answer;
- not streamed, with `tools`: a `chat.completion` holding one `get_weather` tool call;
- streamed: an empty role chunk, N content chunks of one short word each, a finish chunk, a
  usage chunk when `stream_options.include_usage` asks for it, then `data: [DONE]`. N comes
  from a path prefix, so that a scenario is only a base URL: `http://HOST:PORT/n2000/v1`
  streams 2,000 chunks (`/v1` alone: 200).

Streams use chunked transfer encoding with one HTTP chunk per server-sent event, as OpenAI's
API and uvicorn-based servers send them: the client's HTTP parser hands the body on event by
event, as it does in production, rather than in a few large reads.

Run: `python benchmarks/_openai_bench_server.py [--port 0]`. It prints `PORT <n>` once it
listens and stops when its standard input closes (so it never outlives the benchmark).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from _harness import TEXT, ChatServer, chunked_response, http, server_main, word

MODEL_ID = "chatcmpl-bench0000000000000000000000"
CREATED = 1_700_000_000
_PATH = re.compile(rb"^(?:/n(\d+))?/v1/chat/completions$")


def _usage(output: int) -> dict[str, Any]:
    return {
        "prompt_tokens": 42,
        "completion_tokens": output,
        "total_tokens": 42 + output,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def completion(model: str, *, tool: bool) -> bytes:
    """A whole `chat.completion` answer, with text or with one tool call."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if tool:
        arguments = json.dumps({"city": "Paris", "unit": "celsius", "days": 3})
        message["tool_calls"] = [
            {
                "id": "call_bench000000000000000000",
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
        ]
    else:
        message["content"] = TEXT
    body = {
        "id": MODEL_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool else "stop",
            }
        ],
        "usage": _usage(60),
        "service_tier": "default",
        "system_fingerprint": "fp_bench",
    }
    return http("200 OK", "application/json", json.dumps(body).encode())


def stream(model: str, chunks: int, include_usage: bool) -> bytes:
    """A streamed answer of `chunks` content chunks, framed one event per HTTP chunk."""
    base = {
        "id": MODEL_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": "fp_bench",
    }

    def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    events = [event({"role": "assistant", "content": "", "refusal": None})]
    events += [event({"content": word(i)}) for i in range(chunks)]
    events.append(event({}, "stop"))
    if include_usage:
        events.append({**base, "choices": [], "usage": _usage(chunks)})
    payloads = [json.dumps(e, separators=(",", ":")).encode() for e in events] + [b"[DONE]"]
    return chunked_response(
        "text/event-stream; charset=utf-8", (b"data: %s\n\n" % p for p in payloads)
    )


class Server(ChatServer):
    """Chat completions, each distinct answer rendered once."""

    route = _PATH
    render_whole = staticmethod(completion)
    render_stream = staticmethod(stream)

    def stream_options(self, request: dict[str, Any]) -> tuple[Any, ...]:
        return (bool((request.get("stream_options") or {}).get("include_usage")),)


if __name__ == "__main__":
    sys.exit(server_main(None, __doc__, Server))
