"""The Gemini chat model: parley's `GeminiChatModel` beside the raw `google-genai` SDK.

Against a local server that speaks the Gemini API's wire format (this file, run with
`--serve`, in a process of its own so that its CPU never shares the client's event loop),
parley and the SDK's `client.aio.models.generate_content[_stream]` take turns, round by
round, as in `models.py` (whose helpers this reuses):

1. a non-streaming call, and a non-streaming function-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream (`:streamGenerateContent?alt=sse`), and
   whether parley's time is linear in the stream's length.

The raw SDK runs as installed: on this machine its async transport is aiohttp when aiohttp is
importable (its default), httpx2 otherwise; parley gives the SDK an httpx2 client.

Run: `python benchmarks/models_gemini.py [--quick]`.
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
from pathlib import Path
from typing import Any

from _openai_bench_server import Server as _OpenAIServer
from _openai_bench_server import _http
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

HERE = Path(__file__).resolve().parent
MODEL = "gemini-2.5-flash"
_PATH = re.compile(rb"^(?:/n(\d+))?/v1/models/([^/:]+):(generateContent|streamGenerateContent)$")
_USAGE = {"promptTokenCount": 42, "totalTokenCount": 42}


# -- the server ----------------------------------------------------------------------------


def _response(model: str, parts: list[dict[str, Any]], *, last: bool, output: int = 0) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    usage = dict(_USAGE)
    if last:
        candidate["finishReason"] = "STOP"
        usage = {**usage, "candidatesTokenCount": output, "totalTokenCount": 42 + output}
    candidate["index"] = 0
    body = {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": "bench-response-0000",
    }
    return json.dumps(body, separators=(",", ":")).encode()


def whole(model: str, *, tool: bool) -> bytes:
    """A whole `GenerateContentResponse`: a 60-word text, or one function call."""
    if tool:
        parts: list[dict[str, Any]] = [
            {"functionCall": {"name": "get_weather", "args": TOOL_ARGUMENTS}}
        ]
    else:
        parts = [{"text": " ".join(WORDS[i % len(WORDS)] for i in range(60)) + "."}]
    return _http("200 OK", "application/json", _response(model, parts, last=True, output=60))


def stream(model: str, chunks: int) -> bytes:
    """`chunks` events of one word each, the last with the finish reason: one HTTP chunk each."""
    framed = []
    for i in range(chunks):
        part = [{"text": " " + WORDS[i % len(WORDS)]}]
        data = b"data: " + _response(model, part, last=i == chunks - 1, output=chunks)
        data += b"\r\n\r\n"
        framed.append(b"%x\r\n%s\r\n" % (len(data), data))
    framed.append(b"0\r\n\r\n")
    return _http("200 OK", "text/event-stream", b"".join(framed), chunked=True)


class GeminiBenchServer(_OpenAIServer):
    """The OpenAI bench server's loop (kept-alive connections, rendered once), Gemini's answers."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            error = json.dumps({"error": {"code": 404, "message": f"no route {path!r}"}})
            return _http("404 Not Found", "application/json", error.encode())
        chunks = int(match.group(1) or 200)
        model = match.group(2).decode()
        streamed = match.group(3) == b"streamGenerateContent"
        tool = b'"functionDeclarations"' in body
        key = (model, streamed, chunks, tool)
        rendered = self._rendered.get(key)
        if rendered is None:
            rendered = stream(model, chunks) if streamed else whole(model, tool=tool)
            self._rendered[key] = rendered
        return rendered


async def serve() -> None:
    server = GeminiBenchServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=2048)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
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
        """The base URL of a scenario (the SDK adds `v1/models/...`)."""
        prefix = f"/n{chunks}" if chunks else ""
        return f"http://127.0.0.1:{self.port}{prefix}/"


# -- the contenders ------------------------------------------------------------------------


