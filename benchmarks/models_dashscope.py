"""DashScope: parley's `DashScopeChatModel` beside the raw `dashscope` SDK, interleaved.

Against a local DashScope native-API server (`_dashscope_bench_server.py`, in a process of
its own, as `models.py` runs its OpenAI one), parley and the SDK take turns, round by round
(`_harness.interleaved`), on the same conversation:

1. a non-streaming call, and a non-streaming tool-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream, and whether parley's time is linear in the
   stream's length.

The reference is the SDK's 2.0 client (`dashscope.AsyncClient(...).chat.completions.create`,
native protocol, as it comes: on httpx), which parley builds on; the same figures are given
against the SDK's 1.x call (`dashscope.AioGeneration.call(..., base_address=...)`, aiohttp
underneath), and against the 2.0 client given the HTTP client parley gives it (httpx's
interface on aiohttp's connections), which isolates what parley's own reading saves. Each
contender's answers are checked before anything is timed. The helpers (rounds, figures,
ratios, the table) are `_chat_bench.py`'s and `_harness.py`'s.

Run: `python benchmarks/models_dashscope.py [--quick]`; `provider_figures(settings)` gives the
figures to a caller that prints them with the other providers'.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import _chat_bench as bench
from _harness import Figure, ServerProcess

SERVER_SCRIPT = Path(__file__).resolve().parent / "_dashscope_bench_server.py"
MODEL = "qwen-plus"


class ParleyContender(bench.ParleyChat):
    """parley's `DashScopeChatModel`, one per scenario URL, fed prepared `Msg`s."""

    def connect(self, url: str) -> Any:
        from parley.providers.dashscope import (  # noqa: PLC0415
            DashScopeChatModel,
            DashScopeCredential,
        )

        return DashScopeChatModel(DashScopeCredential(api_key="x", base_url=url), MODEL)


class ClientContender(bench.PerScenario):
    """The SDK's 2.0 `AsyncClient` (native protocol), one per scenario URL, fed dicts."""

    name = "raw SDK"

    def __init__(self, url: bench.URL) -> None:
        super().__init__(url)
        self.messages = bench.dict_messages()

    def connect(self, url: str) -> Any:
        import dashscope  # noqa: PLC0415

        return dashscope.AsyncClient(api_key="x", base_url=url, max_retries=0)

    async def disconnect(self, client: Any) -> None:
        await client.aclose()

    async def call(self) -> str:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages
        )
        return str(completion.output_text)

    async def tool_call(self) -> dict[str, Any]:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages, tools=[bench.TOOL]
        )
        call = completion.choices[0].message.tool_calls[0]
        return dict(json.loads(call.function.arguments))

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).chat.completions.create(
            model=MODEL, messages=self.messages, stream=True
        )
        return "".join([text async for text in stream.text_stream])


class AiohttpClientContender(ClientContender):
    """The 2.0 client on the HTTP client parley gives it (httpx's interface, aiohttp's
    connections): the SDK's own per-chunk work, on parley's transport."""

    def __init__(self, url: bench.URL) -> None:
        super().__init__(url)
        self._http: list[Any] = []

    def connect(self, url: str) -> Any:
        import dashscope  # noqa: PLC0415
        from httpx_aiohttp import HttpxAiohttpClient  # noqa: PLC0415

        http = HttpxAiohttpClient(headers={"Authorization": "Bearer x"})
        self._http.append(http)
        return dashscope.AsyncClient(api_key="x", base_url=url, max_retries=0, http_client=http)

    async def aclose(self) -> None:
        await super().aclose()
        for http in self._http:
            await http.aclose()


class AioGenerationContender:
    """The SDK's 1.x `AioGeneration.call`, pointed at each scenario with `base_address=`."""

    name = "raw SDK"

    def __init__(self, url: bench.URL) -> None:
        import dashscope  # noqa: PLC0415

        self._url = url
        self._sdk = dashscope
        self.messages = bench.dict_messages()

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
        response = await self._sdk.AioGeneration.call(**self._options(), tools=[bench.TOOL])
        call = response.output.choices[0].message.tool_calls[0]
        return dict(json.loads(call["function"]["arguments"]))

    async def stream(self, chunks: int) -> str:
        responses = await self._sdk.AioGeneration.call(
            **self._options(chunks), stream=True, incremental_output=True
        )
        return "".join([r.output.choices[0].message.content async for r in responses])

    async def aclose(self) -> None:
        await self._sdk.close_shared_aio_session()


DASHSCOPE_REFERENCES = (
    "dashscope.AsyncClient (2.0, native protocol, on httpx); [vs 1.x]: "
    "dashscope.AioGeneration.call; [vs 2.0 on aiohttp]: the 2.0 client on "
    "httpx_aiohttp.HttpxAiohttpClient, parley's transport"
)


async def provider_figures(settings: bench.Settings) -> list[Figure]:
    """parley against the SDK's 2.0 client, its 1.x `AioGeneration.call`, and the 2.0 client
    on parley's HTTP client."""
    references = (
        (ClientContender, ""),
        (AioGenerationContender, " [vs 1.x]"),
        (AiohttpClientContender, " [vs 2.0 on aiohttp]"),
    )
    figures: list[Figure] = []
    with ServerProcess(SERVER_SCRIPT, path="/api/v1") as server:
        for reference, suffix in references:
            pair = [ParleyContender(server.url), reference(server.url)]
            figures += await bench.pair_figures(
                pair, settings, suffix=suffix, tool_call="tool-call response"
            )
    return figures


if __name__ == "__main__":
    sys.exit(bench.main(__file__, __doc__, None, provider_figures, DASHSCOPE_REFERENCES))
