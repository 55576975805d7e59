"""`AnthropicChatModel` through the real `anthropic` SDK against the local wire-format server."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parley import Msg
from parley.errors import (
    ConfigurationError,
    ContentFilterError,
    ContextLengthError,
    MissingDependencyError,
    ModelConnectionError,
    ModelHTTPError,
    ModelOutputError,
    ModelTimeoutError,
    RateLimitError,
    UserError,
)
from parley.messages import FileBlock, ImageBlock, ThinkingBlock
from parley.models import ChatStream
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
from parley.providers.anthropic.server import (
    AnthropicServer,
    HTTPError,
    Raw,
    Redacted,
    Reply,
    Reset,
    ServerBlock,
    Text,
    Thinking,
    ToolUse,
)
from tests.models.loop_exit import ENDINGS, run_without_closing

pytest_plugins = ["tests.models.anthropic_fixtures"]

ModelFactory = Callable[..., Any]
"""The `make_model` fixture (see `anthropic_fixtures`)."""

HI = [Msg.user("Hi")]
TOOLS: list[dict[str, Any]] = [
    {"name": "weather", "description": "Weather.", "parameters": {"type": "object"}},
    {"name": "time", "description": "Time.", "parameters": {"type": "object"}},
]
NO_DEFAULT_THINKING = "claude-opus-4-8"
"""A model that does not think unless asked (its card gives `thinking` no default)."""


async def read_into(seen: list[str], stream: ChatStream) -> None:
    """Read `stream`, keeping each chunk's text in `seen` (those before a failure count)."""
    async for chunk in stream:
        seen.append(chunk.text)  # noqa: PERF401  (a comprehension would lose them on failure)


# -- answers --------------------------------------------------------------------------------


async def test_whole_answer_with_usage(server: AnthropicServer, make_model: ModelFactory) -> None:
    server.add(
        Reply(
            text="Hello!",
            input_tokens=12,
            cache_creation_tokens=5,
            cache_read_tokens=30,
            output_tokens=3,
            response_id="msg_1",
        )
    )
    response = await make_model().chat([Msg.system("Be brief."), Msg.user("Hi"), Msg.user("there")])
    assert response.text == "Hello!"
    assert response.is_last
    assert response.finish_reason == "stop"
    assert (response.id, response.model) == ("msg_1", "claude-sonnet-5-5")
    assert response.usage is not None
    # The whole prompt is the uncached input plus the cache writes plus the cache reads.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (47, 3)
    assert response.usage.cached_tokens == 30
    assert response.usage.elapsed > 0
    assert server.bodies() == [
        {
            "model": "claude-sonnet-5-5",
            # Required by the API: the card's output size when not given.
            "max_tokens": 128000,
            "system": [{"type": "text", "text": "Be brief."}],
            # Two user messages in a row make one turn.
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}],
                }
            ],
        }
    ]
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-ant-test"
    # The API version whose rules the parameters follow (no sampling parameters).
    assert headers["anthropic-version"] == "2026-10-21"
    server.assert_consumed()


async def test_stream_deltas_then_the_whole(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="Hello, world", chunk_size=5, input_tokens=4, output_tokens=3))
    chunks = [chunk async for chunk in make_model().chat_stream(HI)]
    assert [c.text for c in chunks[:-1]] == ["Hello", ", wor", "ld"]
    assert not any(c.is_last for c in chunks[:-1])
    final = chunks[-1]
    assert final.is_last
    assert final.text == "Hello, world"
    assert final.finish_reason == "stop"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (4, 3)
    assert server.bodies()[0]["stream"] is True


