"""`OpenAIResponseModel` and its formatter, through the SDK against the local server."""

from __future__ import annotations

from typing import Any

import pytest

from parley import Msg
from parley.errors import MessageError, ModelHTTPError, UserError
from parley.messages import (
    AudioBlock,
    Base64Source,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from parley.providers.openai import OpenAIResponseModel, OpenAIResponsesFormatter
from parley.providers.openai.server import OpenAIServer, Reply, ToolCall
from tests.providers._chat import HI
from tests.providers._fixtures import ModelFactory
from tests.providers._samples import PNG

TOOLS = [{"name": "weather", "description": "Weather.", "parameters": {"type": "object"}}]


def responses(make_model: ModelFactory, model: str = "gpt-4.1", **kwargs: Any) -> Any:
    return make_model(OpenAIResponseModel, model, **kwargs)


# -- formatter --------------------------------------------------------------------------------


def test_formatter_items_in_block_order() -> None:
    thinking = ThinkingBlock(
        thinking="Need weather.",
        extra={"id": "rs_1", "summary": ["Need weather."], "encrypted_content": "ENC"},
    )
    msgs = [
        Msg.system("Be brief."),
        Msg.user("Weather in Rome?"),
        Msg.assistant(
            thinking, "Checking.", ToolCallBlock(id="c1", name="weather", input={"city": "Rome"})
        ),
        Msg.tool_result("c1", "Sunny", name="weather"),
        Msg.assistant("It is sunny."),
    ]
    assert OpenAIResponsesFormatter().format(msgs) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Rome?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Need weather."}],
            "encrypted_content": "ENC",
        },
        {"role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city": "Rome"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]


def test_formatter_drops_other_providers_thinking() -> None:
    msg = Msg.assistant(ThinkingBlock(thinking="theirs", signature="sig"), "Hi")
    assert OpenAIResponsesFormatter().format([msg]) == [{"role": "assistant", "content": "Hi"}]


def test_formatter_media_parts() -> None:
    image = ImageBlock(source=Base64Source(media_type="image/png", data=PNG))
    msg = Msg.user(
        "See:",
        image,
        FileBlock.from_url("https://example.com/a.pdf"),
        FileBlock(source=Base64Source(media_type="application/pdf", data=PNG), filename="b.pdf"),
    )
    assert OpenAIResponsesFormatter(image_detail="high").format([msg])[0]["content"] == [
        {"type": "input_text", "text": "See:"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "high"},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PNG}",
            "filename": "b.pdf",
        },
    ]


def test_formatter_tool_output_with_media() -> None:
    image = ImageBlock.from_url("https://example.com/x.png")
    msg = Msg.tool_result("c1", [TextBlock(text="Shot:"), image], name="snap")
    assert OpenAIResponsesFormatter().format([msg]) == [
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "Shot:"},
                {"type": "input_image", "image_url": "https://example.com/x.png", "detail": "auto"},
            ],
        }
    ]


def test_formatter_refuses_audio() -> None:
    msg = Msg.user(AudioBlock(source=Base64Source(media_type="audio/wav", data=PNG)))
    with pytest.raises(MessageError, match="takes no audio"):
        OpenAIResponsesFormatter().format([msg])


# -- the model --------------------------------------------------------------------------------


