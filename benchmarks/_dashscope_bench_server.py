"""A fast DashScope native-API server for `models_dashscope.py`: pre-rendered answers.

The same design as `_openai_bench_server.py` (`_harness.RenderingServer`'s loop, which renders
each distinct answer once, then writes the same bytes to every request asking for it; run in
a process of its own), speaking DashScope's native format instead:

- `POST .../api/v1/services/aigc/text-generation/generation` not streamed, no `tools` in the
  request's `parameters`: a `result_format: "message"` answer with a 60-word text;
- not streamed, with `tools`: an answer holding one `get_weather` tool call;
- streamed (`X-DashScope-SSE: enable`): N events, one short word each (incrementally, or the
  whole text so far when `incremental_output` is not true, as DashScope does), then the event
  with `finish_reason: "stop"`; each framed as DashScope frames them (`id:`, `event:result`,
  `:HTTP_STATUS/200`, `data:`), one HTTP chunk per event. N comes from a path prefix:
  `http://HOST:PORT/n2000/api/v1` streams 2,000 chunks (`/api/v1` alone: 200).

Run: `python benchmarks/_dashscope_bench_server.py [--port 0]`. It prints `PORT <n>` once it
listens and stops when its standard input closes.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from _harness import (
    DEFAULT_CHUNKS,
    TEXT,
    RenderingServer,
    chunked_response,
    http,
    server_main,
    word,
)

REQUEST_ID = "7a9c4f2e-bench-4000-8000-000000000000"
_PATH = re.compile(rb"^(?:/n(\d+))?/api/v1/services/aigc/text-generation/generation$")


def _usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": 42,
        "output_tokens": output,
        "total_tokens": 42 + output,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def completion(*, tool: bool) -> bytes:
    """A whole answer, with text or with one tool call."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if tool:
        arguments = json.dumps({"city": "Paris", "unit": "celsius", "days": 3})
        function = {"name": "get_weather", "arguments": arguments}
        message["tool_calls"] = [
            {"index": 0, "id": "call_bench0000", "type": "function", "function": function}
        ]
    else:
        message["content"] = TEXT
    choice = {"finish_reason": "tool_calls" if tool else "stop", "message": message}
    body = {"output": {"choices": [choice]}, "usage": _usage(60), "request_id": REQUEST_ID}
    return http("200 OK", "application/json", json.dumps(body).encode())


def stream(chunks: int, *, incremental: bool) -> bytes:
    """A streamed answer of `chunks` events, framed one event per HTTP chunk."""
    events = []
    text = ""
    for number in range(1, chunks + 2):
        last = number == chunks + 1
        piece = "" if last else word(number - 1)
        text += piece
        message = {"content": piece if incremental else text, "role": "assistant"}
        body = {
            "output": {
                "choices": [{"message": message, "finish_reason": "stop" if last else "null"}]
            },
            "usage": _usage(min(number, chunks)),
            "request_id": REQUEST_ID,
        }
        data = json.dumps(body, separators=(",", ":"))
        events.append(f"id:{number}\nevent:result\n:HTTP_STATUS/200\ndata:{data}\n\n".encode())
    return chunked_response("text/event-stream;charset=UTF-8", events)


class Server(RenderingServer):
    """Text generation, each distinct answer rendered once; streamed when the request's
    `X-DashScope-SSE` header says so, as DashScope's API reads it."""

    def respond(self, path: bytes, headers: Mapping[bytes, bytes], body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            error = {"code": "NotFound", "message": f"no route {path!r}"}
            return http("404 Not Found", "application/json", json.dumps(error).encode())
        parameters = json.loads(body or b"{}").get("parameters") or {}
        incremental = parameters.get("incremental_output") is True
        chunks = int(match.group(1) or DEFAULT_CHUNKS)
        tool = bool(parameters.get("tools"))
        if headers.get(b"x-dashscope-sse", b"").lower() == b"enable":
            key = (True, incremental, chunks)
            return self.rendered(key, lambda: stream(chunks, incremental=incremental))
        return self.rendered((False, tool), lambda: completion(tool=tool))


if __name__ == "__main__":
    sys.exit(server_main(None, __doc__, Server))