async def test_streamed_usage_combines_message_start_and_message_delta(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # `message_start` has the input side and output_tokens=1; `message_delta` only the final
    # output count. Either event alone under-reports by orders of magnitude.
    server.add(
        Reply(
            text="cached answer",
            input_tokens=2000,
            cache_creation_tokens=300,
            cache_read_tokens=5000,
            output_tokens=150,
        )
    )
    final = await make_model().chat_stream(HI).collect()
    assert final.usage is not None
    assert final.usage.input_tokens == 7300
    assert final.usage.cached_tokens == 5000
    assert final.usage.output_tokens == 150


@pytest.mark.parametrize(
    ("model", "max_tokens"),
    [("claude-haiku-4-5", 64000), ("claude-haiku-4-5-20251001", 64000), ("claude-x-9", 8192)],
)
async def test_max_tokens_defaults_from_the_card(
    server: AnthropicServer, make_model: ModelFactory, model: str, max_tokens: int
) -> None:
    server.add(Reply(text="ok"), Reply(text="ok"))
    await make_model(model).chat(HI)
    await make_model(model, parameters={"max_tokens": 100}).chat(HI)
    assert [body["max_tokens"] for body in server.bodies()] == [max_tokens, 100]


async def test_streams_and_calls_reuse_one_connection(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    model = make_model()
    await model.chat_stream(HI).collect()
    await model.chat_stream(HI).collect()
    await model.chat(HI)
    assert len({request.client_port for request in server.requests}) == 1


async def test_call_dispatches_on_stream_flag(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="streamed"))
    stream = await make_model(stream=True)(HI)
    assert isinstance(stream, ChatStream)
    assert (await stream.collect()).text == "streamed"


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_stop_reasons_map_to_finish_reasons(
    server: AnthropicServer,
    make_model: ModelFactory,
    stop_reason: str,
    finish: str,
    streamed: bool,
) -> None:
    server.add(Reply(text="partial", stop_reason=stop_reason))
    model = make_model()
    response = await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    assert response.finish_reason == finish
    assert response.text == "partial"
    # The API's own reason stays readable; `pause_turn` also marks the answer paused: the
    # turn goes on when the answer is sent back.
    paused = stop_reason == "pause_turn"
    assert response.metadata == {"stop_reason": stop_reason, **({"paused": True} if paused else {})}
    assert response.paused is paused
    assert response.to_msg().metadata.get("paused") is (True if paused else None)


# -- tools ----------------------------------------------------------------------------------


async def test_parallel_tool_calls_streamed(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    calls = [
        ToolUse("weather", {"city": "Paris"}, "toolu_a"),
        ToolUse("time", {"tz": "CET"}, "toolu_b"),
    ]
    server.add(Reply(text="Let me look.", tool_calls=calls, chunk_size=3))
    chunks = [c async for c in make_model().chat_stream(HI, tools=TOOLS)]
    final = chunks[-1]
    assert final.finish_reason == "tool_calls"
    assert final.text == "Let me look."
    assert [(c.id, c.name, c.input) for c in final.tool_calls] == [
        ("toolu_a", "weather", {"city": "Paris"}),
        ("toolu_b", "time", {"tz": "CET"}),
    ]
    pieces = [c.tool_calls[0].raw_input for c in chunks[:-1] if c.tool_calls]
    # The argument JSON arrived in pieces (`input_json_delta`), several per call.
    assert len([p for p in pieces if p]) > 4
    assert "".join(p or "" for p in pieces) == '{"city": "Paris"}{"tz": "CET"}'


async def test_broken_streamed_arguments_are_kept_raw(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(tool_calls=[ToolUse("weather", '{"city": "Par', "toolu_x")]))
    final = await make_model().chat_stream(HI, tools=TOOLS).collect()
    (call,) = final.tool_calls
    assert (call.id, call.input, call.raw_input) == ("toolu_x", {}, '{"city": "Par')


async def test_tool_calls_whole(server: AnthropicServer, make_model: ModelFactory) -> None:
    server.add(Reply(tool_calls=[ToolUse("weather", {"city": "Rome"}, "toolu_w")]))
    response = await make_model().chat(HI, tools=TOOLS)
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("toolu_w", "weather", {"city": "Rome"})
    ]
    assert response.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        ("time", {"type": "tool", "name": "time", "disable_parallel_tool_use": True}),
    ],
)
async def test_tool_choice_on_the_wire(
    server: AnthropicServer, make_model: ModelFactory, choice: str, wire: Any
) -> None:
    server.add(Reply(text="ok"))
    model = make_model(NO_DEFAULT_THINKING, parameters={"parallel_tool_calls": False})
    await model.chat(HI, TOOLS, choice)
    body = server.bodies()[0]
    assert body["tool_choice"] == wire
    assert body["tools"] == [
        {"name": "weather", "description": "Weather.", "input_schema": {"type": "object"}},
        {"name": "time", "description": "Time.", "input_schema": {"type": "object"}},
    ]
    assert "parallel_tool_calls" not in body


