"""`OllamaChatModel` through the real `ollama` SDK against the local wire-format server."""

from __future__ import annotations

import base64
import gzip
import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from parley import Msg
from parley.agents import Agent
from parley.errors import (
    ContextLengthError,
    ModelHTTPError,
    UserError,
)
from parley.messages import ImageBlock, ThinkingBlock, ToolCallBlock
from parley.models.spec import model_from_spec
from parley.providers.ollama import OllamaChatModel, OllamaCredential
from parley.providers.ollama.server import HTTPError, OllamaServer, Raw, Reply, ToolCall
from tests.providers._chat import HI, TOOLS, WEATHER_FUNCTION
from tests.providers._fixtures import ModelFactory
from tests.sample_tools import add

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def contents(chunks: list[Any]) -> list[tuple[str, str]]:
    """Each delta chunk's blocks as (type, text)."""
    out = []
    for chunk in chunks:
        for block in chunk.content:
            text = block.thinking if block.type == "thinking" else getattr(block, "text", "")
            out.append((block.type, text))
    return out


# -- answers --------------------------------------------------------------------------------


async def test_the_request_and_the_durations(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # The answer, its finish and its usage, as every provider's: test_chat_contract.py.
    server.add(Reply(text="Hello!", prompt_eval_count=12, eval_count=3))
    response = await make_model().chat(HI)
    assert response.metadata == {
        "done_reason": "stop",
        "durations": {"total": 0.25, "load": 0.05, "prompt_eval": 0.02, "eval": 0.15},
    }
    assert server.bodies() == [
        {"model": "qwen3", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
    ]
    server.assert_consumed()


async def test_a_stream_ends_with_its_durations(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # The stream's chunks and usage, as every provider's: tests/providers/test_chat_contract.py.
    server.add(Reply(text="Hello, world", chunk_size=5))
    final = await make_model().chat_stream(HI).collect()
    assert final.metadata["durations"]["eval"] == 0.15
    assert server.bodies()[0]["stream"] is True


async def test_thinking_streams_before_the_text(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Reply(thinking="Let me see.", text="42", chunk_size=6))
    chunks = [chunk async for chunk in make_model(parameters={"think": True}).chat_stream(HI)]
    assert contents(chunks[:-1]) == [
        ("thinking", "Let me"),
        ("thinking", " see."),
        ("text", "42"),
    ]
    final = chunks[-1]
    assert isinstance(final.content[0], ThinkingBlock)
    assert (final.thinking, final.text) == ("Let me see.", "42")
    assert server.bodies()[0]["think"] is True


# -- tools ----------------------------------------------------------------------------------


async def test_tool_calls_without_ids_get_unique_ones(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # Servers before v0.12 send no ids, and a model may call one tool twice.
    calls = [ToolCall("weather", {"city": "Paris"}), ToolCall("weather", {"city": "Oslo"})]
    server.add(Reply(tool_calls=calls), Reply(tool_calls=calls))
    model = make_model()
    final = await model.chat_stream(HI, tools=TOOLS).collect()
    whole = await model.chat(HI, tools=TOOLS)
    for response in (final, whole):
        assert response.finish_reason == "tool_calls"  # Ollama said `stop`
        assert [(c.name, c.input) for c in response.tool_calls] == [
            ("weather", {"city": "Paris"}),
            ("weather", {"city": "Oslo"}),
        ]
    ids = [c.id for c in final.tool_calls + whole.tool_calls]
    assert len(set(ids)) == 4
    assert all(i.startswith("call_") for i in ids)


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_call_ids_the_server_sends_are_kept(
    server: OllamaServer, make_model: ModelFactory, stream: bool
) -> None:
    calls = [ToolCall("weather", {"city": "Paris"}, "call_ab12cd34"), ToolCall("time", {}, "c2")]
    server.add(Reply(text="Checking.", tool_calls=calls))
    model = make_model()
    if stream:
        response = await model.chat_stream(HI, tools=TOOLS).collect()
    else:
        response = await model.chat(HI, tools=TOOLS)
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("call_ab12cd34", "weather", {"city": "Paris"}),
        ("c2", "time", {}),
    ]
    assert response.text == "Checking."


async def test_each_tool_call_streams_whole_in_one_chunk(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Reply(tool_calls=[ToolCall("weather", {"city": "Paris", "days": 3}, "c1")]))
    chunks = [c async for c in make_model().chat_stream(HI, tools=TOOLS)]
    streamed = [b for c in chunks[:-1] for b in c.content if isinstance(b, ToolCallBlock)]
    assert [(b.id, b.name, b.raw_input) for b in streamed] == [
        ("c1", "weather", '{"city": "Paris", "days": 3}')
    ]


async def test_arguments_as_a_string_are_kept_raw_when_broken(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # Some proxies pass OpenAI's argument strings through.
    server.add(Reply(tool_calls=[ToolCall("weather", '{"city": "Par')]))
    (call,) = (await make_model().chat(HI, tools=TOOLS)).tool_calls
    assert (call.input, call.raw_input) == ({}, '{"city": "Par')


async def test_thinking_and_tool_call_ids_go_back(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(thinking="I need the weather.", tool_calls=[ToolCall("weather", {"city": "Rome"})]),
        Reply(text="Sunny."),
    )
    model = make_model()
    first = await model.chat_stream(HI, tools=TOOLS).collect()
    call = first.tool_calls[0]
    history = [*HI, first.to_msg(), Msg.tool_result(call.id, "sunny", name="weather")]
    assert (await model.chat(history, tools=TOOLS)).text == "Sunny."
    assert server.bodies()[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "thinking": "I need the weather.",
            "tool_calls": [
                {"id": call.id, "function": {"name": "weather", "arguments": {"city": "Rome"}}}
            ],
        },
        {"role": "tool", "content": "sunny", "tool_name": "weather", "tool_call_id": call.id},
    ]


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        (None, ["weather", "time"]),
        ("auto", ["weather", "time"]),
        ("required", ["weather", "time"]),
        ("time", ["time"]),
        ("none", []),
    ],
)
async def test_tool_choice_decides_the_tools_sent(
    server: OllamaServer, make_model: ModelFactory, choice: str | None, sent: list[str]
) -> None:
    server.add(Reply(text="ok"))
    await make_model(parameters={"parallel_tool_calls": False}).chat(HI, TOOLS, choice)
    body = server.bodies()[0]
    assert [t["function"]["name"] for t in body.get("tools", [])] == sent
    # Ollama has neither: the choice is made by the tools sent, and parallel calls are free.
    assert not {"tool_choice", "parallel_tool_calls"} & set(body)
    assert not {"parallel_tool_calls"} & set(body.get("options", {}))


async def test_tools_on_the_wire(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    await make_model().chat(HI, TOOLS[:1])
    assert server.bodies()[0]["tools"] == [WEATHER_FUNCTION]


# -- parameters -----------------------------------------------------------------------------


async def test_parameters_on_the_wire(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    model = make_model(
        parameters={"temperature": 0.5, "max_tokens": 100, "num_ctx": 8192, "keep_alive": "5m"}
    )
    await model.chat(
        HI, think="high", seed=7, stop=["END"], top_k=20, options={"mirostat": 2, "seed": 1}
    )
    body = server.bodies()[0]
    assert (body["think"], body["keep_alive"]) == ("high", "5m")
    assert body["options"] == {
        "mirostat": 2,
        "seed": 7,  # the named parameter wins over the pass-through
        "temperature": 0.5,
        "num_predict": 100,
        "num_ctx": 8192,
        "stop": ["END"],
        "top_k": 20,
    }


@pytest.mark.parametrize("think", [False, "low", "medium", "high", "max"])
async def test_think_takes_a_switch_or_a_level(
    server: OllamaServer, make_model: ModelFactory, think: Any
) -> None:
    server.add(Reply(text="ok"))
    await make_model().chat(HI, think=think)
    assert server.bodies()[0]["think"] == think


async def test_bad_parameters_are_user_errors(make_model: ModelFactory) -> None:
    with pytest.raises(UserError, match="bad parameter value"):
        await make_model().chat(HI, think="extreme")
    with pytest.raises(UserError, match="unknown parameter 'num_ctxx'"):
        await make_model().chat(HI, num_ctxx=4)


# -- media ----------------------------------------------------------------------------------


async def test_images_go_as_base64_in_images(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="A square."))
    image = ImageBlock.from_bytes(base64.b64decode(PNG), "image/png")
    await make_model("gemma3").chat([Msg.user("What is this?", image)])
    assert server.bodies()[0]["messages"] == [
        {"role": "user", "content": "What is this?", "images": [PNG]}
    ]


# -- structured output ----------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


async def test_structured_output_by_format(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(Reply(text='{"name": "Paris", "population": 2}'))
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "native"
    assert result.parsed == City(name="Paris", population=2)
    body = server.bodies()[0]
    assert body["format"] == City.model_json_schema()
    assert "tools" not in body


async def test_structured_output_falls_back_to_a_tool(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, 'invalid format: expected "json" or a JSON schema'),
        Reply(tool_calls=[ToolCall("generate_response", {"name": "Oslo", "population": 1})]),
    )
    result = await make_model().generate_structured_output(HI, City)
    assert result.strategy == "auto"
    assert result.content == {"name": "Oslo", "population": 1}
    second = server.bodies()[1]
    assert "format" not in second
    assert [t["function"]["name"] for t in second["tools"]] == ["generate_response"]
    server.assert_consumed()


async def test_structured_output_falls_back_to_the_prompt(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(
        HTTPError(400, "invalid format"),
        HTTPError(400, "registry.ollama.ai/library/gemma3:latest does not support tools"),
        Reply(text='Here: ```json\n{"name": "Rome", "population": 3}\n```'),
    )
    result = await make_model("gemma3").generate_structured_output(HI, City)
    assert result.strategy == "text"
    assert result.content == {"name": "Rome", "population": 3}
    last = server.bodies()[2]
    assert "JSON schema" in last["messages"][-1]["content"]
    assert not {"tools", "format"} & set(last)


# -- finish reasons, loading ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("done_reason", "finish"), [("stop", "stop"), ("length", "length"), (None, "stop")]
)
@pytest.mark.parametrize("stream", [True, False])
async def test_done_reason_maps_to_the_finish_reason(
    server: OllamaServer,
    make_model: ModelFactory,
    done_reason: str | None,
    finish: str,
    stream: bool,
) -> None:
    server.add(Reply(text="cut", done_reason=done_reason))
    model = make_model()
    response = await (model.chat_stream(HI).collect() if stream else model.chat(HI))
    assert response.finish_reason == finish


async def test_load_and_unload(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(Reply(done_reason="load", eval_count=0), Reply(done_reason="unload", eval_count=0))
    model = make_model(parameters={"keep_alive": "10m"})
    loaded = await model.load()
    unloaded = await model.unload()
    assert (loaded.finish_reason, loaded.metadata["done_reason"]) == ("stop", "load")
    assert (unloaded.finish_reason, unloaded.metadata["done_reason"]) == ("stop", "unload")
    assert loaded.content == []
    assert server.bodies() == [
        {"model": "qwen3", "messages": [], "stream": False, "keep_alive": "10m"},
        {"model": "qwen3", "messages": [], "stream": False, "keep_alive": 0},
    ]


# -- retries and faults ---------------------------------------------------------------------


async def test_a_model_not_pulled_names_ollama_pull(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(HTTPError.not_found("llama3.3"))
    with pytest.raises(ModelHTTPError, match=r"`ollama pull llama3\.3`") as caught:
        await make_model("llama3.3").chat_stream(HI).collect()
    assert caught.value.status_code == 404
    assert "model 'llama3.3' not found" in str(caught.value)
    assert len(server.requests) == 1


async def test_context_length_errors(server: OllamaServer, make_model: ModelFactory) -> None:
    server.add(
        HTTPError(400, "the input length exceeds the context length"),
        Reply(text="ab", error_at=1, error="input exceeds maximum context length"),
    )
    model = make_model()
    with pytest.raises(ContextLengthError):
        await model.chat(HI)
    with pytest.raises(ContextLengthError):
        await model.chat_stream(HI).collect()


# -- sync twins, configuration, the SDK -----------------------------------------------------


def test_sync_twins(server: OllamaServer) -> None:
    server.add(Reply(text="sync"), Reply(text="sync stream"), Reply(done_reason="load"))
    model = OllamaChatModel(server.credential(), "qwen3")
    assert model.chat_sync(HI).text == "sync"
    assert list(model.chat_stream_sync(HI))[-1].text == "sync stream"
    assert model.load_sync().metadata["done_reason"] == "load"
    model.close_sync()


async def test_requests_go_through_the_sdk_client_on_aiohttp(
    server: OllamaServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from httpx_aiohttp import HttpxAiohttpClient  # noqa: PLC0415  (required by the fixtures)

    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-key")
    model = make_model()
    sent = model.client()._client  # the SDK's HTTP client: its base URL, headers, pool
    assert isinstance(sent, HttpxAiohttpClient)
    server.add(Reply(text="on aiohttp", chunk_size=3), Reply(text="whole"))
    assert (await model.chat_stream(HI).collect()).text == "on aiohttp"
    assert (await model.chat(HI)).text == "whole"
    # What the SDK sets on its client is sent as before: its identity, its key rule.
    for request in server.requests:
        assert request.headers["user-agent"].startswith("ollama-python/")
        assert request.headers["authorization"] == "Bearer ollama-key"


async def test_host_from_ollama_host(
    server: OllamaServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.url.rsplit(':', 1)[1]}")
    server.add(Reply(text="found"))
    assert (await make_model(credential=OllamaCredential()).chat(HI)).text == "found"


async def test_headers_are_sent_and_kept_secret(
    server: OllamaServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Bearer very-secret-proxy-token"
    credential = server.credential({"Authorization": secret, "X-Team": "blue"})
    model = make_model(credential=credential)
    server.add(HTTPError(500), Reply(text="ok"))
    with caplog.at_level(logging.DEBUG):
        await model.chat(HI)
    headers = server.requests[0].headers
    assert (headers["authorization"], headers["x-team"]) == (secret, "blue")
    assert headers["user-agent"].startswith("ollama-python/")  # the SDK's client
    shown = [repr(credential), str(credential), repr(model), credential.model_dump_json()]
    shown += [record.getMessage() for record in caplog.records]
    assert all("very-secret" not in text for text in shown)


async def test_ollama_api_key_goes_as_a_bearer_token(
    server: OllamaServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's own rule, for Ollama's hosted models.
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-key")
    server.add(Reply(text="ok"))
    await make_model().chat(HI)
    assert server.requests[0].headers["authorization"] == "Bearer ollama-key"


async def test_model_from_spec(server: OllamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    server.add(Reply(text="from a spec"))
    model = model_from_spec("ollama:qwen3:8b")
    try:
        assert isinstance(model, OllamaChatModel)
        assert model.model == "qwen3:8b"
        assert (await model.chat(HI)).text == "from a spec"
    finally:
        await model.aclose()
    assert model_from_spec("ollama").model == OllamaChatModel.list_models()[0].name


# -- an agent -------------------------------------------------------------------------------


async def test_an_agent_runs_a_tool_on_the_server(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    server.add(
        Reply(tool_calls=[ToolCall("add", {"a": 2, "b": 3})]),
        Reply(text="It is 5.", chunk_size=3),
    )
    agent = Agent("calc", make_model(), system_prompt="You add.", tools=[add])
    final = await agent.reply("What is 2 + 3?")
    assert final.text == "It is 5."
    server.assert_consumed()
    first, second = server.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    call = second["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert second["messages"][3] == {
        "role": "tool",
        "content": "5",
        "tool_name": "add",
        "tool_call_id": call["id"],
    }


async def test_a_compressed_stream_is_decoded(
    server: OllamaServer, make_model: ModelFactory
) -> None:
    # Ollama itself never compresses; a proxy in front of it may.
    lines = [
        {"model": "qwen3", "message": {"role": "assistant", "content": "Hel"}, "done": False},
        {"model": "qwen3", "message": {"role": "assistant", "content": "lo"}, "done": False},
        {"model": "qwen3", "message": {"role": "assistant", "content": ""}, "done": True},
    ]
    body = gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    headers = {"Content-Encoding": "gzip"}
    server.add(Raw(body, content_type="application/x-ndjson", headers=headers))
    assert (await make_model().chat_stream(HI).collect()).text == "Hello"
