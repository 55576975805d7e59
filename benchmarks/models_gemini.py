"""The Gemini chat model: parley's `GeminiChatModel` beside the raw `google-genai` SDK.

Against a local server that speaks the Gemini API's wire format (this file, run with
`--serve`, in a process of its own so that its CPU never shares the client's event loop),
parley and the SDK's `client.aio.models.generate_content[_stream]` take turns, round by
round, as in `models.py` (with the helpers of `_chat_bench.py`):

1. a non-streaming call, and a non-streaming function-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream (`:streamGenerateContent?alt=sse`), and
   whether parley's time is linear in the stream's length.

The raw SDK runs as installed: on this machine its async transport is aiohttp when aiohttp is
importable (its default), httpx2 otherwise; parley gives the SDK an httpx2 client.

Run: `python benchmarks/models_gemini.py [--quick]`.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import _chat_bench as bench
from _harness import TEXT, Figure, RenderingServer, chunked_response, http, word

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
            {"functionCall": {"name": "get_weather", "args": bench.TOOL_ARGUMENTS}}
        ]
    else:
        parts = [{"text": TEXT}]
    return http("200 OK", "application/json", _response(model, parts, last=True, output=60))


def stream(model: str, chunks: int) -> bytes:
    """`chunks` events of one word each, the last with the finish reason: one HTTP chunk each."""
    framed = (
        b"data: %s\r\n\r\n"
        % _response(model, [{"text": word(i)}], last=i == chunks - 1, output=chunks)
        for i in range(chunks)
    )
    return chunked_response("text/event-stream", framed)


class GeminiBenchServer(RenderingServer):
    """`generateContent` and `streamGenerateContent` answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        match = _PATH.match(path.split(b"?", 1)[0])
        if match is None:
            error = json.dumps({"error": {"code": 404, "message": f"no route {path!r}"}})
            return http("404 Not Found", "application/json", error.encode())
        chunks = int(match.group(1) or 200)
        model = match.group(2).decode()
        tool = b'"functionDeclarations"' in body
        if match.group(3) == b"streamGenerateContent":
            return self.rendered((model, True, chunks), lambda: stream(model, chunks))
        return self.rendered((model, False, tool), lambda: whole(model, tool=tool))


# -- the contenders ------------------------------------------------------------------------


class ParleyContender(bench.ParleyChat):
    """parley's `GeminiChatModel`, one per scenario URL, fed prepared `Msg`s."""

    def connect(self, url: str) -> Any:
        from parley.providers.gemini import GeminiChatModel, GeminiCredential  # noqa: PLC0415

        return GeminiChatModel(GeminiCredential(api_key="x", base_url=url), MODEL)  # type: ignore[arg-type]


class RawSDKContender(bench.PerScenario):
    """`google-genai`'s `client.aio.models`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: bench.URL) -> None:
        from google.genai import types  # noqa: PLC0415

        super().__init__(url)
        self.contents = [
            {"role": "user" if role == "user" else "model", "parts": [{"text": text}]}
            for role, text in bench.CONVERSATION
        ]
        self.config = types.GenerateContentConfig(system_instruction=bench.SYSTEM)
        function = bench.TOOL["function"]
        declaration = types.FunctionDeclaration(
            name=function["name"],
            description=function["description"],
            parameters_json_schema=function["parameters"],
        )
        self.tool_config = types.GenerateContentConfig(
            system_instruction=bench.SYSTEM, tools=[types.Tool(function_declarations=[declaration])]
        )

    def connect(self, url: str) -> Any:
        from google import genai  # noqa: PLC0415

        return genai.Client(api_key="x", http_options={"base_url": url})

    async def disconnect(self, client: Any) -> None:
        await client.aio.aclose()

    async def call(self) -> str:
        response = await self.client().aio.models.generate_content(
            model=MODEL, contents=self.contents, config=self.config
        )
        return str(response.candidates[0].content.parts[0].text)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.client().aio.models.generate_content(
            model=MODEL, contents=self.contents, config=self.tool_config
        )
        return dict(response.candidates[0].content.parts[0].function_call.args)

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).aio.models.generate_content_stream(
            model=MODEL, contents=self.contents, config=self.config
        )
        parts = [chunk.candidates[0].content.parts[0].text async for chunk in stream]
        return "".join(parts)


# -- figures -------------------------------------------------------------------------------


async def provider_figures(settings: bench.Settings) -> list[Figure]:
    """The Gemini figures: calls, function calls, short and long streams, linearity."""
    return await bench.served_figures(__file__, ParleyContender, RawSDKContender, settings)


if __name__ == "__main__":
    sys.exit(bench.main(__file__, __doc__, GeminiBenchServer, provider_figures))