async def test_no_tool_fields_without_tools(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": False}).chat(HI, tool_choice="none")
    assert not {"tools", "tool_choice"} & set(server.bodies()[0])


async def test_forced_tool_choice_while_thinking_is_refused_before_any_request(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # Claude Sonnet 5.5 thinks unless told not to (its card); the API refuses a forced tool
    # choice then, so parley says so without sending the request. Its lowest setting,
    # `between_tools`, still thinks between calls and is refused a forced choice too; it
    # takes no `disabled` at all.
    with pytest.raises(UserError, match="forced tool choice"):
        await make_model().chat(HI, TOOLS, "required")
    with pytest.raises(UserError, match="forced tool choice"):
        await make_model(parameters={"thinking": "between_tools"}).chat(HI, TOOLS, "time")
    with pytest.raises(UserError, match=r"takes `thinking` in \['adaptive', 'between_tools'\]"):
        await make_model(parameters={"thinking": "disabled"}).chat(HI, TOOLS, "time")
    with pytest.raises(UserError, match="forced tool choice"):
        await make_model(NO_DEFAULT_THINKING, parameters={"thinking": "adaptive"}).chat(
            HI, TOOLS, "time"
        )
    assert server.requests == []
    # Claude Sonnet 5 thinks by default too, but may be told not to, and then takes it.
    server.add(Reply(text="ok"))
    await make_model("claude-sonnet-5", parameters={"thinking": "disabled"}).chat(HI, TOOLS, "time")
    assert server.bodies()[0]["thinking"] == {"type": "disabled"}
    assert server.bodies()[0]["tool_choice"] == {"type": "tool", "name": "time"}


# -- thinking and blocks kept raw -------------------------------------------------------------


async def test_thinking_round_trip_keeps_the_signature(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    first = Reply(
        content=[
            Thinking("The user wants weather.", signature="sig-abc"),
            ToolUse("weather", {"city": "Oslo"}, "toolu_1"),
        ]
    )
    server.add(first, Reply(text="Cold."))
    model = make_model()
    final = await model.chat_stream(HI, tools=TOOLS).collect()
    (thinking,) = final.content[:1]
    assert isinstance(thinking, ThinkingBlock)
    assert (thinking.thinking, thinking.signature) == ("The user wants weather.", "sig-abc")
    history = [*HI, final.to_msg(), Msg.tool_result("toolu_1", "-3 C", name="weather")]
    await model.chat(history, tools=TOOLS)
    assert server.bodies()[1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig-abc"},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C"}],
        },
    ]


SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "title": "Oslo weather",
            "url": "https://example.com/oslo",
            "encrypted_content": "EqQBCgIYAhIM",
            "page_age": None,
        }
    ],
}


def _server_turn(stop_reason: str | None = None) -> Reply:
    return Reply(
        stop_reason=stop_reason,
        content=[
            Thinking("Search first.", signature="sig-1"),
            Redacted("opaque-data"),
            ToolUse("web_search", {"query": "Oslo weather"}, "srvtoolu_1", kind="server_tool_use"),
            ServerBlock(SEARCH_RESULT),
            Text("It is cold."),
        ],
        chunk_size=5,
    )


