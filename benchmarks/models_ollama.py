"""Ollama chat: parley's `OllamaChatModel` beside the raw `ollama` SDK, interleaved.

Against a local server speaking Ollama's `/api/chat` (this file run with `--serve`, in a
process of its own, so that its CPU never shares the client's event loop), parley and the
SDK's `AsyncClient.chat` take turns, round by round, as `models.py` measures OpenAI:

1. a non-streaming call, and a non-streaming tool-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream (NDJSON, one line per HTTP chunk, as
   Ollama's server flushes them), and whether parley's time is linear in the length.

Each contender's answers are checked before anything is timed. The helpers (rounds, figures,
the table) are `_chat_bench.py`'s and `_harness.py`'s.

Run: `python benchmarks/models_ollama.py [--quick]`.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import _chat_bench as bench
from _harness import TEXT, ChatServer, Figure, chunked_response, http, word

MODEL = "qwen3"
CREATED = "2025-10-26T17:15:24.097767Z"
_PATH = re.compile(rb"^(?:/n(\d+))?/api/chat$")


# -- the server (this file with --serve) ----------------------------------------------------


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
        function = {"index": 0, "name": "get_weather", "arguments": bench.TOOL_ARGUMENTS}
        message["tool_calls"] = [{"id": "call_bench01", "function": function}]
    else:
        message["content"] = TEXT
    body = {"model": model, "created_at": CREATED, "message": message, **_end(60)}
    return http("200 OK", "application/json; charset=utf-8", json.dumps(body).encode())


def streamed(model: str, chunks: int) -> bytes:
    """A streamed answer of `chunks` lines of content, one line per HTTP chunk, then the end."""
    head = {"model": model, "created_at": CREATED}
    lines = [
        {**head, "message": {"role": "assistant", "content": word(i)}} | {"done": False}
        for i in range(chunks)
    ]
    lines.append({**head, "message": {"role": "assistant", "content": ""}, **_end(chunks)})
    framed = (json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)
    return chunked_response("application/x-ndjson", framed)


class Server(ChatServer):
    """`/api/chat` answers, each distinct one rendered once."""

    route = _PATH
    render_whole = staticmethod(whole)
    render_stream = staticmethod(streamed)

    def streams(self, request: dict[str, Any]) -> bool:
        return request.get("stream", True) is not False  # Ollama streams unless told not to


# -- contenders -----------------------------------------------------------------------------


class ParleyContender(bench.ParleyChat):
    """parley's `OllamaChatModel`, one per scenario URL, fed prepared `Msg`s."""

    def connect(self, url: str) -> Any:
        from parley.providers.ollama import OllamaChatModel, OllamaCredential  # noqa: PLC0415

        return OllamaChatModel(OllamaCredential(host=url), MODEL)


class RawSDKContender(bench.PerScenario):
    """The `ollama` SDK's `AsyncClient`, one per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: bench.URL) -> None:
        super().__init__(url)
        self.messages = bench.dict_messages()

    def connect(self, url: str) -> Any:
        from ollama import AsyncClient  # noqa: PLC0415

        return AsyncClient(host=url)

    async def call(self) -> str:
        response = await self.client().chat(model=MODEL, messages=self.messages)
        return str(response.message.content)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.client().chat(model=MODEL, messages=self.messages, tools=[bench.TOOL])
        # The SDK hands the arguments over parsed already.
        return dict(response.message.tool_calls[0].function.arguments)

    async def stream(self, chunks: int) -> str:
        stream = await self.client(chunks).chat(model=MODEL, messages=self.messages, stream=True)
        return "".join([part.message.content async for part in stream if part.message.content])


# -- figures --------------------------------------------------------------------------------


async def provider_figures(settings: bench.Settings) -> list[Figure]:
    """The Ollama figures, against a server this function starts and stops."""
    return await bench.served_figures(__file__, ParleyContender, RawSDKContender, settings)


if __name__ == "__main__":
    sys.exit(bench.main(__file__, __doc__, Server, provider_figures))
