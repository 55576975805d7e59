"""Anthropic chat: parley's `AnthropicChatModel` beside the raw `anthropic` SDK, interleaved.

Against a local Messages API server (this file run with `--serve`, in a process of its own, so
that its CPU never shares the client's event loop), parley and the SDK's `AsyncAnthropic`
take turns, round by round, as `models.py` does for OpenAI:

1. a non-streaming call (a 60-word answer), and a non-streaming tool-use answer: time per call;
2. consuming a 2,000- and a 20,000-chunk stream (`messages.create(stream=True)` read event by
   event on the SDK's side), and whether parley's time is linear in the stream's length.

Each contender's answers are checked before anything is timed. The server renders each
distinct answer once and writes the same bytes to every request that asks for it, one HTTP
chunk per server-sent event, as the API sends them. `provider_figures(settings)` gives the
figures for `models.py`'s table.

Run: `python benchmarks/models_anthropic.py [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from models import (
    CONVERSATION,
    DEFAULT,
    PROVIDERS,
    QUICK,
    SYSTEM,
    TOOL,
    TOOL_ARGUMENTS,
    WORDS,
    Figure,
    Settings,
    expected_text,
    report,
    wire_rounds,
)

MODEL = "claude-sonnet-5-5"
MAX_TOKENS = 1024
DEFAULT_CHUNKS = 200
_PATH = re.compile(rb"^(?:/n(\d+))?/v1/messages$")
ANTHROPIC_TOOL = {
    "name": TOOL["function"]["name"],
    "description": TOOL["function"]["description"],
    "input_schema": TOOL["function"]["parameters"],
}


# -- the server (run with --serve) ----------------------------------------------------------


def _http(body: bytes, content_type: str, *, chunked: bool = False) -> bytes:
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type.encode()
    return head + b"\r\nConnection: keep-alive\r\n" + framing + b"\r\n\r\n" + body


def _usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": 42,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
        "service_tier": "standard",
    }


def _message(model: str, content: list[Any], stop: str | None, output: int) -> dict[str, Any]:
    return {
        "id": "msg_bench000000000000000000",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(output),
    }


def whole(model: str, *, tool: bool) -> bytes:
    """A whole message: a 60-word text, or one `get_weather` tool call."""
    if tool:
        content = [
            {
                "type": "tool_use",
                "id": "toolu_bench000000000000000",
                "name": "get_weather",
                "input": TOOL_ARGUMENTS,
            }
        ]
    else:
        text = " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."
        content = [{"type": "text", "text": text, "citations": None}]
    body = _message(model, content, "tool_use" if tool else "end_turn", 60)
    return _http(json.dumps(body).encode(), "application/json")


def stream(model: str, chunks: int) -> bytes:
    """A streamed text answer of `chunks` text deltas, one event per HTTP chunk."""
    start = {"type": "message_start", "message": _message(model, [], None, 1)}
    block = {"type": "text", "text": "", "citations": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", start),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("ping", {"type": "ping"}),
    ]
    events += [
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": " " + WORDS[i % len(WORDS)]},
            },
        )
        for i in range(chunks)
    ]
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": chunks}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    framed = []
    for name, data in events:
        payload = b"event: %s\ndata: %s\n\n" % (
            name.encode(),
            json.dumps(data, separators=(",", ":")).encode(),
        )
        framed.append(b"%x\r\n%s\r\n" % (len(payload), payload))
    framed.append(b"0\r\n\r\n")
    return _http(b"".join(framed), "text/event-stream; charset=utf-8", chunked=True)


class Server:
    """Answers from a cache of rendered responses, keyed on what selects the answer."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[Any, ...], bytes] = {}

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        request = json.loads(body or b"{}")
        model = str(request.get("model") or "")
        streamed = bool(request.get("stream"))
        chunks = int(match.group(1) or DEFAULT_CHUNKS)
        key = (model, streamed, chunks, bool(request.get("tools")))
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = stream(model, chunks) if streamed else whole(model, tool=key[3])
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
                length = 0
                for line in header_lines:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                writer.write(self.answer(path, body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


async def serve() -> None:
    listener = await asyncio.start_server(Server().handle, "127.0.0.1", 0, backlog=2048)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        # Serve until the parent closes our standard input (or dies).
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


class BenchServer(AbstractContextManager["BenchServer"]):
    """This file's server in a child process; it stops when its stdin closes."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> BenchServer:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        if not line.startswith("PORT "):
            self._process.kill()
            raise SystemExit(f"the benchmark server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()

    def url(self, chunks: int | None = None) -> str:
        """The base URL of a scenario: streams of `chunks` chunks (the default: 200)."""
        prefix = f"/n{chunks}" if chunks else ""
        return f"http://127.0.0.1:{self.port}{prefix}"


# -- contenders ------------------------------------------------------------------------------


class ParleyContender:
    """parley's `AnthropicChatModel`, one per scenario URL, fed prepared `Msg`s."""

    name = "parley"

    def __init__(self, url: Callable[[int | None], str]) -> None:
        from parley import Msg  # noqa: PLC0415
        from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential  # noqa: PLC0415

        self._url = url
        self._model_class = AnthropicChatModel
        self._credential_class = AnthropicCredential
        self._models: dict[int | None, Any] = {}
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    def model(self, chunks: int | None = None) -> Any:
        model = self._models.get(chunks)
        if model is None:
            credential = self._credential_class(api_key="x", base_url=self._url(chunks))
            parameters = {"max_tokens": MAX_TOKENS}
            model = self._model_class(credential, MODEL, parameters=parameters)
            self._models[chunks] = model
        return model

    async def call(self) -> str:
        return str((await self.model().chat(self.messages)).text)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.model().chat(self.messages, tools=[TOOL])
        return dict(response.tool_calls[0].input)

    async def stream(self, chunks: int) -> str:
        final = None
        async for chunk in self.model(chunks).chat_stream(self.messages):
            final = chunk
        assert final is not None
        assert final.is_last
        return str(final.text)

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()


class RawSDKContender:
    """The `anthropic` SDK's `AsyncAnthropic`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: Callable[[int | None], str]) -> None:
        from anthropic import AsyncAnthropic  # noqa: PLC0415

        self._url = url
        self._client_class = AsyncAnthropic
        self._clients: dict[int | None, Any] = {}
        self.messages = [{"role": role, "content": text} for role, text in CONVERSATION]

    def client(self, chunks: int | None = None) -> Any:
        client = self._clients.get(chunks)
        if client is None:
            client = self._client_class(api_key="x", base_url=self._url(chunks), max_retries=0)
            self._clients[chunks] = client
        return client

    async def call(self) -> str:
        message = await self.client().messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, system=SYSTEM, messages=self.messages
        )
        return "".join(block.text for block in message.content if block.type == "text")

    async def tool_call(self) -> dict[str, Any]:
        message = await self.client().messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            system=SYSTEM,
            messages=self.messages,
            tools=[ANTHROPIC_TOOL],
        )
        return dict(next(b for b in message.content if b.type == "tool_use").input)

    async def stream(self, chunks: int) -> str:
        events = await self.client(chunks).messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, system=SYSTEM, messages=self.messages, stream=True
        )
        parts = [
            event.delta.text
            async for event in events
            if event.type == "content_block_delta" and event.delta.type == "text_delta"
        ]
        return "".join(parts)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()


Contender = ParleyContender | RawSDKContender


async def check(contender: Contender, short: int) -> None:
    """Fail loudly if a contender's answers are not what the server sent."""
    problems = []
    if not (await contender.call()).startswith(" ".join(WORDS)):
        problems.append("call")
    if (arguments := await contender.tool_call()) != TOOL_ARGUMENTS:
        problems.append(f"tool call: {arguments!r}")
    if (streamed := await contender.stream(short)) != expected_text(short):
        problems.append(f"stream: {len(streamed)} characters, {streamed[:60]!r}")
    if problems:
        raise SystemExit(f"{contender.name} answered wrongly: {'; '.join(problems)}")


# -- figures ---------------------------------------------------------------------------------


async def provider_figures(settings: Settings) -> list[Figure]:
    """The Anthropic rows of the table: calls, tool calls, streams and linearity."""
    with BenchServer() as server:
        pair: list[Any] = [ParleyContender(server.url), RawSDKContender(server.url)]
        try:
            for contender in pair:
                await check(contender, settings.short)
                await contender.stream(settings.long)  # warm the long scenario's connection
            return await wire_rounds(
                pair, settings, prefix="anthropic: ", tool_call="tool-use response (non-streaming)"
            )
        finally:
            for contender in pair:
                await contender.aclose()


def _versions() -> str:
    from importlib import metadata  # noqa: PLC0415

    return ", ".join(
        f"{n} {metadata.version(n)}" for n in ("parley", "anthropic", "httpx2", "aiohttp", "jiter")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return 0
    try:
        import anthropic  # noqa: F401, PLC0415
    except ImportError:
        raise SystemExit(
            "models_anthropic.py needs the SDK: pip install -e '.[anthropic]'"
        ) from None
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {_versions()}\n")
    started = time.perf_counter()
    figures = asyncio.run(provider_figures(QUICK if args.quick else DEFAULT))
    report(figures, [], reference=PROVIDERS["anthropic"])
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
