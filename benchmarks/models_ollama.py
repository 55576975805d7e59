"""Ollama chat: parley's `OllamaChatModel` beside the raw `ollama` SDK, interleaved.

Against a local server speaking Ollama's `/api/chat` (this file run with `--serve`, in a
process of its own, so that its CPU never shares the client's event loop), parley and the
SDK's `AsyncClient.chat` take turns, round by round, as `models.py` measures OpenAI:

1. a non-streaming call, and a non-streaming tool-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream (NDJSON, one line per HTTP chunk, as
   Ollama's server flushes them), and whether parley's time is linear in the length.

Each contender's answers are checked before anything is timed. The helpers (rounds, figures,
the table) are `models.py`'s.

Run: `python benchmarks/models_ollama.py [--quick]`.
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
from collections.abc import Sequence
from contextlib import AbstractContextManager
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
    WireContender,
    expected_text,
    report,
    wire_rounds,
)

MODEL = "qwen3"
CREATED = "2025-10-26T17:15:24.097767Z"
DEFAULT_CHUNKS = 200
_PATH = re.compile(rb"^(?:/n(\d+))?/api/chat$")


# -- the server (this file with --serve) ----------------------------------------------------


def _http(content_type: bytes, body: bytes, *, chunked: bool = False) -> bytes:
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % len(body)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\n"
    return head + b"Connection: keep-alive\r\n" + framing + b"\r\n\r\n" + body


def _end(output: int) -> dict[str, Any]:
    return {
        "done": True,
        "done_reason": "stop",
        "total_duration": 174_560_334,
        "load_duration": 101_397_084,
        "prompt_eval_count": 42,
        "prompt_eval_duration": 13_074_791,
        "eval_count": output,
        "eval_duration": 52_479_709,
    }


def whole(model: str, *, tool: bool) -> bytes:
    """A whole `/api/chat` answer, with text or with one tool call."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if tool:
        function = {"index": 0, "name": "get_weather", "arguments": TOOL_ARGUMENTS}
        message["tool_calls"] = [{"id": "call_bench01", "function": function}]
    else:
        message["content"] = " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."
    body = {"model": model, "created_at": CREATED, "message": message, **_end(60)}
    return _http(b"application/json; charset=utf-8", json.dumps(body).encode())


def streamed(model: str, chunks: int) -> bytes:
    """A streamed answer of `chunks` lines of content, one line per HTTP chunk, then the end."""
    head = {"model": model, "created_at": CREATED}
    lines = [
        {**head, "message": {"role": "assistant", "content": " " + WORDS[i % len(WORDS)]}}
        | {"done": False}
        for i in range(chunks)
    ]
    lines.append({**head, "message": {"role": "assistant", "content": ""}, **_end(chunks)})
    framed = []
    for line in lines:
        data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
        framed.append(b"%x\r\n%s\r\n" % (len(data), data))
    framed.append(b"0\r\n\r\n")
    return _http(b"application/x-ndjson", b"".join(framed), chunked=True)


class BenchHandler:
    """Answers from a cache of rendered responses, keyed on what selects the answer."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[Any, ...], bytes] = {}

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        request = json.loads(body or b"{}")
        model = str(request.get("model") or "")
        stream = request.get("stream", True) is not False
        chunks = int(match.group(1) or DEFAULT_CHUNKS)
        key = (model, stream, chunks, bool(request.get("tools")))
        rendered = self._rendered.get(key)
        if rendered is None:
            tool = bool(request.get("tools"))
            rendered = streamed(model, chunks) if stream else whole(model, tool=tool)
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
    listener = await asyncio.start_server(BenchHandler().handle, "127.0.0.1", 0, backlog=2048)
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
        command = [sys.executable, __file__, "--serve"]
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
        """The host of a scenario: streams of `chunks` lines (the default: 200)."""
        return f"http://127.0.0.1:{self.port}" + (f"/n{chunks}" if chunks else "")


# -- contenders -----------------------------------------------------------------------------


class ParleyContender:
    """parley's `OllamaChatModel`, one per scenario URL, fed prepared `Msg`s."""

    name = "parley"

    def __init__(self, server: BenchServer) -> None:
        from parley import Msg  # noqa: PLC0415
        from parley.providers.ollama import OllamaChatModel, OllamaCredential  # noqa: PLC0415

        self._server = server
        self._model_class = OllamaChatModel
        self._credential_class = OllamaCredential
        self._models: dict[int | None, Any] = {}
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    def model(self, chunks: int | None = None) -> Any:
        model = self._models.get(chunks)
        if model is None:
            credential = self._credential_class(host=self._server.url(chunks))
            model = self._models[chunks] = self._model_class(credential, MODEL)
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
    """The `ollama` SDK's `AsyncClient`, one per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, server: BenchServer) -> None:
        from ollama import AsyncClient  # noqa: PLC0415

        self._server = server
        self._client_class = AsyncClient
        self._clients: dict[int | None, Any] = {}
        self.messages = [{"role": "system", "content": SYSTEM}] + [
            {"role": role, "content": text} for role, text in CONVERSATION
        ]

    def client(self, chunks: int | None = None) -> Any:
        client = self._clients.get(chunks)
        if client is None:
            client = self._clients[chunks] = self._client_class(host=self._server.url(chunks))
        return client

    async def call(self) -> str:
        response = await self.client().chat(model=MODEL, messages=self.messages)
        return str(response.message.content)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.client().chat(model=MODEL, messages=self.messages, tools=[TOOL])
        # The SDK hands the arguments over parsed already.
        return dict(response.message.tool_calls[0].function.arguments)

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).chat(model=MODEL, messages=self.messages, stream=True)
        return "".join([part.message.content async for part in stream if part.message.content])

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()


async def check(contender: WireContender, short: int) -> None:
    """Fail loudly if a contender's answers are not what the server sent."""
    text = await contender.call()
    arguments = await contender.tool_call()
    streamed_text = await contender.stream(short)
    problems = []
    if not text.startswith(" ".join(WORDS)):
        problems.append(f"call: {text[:60]!r}")
    if arguments != TOOL_ARGUMENTS:
        problems.append(f"tool call: {arguments!r}")
    if streamed_text != expected_text(short):
        problems.append(f"stream: {len(streamed_text)} characters, {streamed_text[:60]!r}")
    if problems:
        raise SystemExit(f"{contender.name} answered wrongly: {'; '.join(problems)}")


# -- figures --------------------------------------------------------------------------------


async def provider_figures(settings: Settings) -> list[Figure]:
    """The Ollama figures, against a server this function starts and stops."""
    with BenchServer() as server:
        pair: list[WireContender] = [ParleyContender(server), RawSDKContender(server)]
        try:
            for contender in pair:
                await check(contender, settings.short)
                await contender.stream(settings.long)  # warm the long scenario's connection
            return await wire_rounds(pair, settings, prefix="ollama: ")
        finally:
            for contender in pair:
                await contender.aclose()


def _versions() -> str:
    from importlib import metadata  # noqa: PLC0415

    found = []
    for name in ("parley", "ollama", "httpx", "aiohttp", "pydantic_core"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return 0
    try:
        import ollama  # noqa: F401, PLC0415
    except ImportError:
        raise SystemExit(
            "models_ollama.py needs the ollama SDK: pip install -e '.[ollama]'"
        ) from None
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {_versions()}\n")
    started = time.perf_counter()
    figures = asyncio.run(provider_figures(QUICK if args.quick else DEFAULT))
    # `report` is models.py's, whose footer names its own references: this file's is below.
    report(figures, [], reference=PROVIDERS["ollama"])
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