class ParleyContender:
    """parley's `GeminiChatModel`, one per scenario URL, fed prepared `Msg`s."""

    name = "parley"

    def __init__(self, server: BenchServer) -> None:
        from parley import Msg  # noqa: PLC0415

        self._server = server
        self._models: dict[int | None, Any] = {}
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    def model(self, chunks: int | None = None) -> Any:
        from parley.providers.gemini import GeminiChatModel, GeminiCredential  # noqa: PLC0415

        model = self._models.get(chunks)
        if model is None:
            credential = GeminiCredential(api_key="x", base_url=self._server.url(chunks))  # type: ignore[arg-type]
            model = self._models[chunks] = GeminiChatModel(credential, MODEL)
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
    """`google-genai`'s `client.aio.models`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, server: BenchServer) -> None:
        from google.genai import types  # noqa: PLC0415

        self._server = server
        self._clients: dict[int | None, Any] = {}
        self.contents = [
            {"role": "user" if role == "user" else "model", "parts": [{"text": text}]}
            for role, text in CONVERSATION
        ]
        self.config = types.GenerateContentConfig(system_instruction=SYSTEM)
        function = TOOL["function"]
        declaration = types.FunctionDeclaration(
            name=function["name"],
            description=function["description"],
            parameters_json_schema=function["parameters"],
        )
        self.tool_config = types.GenerateContentConfig(
            system_instruction=SYSTEM, tools=[types.Tool(function_declarations=[declaration])]
        )

    def client(self, chunks: int | None = None) -> Any:
        from google import genai  # noqa: PLC0415

        client = self._clients.get(chunks)
        if client is None:
            options = {"base_url": self._server.url(chunks)}
            client = self._clients[chunks] = genai.Client(api_key="x", http_options=options)
        return client.aio

    async def call(self) -> str:
        response = await self.client().models.generate_content(
            model=MODEL, contents=self.contents, config=self.config
        )
        return str(response.candidates[0].content.parts[0].text)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.client().models.generate_content(
            model=MODEL, contents=self.contents, config=self.tool_config
        )
        return dict(response.candidates[0].content.parts[0].function_call.args)

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).models.generate_content_stream(
            model=MODEL, contents=self.contents, config=self.config
        )
        parts = [chunk.candidates[0].content.parts[0].text async for chunk in stream]
        return "".join(parts)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aio.aclose()


async def check(contender: Any, short: int) -> None:
    """Fail loudly if a contender's answers are not what the server sent."""
    text = await contender.call()
    arguments = await contender.tool_call()
    streamed = await contender.stream(short)
    problems = []
    if not text.startswith(" ".join(WORDS)):
        problems.append(f"call: {text[:60]!r}")
    if arguments != TOOL_ARGUMENTS:
        problems.append(f"tool call: {arguments!r}")
    if streamed != expected_text(short):
        problems.append(f"stream: {len(streamed)} characters, {streamed[:60]!r}")
    if problems:
        raise SystemExit(f"{contender.name} answered wrongly: {'; '.join(problems)}")


# -- figures -------------------------------------------------------------------------------


async def provider_figures(settings: Settings) -> list[Figure]:
    """The Gemini figures: calls, function calls, short and long streams, linearity."""
    with BenchServer() as server:
        pair = [ParleyContender(server), RawSDKContender(server)]
        try:
            for contender in pair:
                await check(contender, settings.short)
                await contender.stream(settings.long)  # warm the long scenario's connection
            return await wire_rounds(
                pair,
                settings,
                prefix="gemini: ",
                tool_call="function-call response (non-streaming)",
            )
        finally:
            for contender in pair:
                await contender.aclose()


def _versions() -> str:
    from importlib import metadata  # noqa: PLC0415

    found = []
    for name in ("parley", "google-genai", "httpx2", "aiohttp", "jiter"):
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
        import google.genai  # noqa: F401, PLC0415
    except ImportError:
        raise SystemExit(
            "models_gemini.py needs google-genai: pip install -e '.[gemini]'"
        ) from None
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {_versions()}\n")
    started = time.perf_counter()
    figures = asyncio.run(provider_figures(QUICK if args.quick else DEFAULT))
    report(figures, [], reference=PROVIDERS["gemini"])
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