SERVER_TURN_WIRE = [
    {"type": "thinking", "thinking": "Search first.", "signature": "sig-1"},
    {"type": "redacted_thinking", "data": "opaque-data"},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "Oslo weather"},
    },
    SEARCH_RESULT,
    {"type": "text", "text": "It is cold."},
]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_redacted_thinking_and_server_tool_blocks_go_back_unchanged(
    server: AnthropicServer, make_model: ModelFactory, streamed: bool
) -> None:
    web_search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    server.add(_server_turn(), Reply(text="ok"))
    model = make_model(parameters={"server_tools": [web_search]})
    response = await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    assert response.text == "It is cold."
    assert [b.type for b in response.content] == ["thinking"] * 4 + ["text"]
    assert response.thinking == "Search first."  # the kept blocks add no thinking text
    assert not response.tool_calls  # a server tool is not the caller's to run
    await model.chat([*HI, response.to_msg(), Msg.user("Thanks")])
    first, second = server.bodies()
    assert first["tools"] == [web_search]
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": SERVER_TURN_WIRE},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_paused_turn_goes_back_last_and_unchanged_to_be_continued(
    server: AnthropicServer, make_model: ModelFactory, streamed: bool
) -> None:
    server.add(_server_turn("pause_turn"), Reply(text=" Bring a coat."))
    model = make_model(parameters={"server_tools": [{"type": "web_search_20250305"}]})
    paused = await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    assert paused.paused
    assert paused.finish_reason == "stop"
    assert paused.metadata["stop_reason"] == "pause_turn"
    rest = await model.chat([*HI, paused.to_msg()])
    assert not rest.paused
    assert rest.text == " Bring a coat."
    continued = server.bodies()[1]["messages"]
    assert continued[-1] == {"role": "assistant", "content": SERVER_TURN_WIRE}


async def test_two_thinking_blocks_in_a_row_stay_apart(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(content=[Thinking("first", "sig-a"), Thinking("second", "sig-b"), Text("done")])
    )
    final = await make_model().chat_stream(HI).collect()
    blocks = [(b.thinking, b.signature) for b in final.content if isinstance(b, ThinkingBlock)]
    assert blocks == [("first", "sig-a"), ("second", "sig-b")]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_thinking_without_its_text_goes_back_with_its_signature(
    server: AnthropicServer, make_model: ModelFactory, streamed: bool
) -> None:
    # `thinking_display: omitted`: the block's text is empty, its signature is not, and the
    # API wants the block back on the next turn all the same.
    server.add(Reply(content=[Thinking("", "sig-omitted"), Text("Hi.")]), Reply(text="ok"))
    model = make_model(parameters={"thinking_display": "omitted"})
    response = await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    await model.chat([*HI, response.to_msg(), Msg.user("Again")])
    assert server.bodies()[0]["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert server.bodies()[1]["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "sig-omitted"},
        {"type": "text", "text": "Hi."},
    ]


