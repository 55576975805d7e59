"""`AnthropicChatModel` through the real `anthropic` SDK against the local wire-format server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parley import Msg
from parley.errors import (
    ModelHTTPError,
    UserError,
)
from parley.messages import FileBlock, ImageBlock, ThinkingBlock
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
from parley.providers.anthropic.server import (
    AnthropicServer,
    HTTPError,
    Redacted,
    Reply,
    ServerBlock,
    Text,
    Thinking,
    ToolUse,
)
from tests.providers._chat import HI, TOOLS
from tests.providers._fixtures import ModelFactory

NO_DEFAULT_THINKING = "claude-opus-4-8"
"""A model that does not think unless asked (its card gives `thinking` no default)."""


# -- answers --------------------------------------------------------------------------------


async def test_the_request_the_id_and_the_cache_tokens(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    # The answer, its finish and its usage, as every provider's: test_chat_contract.py.
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
    assert (response.id, response.model) == ("msg_1", "claude-sonnet-5-5")
    assert response.usage is not None
    # The whole prompt is the uncached input plus the cache writes plus the cache reads.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (47, 3)
    assert response.usage.cached_tokens == 30
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


async def test_broken_streamed_arguments_are_kept_raw(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(Reply(tool_calls=[ToolUse("weather", '{"city": "Par', "toolu_x")]))
    final = await make_model().chat_stream(HI, tools=TOOLS).collect()
    (call,) = final.tool_calls
    assert (call.id, call.input, call.raw_input) == ("toolu_x", {}, '{"city": "Par')


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


async def test_overloaded_retries_give_up_after_max_retries(
    server: AnthropicServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.overloaded(), HTTPError(500), HTTPError.overloaded())
    with pytest.raises(ModelHTTPError, match="overloaded_error") as caught:
        await make_model(max_retries=2).chat(HI)
    assert caught.value.status_code == 529
    server.assert_consumed()


# -- sync twins, configuration ---------------------------------------------------------------


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
