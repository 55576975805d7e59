"""A fast DashScope native-API server for `models_dashscope.py`: pre-rendered answers.

The same design as `_openai_bench_server.py` (a bare `asyncio.start_server` HTTP/1.1 handler
that renders each distinct answer once, then writes the same bytes to every request asking
for it; run in a process of its own), speaking DashScope's native format instead:

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

import argparse
import asyncio
import json
import re
import sys
from typing import Any

DEFAULT_CHUNKS = 200
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs")
REQUEST_ID = "7a9c4f2e-bench-4000-8000-000000000000"
_PATH = re.compile(rb"^(?:/n(\d+))?/api/v1/services/aigc/text-generation/generation$")


def _http(status: str, content_type: str, body: bytes, *, chunked: bool = False) -> bytes:
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
    head = (
        b"HTTP/1.1 " + status.encode() + b"\r\n"
        b"Content-Type: " + content_type.encode() + b"\r\n"
        b"Connection: keep-alive\r\n" + framing + b"\r\n\r\n"
    )
    return head + body


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
        message["content"] = " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."
    choice = {"finish_reason": "tool_calls" if tool else "stop", "message": message}
    body = {"output": {"choices": [choice]}, "usage": _usage(60), "request_id": REQUEST_ID}
    return _http("200 OK", "application/json", json.dumps(body).encode())


def stream(chunks: int, *, incremental: bool) -> bytes:
    """A streamed answer of `chunks` events, framed one event per HTTP chunk."""
    framed = []
    text = ""
    for number in range(1, chunks + 2):
        last = number == chunks + 1
        piece = "" if last else " " + WORDS[(number - 1) % len(WORDS)]
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
        event = f"id:{number}\nevent:result\n:HTTP_STATUS/200\ndata:{data}\n\n".encode()
        framed.append(b"%x\r\n%s\r\n" % (len(event), event))
    framed.append(b"0\r\n\r\n")
    return _http("200 OK", "text/event-stream;charset=UTF-8", b"".join(framed), chunked=True)


class Server:
    """Answers from a cache of rendered responses, keyed on what selects the answer."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[Any, ...], bytes] = {}

    def answer(self, path: bytes, streamed: bool, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            error = {"code": "NotFound", "message": f"no route {path!r}"}
            return _http("404 Not Found", "application/json", json.dumps(error).encode())
        parameters = json.loads(body or b"{}").get("parameters") or {}
        incremental = parameters.get("incremental_output") is True
        chunks = int(match.group(1) or DEFAULT_CHUNKS)
        key = (streamed, incremental, chunks, bool(parameters.get("tools")))
        rendered = self._rendered.get(key)
        if rendered is None:
            if streamed:
                rendered = stream(chunks, incremental=incremental)
            else:
                rendered = completion(tool=bool(parameters.get("tools")))
            self._rendered[key] = rendered
        return rendered

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *header_lines = head[:-4].split(b"\r\n")
                _, path, _ = request_line.split(b" ", 2)
                length, close, streamed = 0, False, False
                for line in header_lines:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"connection":
                        close = value.strip().lower() == b"close"
                    elif name == b"x-dashscope-sse":
                        streamed = value.strip().lower() == b"enable"
                body = await reader.readexactly(length) if length else b""
                writer.write(self.answer(path, streamed, body))
                await writer.drain()
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


async def serve(port: int) -> None:
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=2048)
    bound = listener.sockets[0].getsockname()[1]
    print(f"PORT {bound}", flush=True)
    loop = asyncio.get_running_loop()
    async with listener:
        # Serve until the parent closes our standard input (or dies).
        await loop.run_in_executor(None, sys.stdin.buffer.read)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