async def test_thinking_between_tool_calls_keeps_each_signature(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # Interleaved thinking: a thinking block after a tool call is a block of its own, not
    # more of the first one (whose signature would then be wrong).
    server.add(
        Reply(
            content=[
                Thinking("First.", "sig-1"),
                ToolUse("weather", {"city": "Oslo"}, "toolu_1"),
                Thinking("Second.", "sig-2"),
                ToolUse("time", {}, "toolu_2"),
            ],
            chunk_size=3,
        )
    )
    final = await make_model().chat_stream(HI, tools=TOOLS).collect()
    assert [
        (b.thinking, b.signature) if isinstance(b, ThinkingBlock) else b.type for b in final.content
    ] == [("First.", "sig-1"), "tool_call", ("Second.", "sig-2"), "tool_call"]


async def test_thinking_parameters_on_the_wire(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"), Reply(text="ok"))
    budget = {"thinking_budget": 2048, "max_tokens": 4096, "thinking_display": "omitted"}
    await make_model("claude-haiku-4-5", parameters=budget).chat(HI)
    await make_model(parameters={"thinking": "adaptive", "effort": "low"}).chat(HI)
    first, second = server.bodies()
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
    assert (second["thinking"], second["output_config"]) == (
        {"type": "adaptive"},
        {"effort": "low"},
    )


@pytest.mark.parametrize(
    ("model", "parameters", "error"),
    [
        ("claude-haiku-4-5", {"thinking_budget": 4096, "max_tokens": 4096}, "below max_tokens"),
        # Claude 4.7 and later refuse extended thinking; their cards leave it out.
        ("claude-opus-4-8", {"thinking_budget": 2048}, "takes no `thinking_budget`"),
        ("claude-fable-5-2", {"thinking": "disabled"}, r"takes `thinking` in \['adaptive'\]"),
        ("claude-haiku-4-5", {"effort": "high"}, "takes no `effort`"),
        ("claude-haiku-4-5", {"max_tokens": 100000}, "up to 64000"),
        # Opus 4.8 does not think unless asked: a display alone has no thinking to shape.
        ("claude-opus-4-8", {"thinking_display": "omitted"}, "applies while the model thinks"),
    ],
)
async def test_parameters_the_model_does_not_take_fail_before_any_request(
    server: AnthropicServer,
    make_model: ModelFactory,
    model: str,
    parameters: dict[str, Any],
    error: str,
) -> None:
    with pytest.raises(UserError, match=error):
        await make_model(model, parameters=parameters).chat(HI)
    assert server.requests == []


@pytest.mark.parametrize(
    ("name", "message"),
    [("temperature", "2026-10-21"), ("top_p", "2026-10-21"), ("seed", "no `seed`")],
)
def test_sampling_parameters_are_refused(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        AnthropicChatModel(AnthropicCredential(api_key="k"), "claude-sonnet-5-5").chat_sync(  # type: ignore[arg-type]
            HI, **{name: 1}
        )


async def test_other_parameters_on_the_wire(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok", stop_reason="stop_sequence", stop_sequence="END"))
    parameters = {
        "max_tokens": 500,
        "stop": ["END"],
        "user_id": "user-7",
        "service_tier": "standard_only",
        "effort": "max",
    }
    response = await make_model(parameters=parameters).chat(HI)
    assert response.finish_reason == "stop"
    assert response.metadata == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    body = server.bodies()[0]
    assert body["max_tokens"] == 500
    assert body["stop_sequences"] == ["END"]
    assert body["metadata"] == {"user_id": "user-7"}
    assert body["service_tier"] == "standard_only"
    assert body["output_config"] == {"effort": "max"}
    assert "stop" not in body


async def test_prompt_caching_breakpoints(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    parameters = {
        "cache_system": True,
        "cache_tools": True,
        "cache_messages": True,
        "cache_ttl": "1h",
    }
    thinking = ThinkingBlock(
        thinking="", extra={"anthropic_block": {"type": "redacted_thinking", "data": "x"}}
    )
    history = [
        Msg.system("Long instructions.", "More instructions."),
        Msg.user("Hi"),
        Msg.assistant("Hello", thinking),
        Msg.user("Question"),
    ]
    await make_model(parameters=parameters).chat(history, tools=TOOLS)
    body = server.bodies()[0]
    cache = {"type": "ephemeral", "ttl": "1h"}
    assert body["system"] == [
        {"type": "text", "text": "Long instructions."},
        {"type": "text", "text": "More instructions.", "cache_control": cache},
    ]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == cache
    assert body["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "Question", "cache_control": cache}],
    }
    assert body["messages"][1]["content"][1] == {"type": "redacted_thinking", "data": "x"}
    # The kept block in the history is not changed by the request.
    assert thinking.extra == {"anthropic_block": {"type": "redacted_thinking", "data": "x"}}


# -- media ----------------------------------------------------------------------------------


async def test_images_and_pdfs_reach_the_api(
    server: AnthropicServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4 fake")
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG fake")
    server.add(Reply(text="A cat and a report."))
    msg = Msg.user(
        "What are these?",
        ImageBlock.from_url("https://example.com/dog.jpg"),
        ImageBlock.from_path(image),
        FileBlock.from_path(pdf),
        FileBlock.from_url("https://example.com/paper.pdf"),
    )
    await make_model().chat([msg])
    content = server.bodies()[0]["messages"][0]["content"]
    assert content[1:] == [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/dog.jpg"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORyBmYWtl"},
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": "JVBERi0xLjQgZmFrZQ==",
            },
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
    ]


# -- retries and faults -----------------------------------------------------------------------


async def test_429_waits_what_retry_after_asks(
    server: AnthropicServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(HTTPError.rate_limit(retry_after=0.1), Reply(text="ok"))
    with caplog.at_level(logging.WARNING, logger="parley.models"):
        response = await make_model().chat(HI)
    assert response.text == "ok"
    # The wait the retry chose, as it logs it before sleeping: the header's, not a backoff
    # (the fixture's backoff waits near zero).
    assert "retry 1 of" in caplog.text
    assert "in 0.10s" in caplog.text
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [529, 500, 503, 504, 408, 409])
async def test_retryable_statuses_are_retried(
    server: AnthropicServer, make_model: ModelFactory, status: int
) -> None:
    server.add(HTTPError(status), Reply(text="ok"))
    assert (await make_model().chat(HI)).text == "ok"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_not_retried(
    server: AnthropicServer, make_model: ModelFactory, status: int
) -> None:
    server.add(HTTPError(status, "nope"), Reply(text="unused"))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model().chat(HI)
    assert caught.value.status_code == status
    assert caught.value.body["error"]["message"] == "nope"
    assert "nope" in str(caught.value)
    assert len(server.requests) == 1


async def test_overloaded_retries_give_up_after_max_retries(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.overloaded(), HTTPError(500), HTTPError.overloaded())
    with pytest.raises(ModelHTTPError, match="overloaded_error") as caught:
        await make_model(max_retries=2).chat(HI)
    assert caught.value.status_code == 529
    server.assert_consumed()


async def test_a_connection_dropped_before_the_answer_is_no_unreachable_server(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reset())
    with pytest.raises(ModelConnectionError, match="the connection to anthropic failed"):
        await make_model(max_retries=0).chat(HI)


async def test_connection_reset_is_retried(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reset(), Reply(text="ok"))
    assert (await make_model().chat(HI)).text == "ok"


async def test_stream_failing_before_its_first_chunk_is_retried(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # An overload as an `error` event right after `message_start`: nothing visible yet.
    server.add(HTTPError.overloaded(), Reset(), Reply(text="x", error_at=1), Reply(text="4th"))
    final = await make_model(max_retries=3).chat_stream(HI).collect()
    assert final.text == "4th"
    assert len(server.requests) == 4


async def test_stream_cut_after_its_first_chunk_raises_and_is_not_retried(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # Events: message_start, block start, ping, then the deltas "ab", "cd", "ef"...
    server.add(Reply(text="abcdefghijkl", chunk_size=2, cut_after=5), Reply(text="unused"))
    stream = make_model().chat_stream(HI)
    seen: list[str] = []
    with pytest.raises(ModelConnectionError):
        await read_into(seen, stream)
    assert seen == ["ab", "cd"]
    assert stream.response is not None
    assert stream.response.finish_reason == "error"
    assert stream.response.text == "abcd"
    assert len(server.requests) == 1


async def test_overloaded_event_mid_stream_is_surfaced_not_retried(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, error_at=5), Reply(text="unused"))
    stream = make_model().chat_stream(HI)
    with pytest.raises(ModelHTTPError, match="Overloaded") as caught:
        await stream.collect()
    assert caught.value.status_code == 529
    assert stream.response is not None
    assert stream.response.text == "abcd"
    assert len(server.requests) == 1


async def test_malformed_event_is_an_output_error(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # Events: message_start, block start, ping, "ab", then the broken one.
    server.add(Reply(text="abcdef", chunk_size=2, malformed_at=4), Reply(text="unused"))
    stream = make_model().chat_stream(HI)
    seen: list[str] = []
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        await read_into(seen, stream)
    assert seen == ["ab"]
    assert stream.response is not None
    assert (stream.response.text, stream.response.finish_reason) == ("ab", "error")
    assert len(server.requests) == 1


async def test_malformed_body_is_an_output_error(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Raw(b'{"content": ['))
    with pytest.raises(ModelOutputError, match="malformed JSON"):
        await make_model().chat(HI)


async def test_stream_ending_without_message_stop_is_a_connection_error(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    events = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m",'
        b' "model": "x", "usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
    )
    server.add(Raw(events, content_type="text/event-stream"))
    with pytest.raises(ModelConnectionError, match="before the message was complete"):
        await make_model(max_retries=0).chat_stream(HI).collect()


async def test_slow_answer_past_the_timeout(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="late", delay=1.0))
    with pytest.raises(ModelTimeoutError):
        await make_model(timeout=0.2, max_retries=0).chat(HI)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_slow_start_is_retried(
    server: AnthropicServer, make_model: ModelFactory, streamed: bool
) -> None:
    # Nothing reached the caller before the timeout: another try is safe.
    server.add(Reply(text="late", delay=1.0), Reply(text="in time", chunk_size=3))
    model = make_model(timeout=0.3, max_retries=1)
    response = await (model.chat_stream(HI).collect() if streamed else model.chat(HI))
    assert response.text == "in time"
    assert len(server.requests) == 2


async def test_slow_chunks_within_the_timeout_arrive_one_by_one(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, chunk_delay=0.05))
    chunks = [chunk async for chunk in make_model(timeout=2.0).chat_stream(HI)]
    assert [c.text for c in chunks] == ["ab", "cd", "ef", "abcdef"]
    assert chunks[-1].finish_reason == "stop"


async def test_stream_stalling_past_the_timeout(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="abcdef", chunk_size=2, chunk_delay=0.6))
    with pytest.raises(ModelTimeoutError):
        await make_model(timeout=0.3, max_retries=0).chat_stream(HI).collect()


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (HTTPError.rate_limit(retry_after=7), RateLimitError),
        (HTTPError(400, "prompt is too long: 210000 tokens > 200000 maximum"), ContextLengthError),
        (HTTPError(400, "Output blocked by content filtering policy"), ContentFilterError),
        (HTTPError(418, "teapot", kind="api_error"), ModelHTTPError),
    ],
)
async def test_status_errors_map_to_the_tree(
    server: AnthropicServer, make_model: ModelFactory, step: HTTPError, error: type[Exception]
) -> None:
    server.add(step)
    with pytest.raises(error) as caught:
        await make_model(max_retries=0).chat(HI)
    assert type(caught.value) is error
    if isinstance(caught.value, RateLimitError):
        assert caught.value.retry_after == 7
        assert caught.value.status_code == 429


async def test_unreachable_server_is_a_connection_error(make_model: ModelFactory) -> None:
    with AnthropicServer() as gone:
        credential = gone.credential()
    with pytest.raises(ModelConnectionError, match="cannot reach anthropic"):
        await make_model(credential=credential, max_retries=0).chat(HI)


# -- cancellation and cache ------------------------------------------------------------------


async def test_cancel_ends_with_interrupted_and_closes_the_connection(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="x" * 200, chunk_size=1, chunk_delay=0.02))
    stream = make_model().chat_stream(HI)
    first = await anext(stream)
    assert first.text == "x"
    stream.cancel()
    final = await anext(stream)
    assert final.is_last
    assert final.finish_reason == "interrupted"
    assert final.text.startswith("x")
    deadline = time.monotonic() + 5
    while not server.requests[0].disconnected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert server.requests[0].disconnected


