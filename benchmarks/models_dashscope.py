"""DashScope: parley's `DashScopeChatModel` beside the raw `dashscope` SDK, interleaved.

Against a local DashScope native-API server (`_dashscope_bench_server.py`, in a process of
its own, as `models.py` runs its OpenAI one), parley and the SDK take turns, round by round
(`models.interleaved`), on the same conversation:

1. a non-streaming call, and a non-streaming tool-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream, and whether parley's time is linear in the
   stream's length.

The reference is the SDK's 2.0 client (`dashscope.AsyncClient(...).chat.completions.create`,
native protocol, as it comes: on httpx), which parley builds on; the same figures are given
against the SDK's 1.x call (`dashscope.AioGeneration.call(..., base_address=...)`, aiohttp
underneath), and against the 2.0 client given the HTTP client parley gives it (httpx's
interface on aiohttp's connections), which isolates what parley's own reading saves. Each
contender's answers are checked before anything is timed. The helpers (rounds, figures,
ratios, the table) are `models.py`'s.

Run: `python benchmarks/models_dashscope.py [--quick]`; `provider_figures(settings)` gives the
figures to a caller that prints them with the other providers'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from models import (  # noqa: E402  (the shared helpers, beside this file)
    CONVERSATION,
    DEFAULT,
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

SERVER_SCRIPT = HERE / "_dashscope_bench_server.py"
MODEL = "qwen-plus"
URL = Callable[[int | None], str]


class DashScopeBenchServer(AbstractContextManager["DashScopeBenchServer"]):
    """`_dashscope_bench_server.py` in a child process; it stops when its stdin closes."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> DashScopeBenchServer:
        self._process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
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
        """The native API's base URL of a scenario: streams of `chunks` chunks (default 200)."""
        prefix = f"/n{chunks}" if chunks else ""
        return f"http://127.0.0.1:{self.port}{prefix}/api/v1"


def _dict_messages() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}] + [
        {"role": role, "content": text} for role, text in CONVERSATION
    ]


class ParleyContender:
    """parley's `DashScopeChatModel`, one per scenario URL, fed prepared `Msg`s."""

    name = "parley"

    def __init__(self, url: URL) -> None:
        from parley import Msg  # noqa: PLC0415
        from parley.providers.dashscope import (  # noqa: PLC0415
            DashScopeChatModel,
            DashScopeCredential,
        )

        self._url = url
        self._model_class = DashScopeChatModel
        self._credential_class = DashScopeCredential
        self._models: dict[int | None, Any] = {}
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    def model(self, chunks: int | None = None) -> Any:
        model = self._models.get(chunks)
        if model is None:
            credential = self._credential_class(api_key="x", base_url=self._url(chunks))
            model = self._model_class(credential, MODEL)
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


class ClientContender:
    """The SDK's 2.0 `AsyncClient` (native protocol), one per scenario URL, fed dicts."""

    name = "raw SDK"

    def __init__(self, url: URL) -> None:
        import dashscope  # noqa: PLC0415

        self._url = url
        self._client_class = dashscope.AsyncClient
        self._clients: dict[int | None, Any] = {}
        self._http: list[Any] = []
        self.messages = _dict_messages()

    def client(self, chunks: int | None = None) -> Any:
        client = self._clients.get(chunks)
        if client is None:
            client = self._client_class(api_key="x", base_url=self._url(chunks), max_retries=0)
            self._clients[chunks] = client
        return client

    async def call(self) -> str:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages
        )
        return str(completion.output_text)

    async def tool_call(self) -> dict[str, Any]:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages, tools=[TOOL]
        )
        call = completion.choices[0].message.tool_calls[0]
        return dict(json.loads(call.function.arguments))

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).chat.completions.create(
            model=MODEL, messages=self.messages, stream=True
        )
        return "".join([text async for text in stream.text_stream])

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


class AiohttpClientContender(ClientContender):
    """The 2.0 client on the HTTP client parley gives it (httpx's interface, aiohttp's
    connections): the SDK's own per-chunk work, on parley's transport."""

    def client(self, chunks: int | None = None) -> Any:
        client = self._clients.get(chunks)
        if client is None:
            from httpx_aiohttp import HttpxAiohttpClient  # noqa: PLC0415

            http = HttpxAiohttpClient(headers={"Authorization": "Bearer x"})
            self._http.append(http)
            client = self._client_class(
                api_key="x", base_url=self._url(chunks), max_retries=0, http_client=http
            )
            self._clients[chunks] = client
        return client

    async def aclose(self) -> None:
        await super().aclose()
        for http in self._http:
            await http.aclose()


class AioGenerationContender:
    """The SDK's 1.x `AioGeneration.call`, pointed at each scenario with `base_address=`."""

    name = "raw SDK"

    def __init__(self, url: URL) -> None:
        import dashscope  # noqa: PLC0415

        self._url = url
        self._sdk = dashscope
        self.messages = _dict_messages()

    def _options(self, chunks: int | None = None) -> dict[str, Any]:
        return {
            "model": MODEL,
            "messages": self.messages,
            "api_key": "x",
            "base_address": self._url(chunks),
            "result_format": "message",
        }

    async def call(self) -> str:
        response = await self._sdk.AioGeneration.call(**self._options())
        return str(response.output.choices[0].message.content)

    async def tool_call(self) -> dict[str, Any]:
        response = await self._sdk.AioGeneration.call(**self._options(), tools=[TOOL])
        call = response.output.choices[0].message.tool_calls[0]
        return dict(json.loads(call["function"]["arguments"]))

    async def stream(self, chunks: int) -> str:
        responses = await self._sdk.AioGeneration.call(
            **self._options(chunks), stream=True, incremental_output=True
        )
        return "".join([r.output.choices[0].message.content async for r in responses])

    async def aclose(self) -> None:
        await self._sdk.close_shared_aio_session()


async def check(contender: WireContender, short: int) -> None:
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


async def _pair_figures(
    server: DashScopeBenchServer, settings: Settings, reference: type[Any], suffix: str
) -> list[Figure]:
    pair: list[WireContender] = [ParleyContender(server.url), reference(server.url)]
    try:
        for contender in pair:
            await check(contender, settings.short)
            await contender.stream(settings.long)  # warm the long scenario's connection
        return await wire_rounds(pair, settings, suffix=suffix, tool_call="tool-call response")
    finally:
        for contender in pair:
            await contender.aclose()


DASHSCOPE_REFERENCES = (
    "dashscope.AsyncClient (2.0, native protocol, on httpx); [vs 1.x]: "
    "dashscope.AioGeneration.call; [vs 2.0 on aiohttp]: the 2.0 client on "
    "httpx_aiohttp.HttpxAiohttpClient, parley's transport"
)


async def provider_figures(settings: Settings) -> list[Figure]:
    """parley against the SDK's 2.0 client, its 1.x `AioGeneration.call`, and the 2.0 client
    on parley's HTTP client."""
    with DashScopeBenchServer() as server:
        figures = await _pair_figures(server, settings, ClientContender, "")
        figures += await _pair_figures(server, settings, AioGenerationContender, " [vs 1.x]")
        figures += await _pair_figures(
            server, settings, AiohttpClientContender, " [vs 2.0 on aiohttp]"
        )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else DEFAULT
    from importlib import metadata  # noqa: PLC0415

    versions = ", ".join(f"{n} {metadata.version(n)}" for n in ("dashscope", "httpx", "aiohttp"))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {versions}\n")
    started = time.perf_counter()
    figures = asyncio.run(provider_figures(settings))
    report(figures, [], reference=DASHSCOPE_REFERENCES)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
