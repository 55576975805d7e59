"""Anthropic chat: parley's `AnthropicChatModel` beside the raw `anthropic` SDK, interleaved.

Against a local Messages API server (this file run with `--serve`, in a process of its own, so
that its CPU never shares the client's event loop), parley and the SDK's `AsyncAnthropic`
take turns, round by round, as `models.py` does for OpenAI (`_chat_bench.py`'s rounds):

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

import json
import re
import sys
from typing import Any

import _chat_bench as bench
from _harness import TEXT, ChatServer, Figure, chunked_response, http, word

MODEL = "claude-sonnet-5-5"
MAX_TOKENS = 1024
_PATH = re.compile(rb"^(?:/n(\d+))?/v1/messages$")
ANTHROPIC_TOOL = {
    "name": bench.TOOL["function"]["name"],
    "description": bench.TOOL["function"]["description"],
    "input_schema": bench.TOOL["function"]["parameters"],
}


# -- the server (run with --serve) ----------------------------------------------------------


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
                "input": bench.TOOL_ARGUMENTS,
            }
        ]
    else:
        content = [{"type": "text", "text": TEXT, "citations": None}]
    body = _message(model, content, "tool_use" if tool else "end_turn", 60)
    return http("200 OK", "application/json", json.dumps(body).encode())


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
                "delta": {"type": "text_delta", "text": word(i)},
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
    framed = (
        b"event: %s\ndata: %s\n\n"
        % (name.encode(), json.dumps(data, separators=(",", ":")).encode())
        for name, data in events
    )
    return chunked_response("text/event-stream; charset=utf-8", framed)


class Server(ChatServer):
    """Messages API answers, each distinct one rendered once."""

    route = _PATH
    render_whole = staticmethod(whole)
    render_stream = staticmethod(stream)


# -- contenders ------------------------------------------------------------------------------


class ParleyContender(bench.ParleyChat):
    """parley's `AnthropicChatModel`, one per scenario URL, fed prepared `Msg`s."""

    def connect(self, url: str) -> Any:
        from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential  # noqa: PLC0415

        credential = AnthropicCredential(api_key="x", base_url=url)
        return AnthropicChatModel(credential, MODEL, parameters={"max_tokens": MAX_TOKENS})


class RawSDKContender(bench.PerScenario):
    """The `anthropic` SDK's `AsyncAnthropic`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: bench.URL) -> None:
        super().__init__(url)
        self.messages = bench.dict_messages(system=False)  # the system prompt goes on its own

    def connect(self, url: str) -> Any:
        from anthropic import AsyncAnthropic  # noqa: PLC0415

        return AsyncAnthropic(api_key="x", base_url=url, max_retries=0)

    async def call(self) -> str:
        message = await self.client().messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, system=bench.SYSTEM, messages=self.messages
        )
        return "".join(block.text for block in message.content if block.type == "text")

    async def tool_call(self) -> dict[str, Any]:
        message = await self.client().messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            system=bench.SYSTEM,
            messages=self.messages,
            tools=[ANTHROPIC_TOOL],
        )
        return dict(next(b for b in message.content if b.type == "tool_use").input)

    async def stream(self, chunks: int) -> str:
        events = await self.client(chunks).messages.create(
            model=MODEL,
            max_tokens=MAX_TOKENS,
            system=bench.SYSTEM,
            messages=self.messages,
            stream=True,
        )
        parts = [
            event.delta.text
            async for event in events
            if event.type == "content_block_delta" and event.delta.type == "text_delta"
        ]
        return "".join(parts)


# -- figures ---------------------------------------------------------------------------------


async def provider_figures(settings: bench.Settings) -> list[Figure]:
    """The Anthropic rows of the table: calls, tool calls, streams and linearity."""
    return await bench.served_figures(__file__, ParleyContender, RawSDKContender, settings)


if __name__ == "__main__":
    sys.exit(bench.main(__file__, __doc__, Server, provider_figures))