async def test_leaving_async_with_after_a_break_closes_the_connection(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="x" * 400, chunk_size=1, chunk_delay=0.01))
    before = asyncio.all_tasks()
    async with make_model().chat_stream(HI) as stream:
        async for chunk in stream:
            assert chunk.text == "x"
            break
    # Leaving the block waited for the pump: nothing of the stream is left running.
    assert not asyncio.all_tasks() - before - {asyncio.current_task()}
    assert stream.response is not None
    assert stream.response.finish_reason == "interrupted"
    deadline = time.monotonic() + 5
    while not server.requests[0].disconnected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert server.requests[0].disconnected


async def test_a_connection_read_to_the_end_is_kept_for_the_next_call(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(*(Reply(text=f"answer {i}", chunk_size=2) for i in range(3)))
    model = make_model()
    texts = [(await model.chat_stream(HI).collect()).text for _ in range(3)]
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert len({request.client_port for request in server.requests}) == 1
    assert not any(request.disconnected for request in server.requests)


async def test_cache_answers_a_repeated_call(
    server: AnthropicServer, make_model: ModelFactory, tmp_path: Path
) -> None:
    server.add(Reply(text="cached", tool_calls=[ToolUse("weather", {"city": "Rome"})]))
    model = make_model(cache_dir=tmp_path)
    first = await model.chat(HI, tools=TOOLS)
    again = await model.chat(HI, tools=TOOLS)
    assert again.content == first.content
    assert len(server.requests) == 1


# -- sync twins, configuration, secrets ------------------------------------------------------


@pytest.mark.parametrize("ending", ENDINGS)
def test_connections_close_with_their_event_loop(server: AnthropicServer, ending: str) -> None:
    # Each `asyncio.run` ends its loop, which closes the connections opened on it; the sync
    # twins' loop runs to the exit, which closes them there if the model is still alive.
    setup = """
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
credential = AnthropicCredential(api_key="k", base_url=sys.argv[1])
model = AnthropicChatModel(credential, "claude-sonnet-5-5")
"""
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    assert run_without_closing(setup, server.url, ending) == ["one", "two", "three"]


async def test_requests_go_through_the_sdk_s_aiohttp_client(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    from anthropic import DefaultAioHttpClient  # noqa: PLC0415  (required by the fixtures)

    model = make_model()
    assert isinstance(model.client()._client, DefaultAioHttpClient)
    server.add(Reply(text="on aiohttp", chunk_size=3), Reply(text="whole"))
    assert (await model.chat_stream(HI).collect()).text == "on aiohttp"
    assert (await model.chat(HI)).text == "whole"
    assert len({request.client_port for request in server.requests}) == 1


async def test_missing_aiohttp_names_the_extra(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    with pytest.raises(MissingDependencyError, match=r"aiohttp.*parley\[anthropic\]"):
        await model.chat(HI)


def test_sync_twins(server: AnthropicServer) -> None:
    server.add(Reply(text="sync"), Reply(text="sync stream", chunk_size=4))
    model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    assert model.chat_sync(HI).text == "sync"
    chunks = list(model.chat_stream_sync(HI))
    assert chunks[-1].text == "sync stream"
    model.close_sync()


async def test_missing_key_is_a_configuration_error(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = AnthropicChatModel(AnthropicCredential(base_url=server.url), "claude-sonnet-5-5")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        await model.chat(HI)


async def test_key_from_the_environment(
    server: AnthropicServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    server.add(Reply(text="ok"))
    await make_model(credential=AnthropicCredential(base_url=server.url)).chat(HI)
    assert server.requests[0].headers["authorization"] == "Bearer sk-ant-env"


async def test_missing_sdk_names_the_extra(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    with pytest.raises(MissingDependencyError, match=r"parley\[anthropic\]"):
        await model.chat(HI)


async def test_remote_hosts_are_blocked_in_tests() -> None:
    model = AnthropicChatModel(AnthropicCredential(api_key="sk-x"), "claude-sonnet-5-5")  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"api\.anthropic\.com"):
        await model.chat(HI)


async def test_the_key_never_shows(
    server: AnthropicServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-ant-very-secret-value"
    credential = AnthropicCredential(api_key=secret, base_url=server.url)  # type: ignore[arg-type]
    model = make_model(credential=credential)
    server.add(HTTPError(500), Reply(text="ok"))
    with caplog.at_level(logging.DEBUG):
        await model.chat(HI)
    shown = [repr(credential), str(credential), repr(model), credential.model_dump_json()]
    shown += [record.getMessage() for record in caplog.records]
    assert all(secret not in text for text in shown)
    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"
