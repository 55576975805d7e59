"""A fast OpenAI-compatible server for `models.py`: pre-rendered answers, kept-alive connections.

The wire-format test server (`parley.providers.openai.server`) serves one thread per
connection and renders every answer afresh: right for tests, too slow to keep out of a
benchmark's way. This one is a bare `asyncio.start_server` HTTP/1.1 handler that renders each
distinct answer once and then writes the same bytes, in one write, to every request that asks
for it. `models.py` runs it in a process of its own, so that its CPU never shares the client's
event loop.

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

import argparse
import asyncio
import json
import re
import sys
from typing import Any

DEFAULT_CHUNKS = 200
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs")
MODEL_ID = "chatcmpl-bench0000000000000000000000"
CREATED = 1_700_000_000
_PATH = re.compile(rb"^(?:/n(\d+))?/v1/chat/completions$")


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
        message["content"] = " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."
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
    return _http("200 OK", "application/json", json.dumps(body).encode())


def stream(model: str, chunks: int, *, include_usage: bool) -> bytes:
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
    events += [event({"content": " " + WORDS[i % len(WORDS)]}) for i in range(chunks)]
    events.append(event({}, "stop"))
    if include_usage:
        events.append({**base, "choices": [], "usage": _usage(chunks)})
    payloads = [json.dumps(e, separators=(",", ":")).encode() for e in events] + [b"[DONE]"]
    framed = []
    for payload in payloads:
        data = b"data: " + payload + b"\n\n"
        framed.append(b"%x\r\n%s\r\n" % (len(data), data))
    framed.append(b"0\r\n\r\n")
    return _http("200 OK", "text/event-stream; charset=utf-8", b"".join(framed), chunked=True)


class Server:
    """Answers from a cache of rendered responses, keyed on what selects the answer."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[Any, ...], bytes] = {}
        self.requests = 0

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            error = json.dumps({"error": {"message": f"no route {path!r}"}}).encode()
            return _http("404 Not Found", "application/json", error)
        request = json.loads(body or b"{}")
        model = str(request.get("model") or "")
        streamed = bool(request.get("stream"))
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        chunks = int(match.group(1) or DEFAULT_CHUNKS)
        key = (model, streamed, include_usage, chunks, bool(request.get("tools")))
        rendered = self._rendered.get(key)
        if rendered is None:
            if streamed:
                rendered = stream(model, chunks, include_usage=include_usage)
            else:
                rendered = completion(model, tool=bool(request.get("tools")))
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
                length, close = 0, False
                for line in header_lines:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"connection":
                        close = value.strip().lower() == b"close"
                body = await reader.readexactly(length) if length else b""
                self.requests += 1
                writer.write(self.answer(path, body))
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