async def test_whole_answer(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="Hello!", input_tokens=9, output_tokens=2, cached_tokens=4))
    response = await responses(make_model).chat([Msg.system("Be nice."), *HI])
    assert response.text == "Hello!"
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 2)
    assert response.usage.cached_tokens == 4
    assert server.requests[0].path == "/v1/responses"
    assert server.bodies()[0] == {
        "model": "gpt-4.1",
        "input": [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi"}],
        "stream": False,
    }


async def test_streamed_reasoning_tool_call_and_usage(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(
            reasoning="Think about it.",
            encrypted_reasoning="ENC123",
            text="Let me check.",
            tool_calls=[ToolCall("weather", {"city": "Oslo"}, "call_1")],
            chunk_size=5,
        )
    )
    model = responses(make_model, "o4-mini")
    chunks = [c async for c in model.chat_stream(HI, tools=TOOLS)]
    assert "".join(c.thinking for c in chunks[:-1]) == "Think about it."
    assert "".join(c.text for c in chunks[:-1]) == "Let me check."
    final = chunks[-1]
    thinking, text, call = final.content
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.thinking == "Think about it."
    assert thinking.extra is not None
    assert thinking.extra["encrypted_content"] == "ENC123"
    assert thinking.extra["summary"] == ["Think about it."]
    assert thinking.extra["id"].startswith("rs_")
    assert isinstance(text, TextBlock)
    assert isinstance(call, ToolCallBlock)
    assert (call.id, call.name, call.input) == ("call_1", "weather", {"city": "Oslo"})
    assert final.finish_reason == "tool_calls"
    assert final.usage is not None
    assert final.usage.input_tokens == 10
    body = server.bodies()[0]
    # o4-mini reasons (its card says so): ask for the encrypted reasoning to send it back.
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Weather.",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]


async def test_reasoning_goes_back_on_the_next_turn(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(
            reasoning="Plan.", encrypted_reasoning="ENC", tool_calls=[ToolCall("weather", {}, "c1")]
        ),
        Reply(text="Sunny."),
    )
    model = responses(make_model, "o4-mini")
    first = await model.chat(HI, tools=TOOLS)
    history = [*HI, first.to_msg(), Msg.tool_result("c1", "Sunny", name="weather")]
    await model.chat(history, tools=TOOLS)
    sent = server.bodies()[1]["input"]
    assert sent[1]["type"] == "reasoning"
    assert sent[1]["encrypted_content"] == "ENC"
    assert sent[1]["summary"] == [{"type": "summary_text", "text": "Plan."}]
    assert sent[2] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "weather",
        "arguments": "{}",
    }
    assert sent[3] == {"type": "function_call_output", "call_id": "c1", "output": "Sunny"}


async def test_non_reasoning_models_do_not_ask_for_encrypted_reasoning(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    await responses(make_model, "gpt-4o").chat(HI)
    assert "include" not in server.bodies()[0]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [("required", "required"), ("weather", {"type": "function", "name": "weather"})],
)
async def test_tool_choice(
    server: OpenAIServer, make_model: ModelFactory, choice: str, wire: Any
) -> None:
    server.add(Reply(text="ok"))
    await responses(make_model).chat(HI, TOOLS, choice)
    assert server.bodies()[0]["tool_choice"] == wire


async def test_parameters_nest_as_the_api_wants(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    model = responses(make_model, "gpt-5")
    await model.chat(
        HI,
        max_tokens=50,
        reasoning_effort="low",
        reasoning_summary="auto",
        verbosity="low",
        store=False,
    )
    body = server.bodies()[0]
    assert body["max_output_tokens"] == 50
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["text"] == {"verbosity": "low"}
    assert body["store"] is False


async def test_stop_is_refused(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="the Responses API takes no `stop`"):
        await responses(make_model).chat(HI, stop=["END"])


async def test_structured_output_native_format(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    server.add(Reply(text="no tool call, sorry"), Reply(text='{"n": 3}'))
    result = await responses(make_model).generate_structured_output(HI, schema)
    assert result.strategy == "native"
    assert result.content == {"n": 3}
    assert server.bodies()[1]["text"]["format"] == {
        "type": "json_schema",
        "name": "response",
        "schema": schema,
        "strict": False,
    }


async def test_incomplete_response_is_length(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="cut", finish_reason="length"), Reply(text="cut", finish_reason="length"))
    model = responses(make_model)
    assert (await model.chat(HI)).finish_reason == "length"
    assert (await model.chat_stream(HI).collect()).finish_reason == "length"


async def test_error_event_mid_stream(server: OpenAIServer, make_model: ModelFactory) -> None:
    error = {"code": "rate_limit_exceeded", "message": "Slow down"}
    server.add(Reply(text="abcdef", chunk_size=2, error_at=4, error=error))
    with pytest.raises(ModelHTTPError, match="Slow down") as caught:
        await responses(make_model, max_retries=0).chat_stream(HI).collect()
    assert caught.value.status_code == 429
