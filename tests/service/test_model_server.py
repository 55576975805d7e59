"""`parley serve` as a model server: `/v1/chat/completions` naming a served model.

The served model is an OpenAI-compatible stand-in (`parley.testing.OpenAIServer`, scripted
with tool calls) named by a model spec in the settings, as an operator configures one
(`openai_compatible:<model>` with `OPENAI_COMPATIBLE_BASE_URL`), or a `ScriptedModel`
given to `create_app`. The clients are the real ones: the official `openai` SDK,
LangChain's `ChatOpenAI(...).bind_tools(...)` and LlamaIndex's `OpenAILike`, talking to the
app served by uvicorn on 127.0.0.1 (or in-process through httpx's ASGI transport). Each test
checks what the client got and what the stand-in was sent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply, ToolCall
from parley.service import ServiceSettings, create_app
from tests.service._live import running

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_ambient_settings")]

STAND_IN = "stand-in"
"""The served model's name: the spec `openai_compatible:qwen-stand-in` behind it."""

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny, 21 C in {city}"


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """The upstream model server, named to parley as its settings name one (environment)."""
    with OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-upstream")
        yield server


@contextlib.contextmanager
def serving(tmp_path: Path, *agents: Agent, **settings: Any) -> Iterator[str]:
    """`parley serve`'s app on 127.0.0.1, serving the stand-in as `stand-in`; its /v1 URL."""
    settings.setdefault("served_models", {STAND_IN: "openai_compatible:qwen-stand-in"})
    config = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}", **settings)
    with running(create_app(config, agents=agents or None)) as url:
        yield f"{url}/v1"


def sdk(base_url: str, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def helper_agent() -> Agent:
    return Agent("helper", ScriptedModel([]), system_prompt="You help.")


# -- /v1/models --------------------------------------------------------------------------------


def test_models_says_which_entry_is_an_agent_and_which_a_model(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    with serving(tmp_path, helper_agent()) as url, sdk(url) as client:
        listed = {card.id: card for card in client.models.list()}
        one = client.models.retrieve(STAND_IN)
    assert sorted(listed) == ["helper", STAND_IN]
    agent, model = listed["helper"], listed[STAND_IN]
    assert (agent.owned_by, agent.model_extra["parley"]["kind"]) == ("parley", "agent")
    assert (model.owned_by, model.model_extra["parley"]["kind"]) == ("openai_compatible", "model")
    assert (one.id, one.model_extra["parley"]["kind"]) == (STAND_IN, "model")
    assert stand_in.requests == []  # listing builds and calls nothing


def test_by_default_the_builtin_agents_model_is_served_and_own_agents_serve_none(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    builtin = create_app(ServiceSettings(database_url=url))
    own = create_app(ServiceSettings(database_url=url), agents=[helper_agent()])
    with running(builtin) as base, sdk(f"{base}/v1") as client:
        kinds = {c.id: c.model_extra["parley"]["kind"] for c in client.models.list()}
    assert kinds == {"assistant": "agent", "local": "model"}
    with running(own) as base, sdk(f"{base}/v1") as client:
        assert [c.id for c in client.models.list()] == ["helper"]


# -- the openai SDK ----------------------------------------------------------------------------


def test_sdk_tool_round_trip_through_a_served_model(tmp_path: Path, stand_in: OpenAIServer) -> None:
    stand_in.add(
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"}, id="call_w1")]),
        Reply(text="It is sunny in Paris.", input_tokens=30),
    )
    question = [{"role": "system", "content": "Be brief."}, user("Weather in Paris?")]
    with serving(tmp_path) as url, sdk(url) as client:
        first = client.chat.completions.create(
            model=STAND_IN, messages=question, tools=[WEATHER_TOOL], tool_choice="auto"
        )
        [call] = first.choices[0].message.tool_calls or []
        turn = first.choices[0].message.model_dump(exclude_none=True)
        result = {"role": "tool", "tool_call_id": call.id, "content": get_weather("Paris")}
        second = client.chat.completions.create(
            model=STAND_IN, messages=[*question, turn, result], tools=[WEATHER_TOOL]
        )
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.id, call.function.name) == ("call_w1", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert first.choices[0].message.content is None
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "It is sunny in Paris."
    assert (second.usage.prompt_tokens, second.model) == (30, STAND_IN)
    sent_first, sent_second = stand_in.bodies()
    assert sent_first["model"] == "qwen-stand-in"
    assert sent_first["tools"][0]["function"]["name"] == "get_weather"
    assert sent_first["tool_choice"] == "auto"
    assert [m["role"] for m in sent_first["messages"]] == ["system", "user"]
    assert [m["role"] for m in sent_second["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent_second["messages"][2]["tool_calls"][0]["id"] == "call_w1"
    assert sent_second["messages"][3]["tool_call_id"] == "call_w1"
    assert "Sunny, 21 C in Paris" in json.dumps(sent_second["messages"][3])
    assert stand_in.requests[0].headers.get("authorization") == "Bearer sk-upstream"


def test_sdk_stream_carries_tool_call_deltas_and_usage(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    calls = [
        ToolCall("get_weather", {"city": "Paris"}, id="call_a"),
        ToolCall("get_weather", {"city": "Rome"}, id="call_b"),
    ]
    stand_in.add(Reply(tool_calls=calls, chunk_size=5, input_tokens=12, output_tokens=7))
    with serving(tmp_path) as url, sdk(url) as client:
        chunks = list(
            client.chat.completions.create(
                model=STAND_IN,
                messages=[user("Paris and Rome?")],
                tools=[WEATHER_TOOL],
                tool_choice="required",
                parallel_tool_calls=True,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    assembled: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                slot = assembled.setdefault(delta.index, {"id": "", "name": "", "args": ""})
                slot["id"] += delta.id or ""
                slot["name"] += (delta.function.name or "") if delta.function else ""
                slot["args"] += (delta.function.arguments or "") if delta.function else ""
    assert [(s["id"], s["name"], json.loads(s["args"])) for s in assembled.values()] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Rome"}),
    ]
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert set(finishes[:-1]) == {None}
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (12, 7)
    [sent] = stand_in.bodies()
    assert (sent["stream"], sent["tool_choice"], sent["parallel_tool_calls"]) == (
        True,
        "required",
        True,
    )


def test_sdk_stream_of_text_and_sampling_parameters(tmp_path: Path, stand_in: OpenAIServer) -> None:
    stand_in.add(Reply(text="Bonjour tout le monde", chunk_size=3))
    with serving(tmp_path) as url, sdk(url) as client:
        stream = client.chat.completions.create(
            model=STAND_IN,
            messages=[user("Say hello in French.")],
            stream=True,
            temperature=0.25,
            max_completion_tokens=64,
            stop="END",
            seed=7,
            service_tier="priority",  # the operator's account, not the client's: not sent
        )
        pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(pieces) == "Bonjour tout le monde"
    assert len([p for p in pieces if p]) > 1  # streamed in pieces, not whole
    [sent] = stand_in.bodies()
    assert (sent["temperature"], sent["stop"], sent["seed"]) == (0.25, ["END"], 7)
    assert sent.get("max_completion_tokens", sent.get("max_tokens")) == 64
    assert "service_tier" not in sent


def test_sdk_json_mode_reaches_a_model_that_constrains_output(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    stand_in.add(Reply(text='{"city": "Paris"}'))
    with serving(tmp_path) as url, sdk(url) as client:
        answer = client.chat.completions.create(
            model=STAND_IN,
            messages=[user("JSON, please.")],
            response_format={"type": "json_object"},
        )
    assert json.loads(answer.choices[0].message.content or "") == {"city": "Paris"}
    [sent] = stand_in.bodies()
    assert sent["response_format"]["type"] in ("json_object", "json_schema")


def test_a_failure_mid_stream_ends_with_an_error_frame(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    stand_in.add(Reply(text="This answer breaks off", chunk_size=2, error_at=3))
    with serving(tmp_path) as url, sdk(url) as client:
        stream = client.chat.completions.create(
            model=STAND_IN, messages=[user("Go on.")], stream=True
        )
        with pytest.raises(openai.APIError, match="the model failed"):
            for _ in stream:
                pass


def test_the_providers_rate_limit_is_a_429_with_retry_after(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    # The served model retries on its own first (3 times): a provider that keeps refusing.
    stand_in.add(*[HTTPError.rate_limit(retry_after=0.01) for _ in range(4)])
    with (
        serving(tmp_path) as url,
        sdk(url) as client,
        pytest.raises(openai.RateLimitError) as raised,
    ):
        client.chat.completions.create(model=STAND_IN, messages=[user("Hi")])
    assert raised.value.response.headers["retry-after"] == "1"


# -- LangChain and LlamaIndex ------------------------------------------------------------------


def test_langchain_bind_tools_round_trip(tmp_path: Path, stand_in: OpenAIServer) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage  # noqa: PLC0415
    from langchain_core.tools import tool  # noqa: PLC0415
    from langchain_openai import ChatOpenAI  # noqa: PLC0415

    weather = tool(get_weather)
    stand_in.add(
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, id="call_lc")]),
        Reply(text="Oslo is sunny today."),
    )
    with serving(tmp_path) as url, httpx.Client() as http:
        llm = ChatOpenAI(
            model=STAND_IN, base_url=url, api_key="unused", max_retries=0, http_client=http
        )
        bound = llm.bind_tools([weather])
        messages: list[Any] = [HumanMessage("What is the weather in Oslo?")]
        called = bound.invoke(messages)
        [call] = called.tool_calls
        messages += [called, ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"])]
        answer = bound.invoke(messages)
    assert (call["name"], call["args"], call["id"]) == ("get_weather", {"city": "Oslo"}, "call_lc")
    assert answer.content == "Oslo is sunny today."
    first, second = stand_in.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_lc",
        "content": "Sunny, 21 C in Oslo",
    }


def test_langchain_streams_a_tool_call(tmp_path: Path, stand_in: OpenAIServer) -> None:
    from langchain_core.messages import AIMessageChunk  # noqa: PLC0415
    from langchain_openai import ChatOpenAI  # noqa: PLC0415

    stand_in.add(Reply(tool_calls=[ToolCall("get_weather", {"city": "Lima"}, id="call_s")]))
    with serving(tmp_path) as url, httpx.Client() as http:
        llm = ChatOpenAI(
            model=STAND_IN, base_url=url, api_key="unused", max_retries=0, http_client=http
        )
        merged: AIMessageChunk | None = None
        for piece in llm.bind_tools([WEATHER_TOOL]).stream("Weather in Lima?"):
            assert isinstance(piece, AIMessageChunk)
            merged = piece if merged is None else merged + piece
    assert merged is not None
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("get_weather", {"city": "Lima"})
    ]


def _openai_like(url: str, **http: httpx.Client | httpx.AsyncClient) -> Any:
    """llama-index's `OpenAILike` on the served model at `url`, as a chat model with tools."""
    from llama_index.llms.openai_like import OpenAILike  # noqa: PLC0415

    return OpenAILike(
        model=STAND_IN,
        api_base=url,
        api_key="unused",
        is_chat_model=True,
        is_function_calling_model=True,
        max_retries=0,
        **http,
    )


def test_llama_index_openailike_chat_with_tools(tmp_path: Path, stand_in: OpenAIServer) -> None:
    from llama_index.core.tools import FunctionTool  # noqa: PLC0415

    weather = FunctionTool.from_defaults(fn=get_weather)
    stand_in.add(Reply(tool_calls=[ToolCall("get_weather", {"city": "Kyoto"}, id="call_li")]))
    with serving(tmp_path) as url, httpx.Client() as http:
        llm = _openai_like(url, http_client=http)
        response = llm.chat_with_tools([weather], user_msg="Weather in Kyoto?")
        [selection] = llm.get_tool_calls_from_response(response)
    assert (selection.tool_id, selection.tool_name) == ("call_li", "get_weather")
    assert selection.tool_kwargs == {"city": "Kyoto"}
    [sent] = stand_in.bodies()
    assert sent["tools"][0]["function"]["name"] == "get_weather"


# llama-index-core reads its agents' fields as pydantic 1 named them (`__fields__`) and
# through instances, which pydantic 2 warns of; not this test's concern.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_llama_index_agent_runs_its_tool_through_a_served_model(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    from llama_index.core.agent.workflow import FunctionAgent  # noqa: PLC0415

    stand_in.add(
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Quito"}, id="call_ag")]),
        Reply(text="Quito: sunny, 21 C."),
    )
    with serving(tmp_path) as url:
        async with httpx.AsyncClient() as http:
            llm = _openai_like(url, async_http_client=http)
            agent = FunctionAgent(tools=[get_weather], llm=llm, system_prompt="Use the tools.")
            answer = await agent.run(user_msg="What is the weather in Quito?")
    assert "Quito: sunny, 21 C." in str(answer)
    second = stand_in.bodies()[1]
    tool_turn = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_turn
    assert tool_turn[0]["tool_call_id"] == "call_ag"
    assert "Sunny, 21 C in Quito" in json.dumps(tool_turn[0]["content"])


# -- what stays as it was, and what is refused ---------------------------------------------------


def test_an_agent_given_tools_is_refused_with_the_models_to_name(
    tmp_path: Path, stand_in: OpenAIServer
) -> None:
    with (
        serving(tmp_path, helper_agent()) as url,
        sdk(url) as client,
        pytest.raises(openai.BadRequestError) as raised,
    ):
        client.chat.completions.create(model="helper", messages=[user("Hi")], tools=[WEATHER_TOOL])
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["param"] == "tools"
    assert "parley agent" in error["message"]
    assert STAND_IN in error["message"]


def test_only_configured_models_can_be_named(tmp_path: Path, stand_in: OpenAIServer) -> None:
    with serving(tmp_path, helper_agent()) as url, sdk(url) as client:
        for name in ("openai:gpt-4o", "openai_compatible:qwen-stand-in", "local", "http://x/v1"):
            with pytest.raises(openai.NotFoundError, match="does not exist"):
                client.chat.completions.create(model=name, messages=[user("Hi")])
    assert stand_in.requests == []


def test_auth_and_bounds_apply_to_served_models(tmp_path: Path, stand_in: OpenAIServer) -> None:
    stand_in.add(Reply(text="Hello."))
    with serving(tmp_path, auth_secret="s3cret", max_message_chars=50) as url:
        with sdk(url, "wrong") as client, pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model=STAND_IN, messages=[user("Hi")])
        with sdk(url, "s3cret") as client:
            with pytest.raises(openai.BadRequestError, match="at most 50 characters"):
                client.chat.completions.create(model=STAND_IN, messages=[user("x" * 51)])
            answer = client.chat.completions.create(model=STAND_IN, messages=[user("Hi")])
    assert answer.choices[0].message.content == "Hello."
    assert len(stand_in.requests) == 1  # neither refused request reached the model


def test_refused_fields_name_themselves(tmp_path: Path, stand_in: OpenAIServer) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        (
            {
                "tools": [WEATHER_TOOL],
                "tool_choice": {"type": "function", "function": {"name": "x"}},
            },
            "tool_choice",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"temperature": 9}, "temperature"),
    ]
    with serving(tmp_path) as url, sdk(url) as client:
        for fields, param in cases:
            with pytest.raises(openai.BadRequestError) as raised:
                client.chat.completions.create(model=STAND_IN, messages=[user("Hi")], **fields)
            assert isinstance(raised.value.body, dict)
            assert raised.value.body["param"] == param, fields
        with pytest.raises(openai.BadRequestError, match="keeps no thread"):
            client.chat.completions.create(
                model=STAND_IN, messages=[user("Hi")], extra_headers={"X-Thread-Id": "t1"}
            )
    assert stand_in.requests == []


def test_a_served_model_without_its_key_is_a_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing is sent there
    with (
        serving(tmp_path, served_models={"gpt": "openai:gpt-4o-mini"}) as url,
        sdk(url) as client,
        pytest.raises(openai.InternalServerError, match="OPENAI_API_KEY") as raised,
    ):
        client.chat.completions.create(model="gpt", messages=[user("Hi")])
    assert raised.value.status_code == 503


def test_a_served_name_that_is_an_agents_is_refused_at_start(tmp_path: Path) -> None:
    from parley.errors import ConfigurationError  # noqa: PLC0415

    settings = ServiceSettings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}",
        served_models={"helper": "local"},
    )
    with pytest.raises(ConfigurationError, match="names an agent and a served model"):
        create_app(settings, agents=[helper_agent()])
    with pytest.raises(ConfigurationError, match="unknown credential type 'nope'"):
        create_app(
            settings.model_copy(update={"served_models": ["nope:x"]}), agents=[helper_agent()]
        )


def test_serve_model_options_set_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse  # noqa: PLC0415

    from parley.service.cli import _export, add_commands  # noqa: PLC0415

    # Set through monkeypatch first, so that what `_export` writes is undone after the test.
    monkeypatch.setenv("PARLEY_SERVED_MODELS", "[]")
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    _export(parser.parse_args(["serve", "--serve-model", "local"]))
    assert ServiceSettings().served_models == ["local"]
    _export(
        parser.parse_args(["serve", "--serve-model", "q=ollama:qwen3", "--serve-model", "local"])
    )
    assert ServiceSettings().served_models == {"q": "ollama:qwen3", "local": "local"}


# -- a model given to create_app, in-process ---------------------------------------------------


async def test_a_scripted_model_answers_in_process_with_a_forced_tool(tmp_path: Path) -> None:
    def answer(request: ChatRequest) -> Any:
        assert request.tool_choice == "get_weather"
        assert request.parameters.temperature == 0.5
        return ScriptedModel.tool_call("get_weather", {"city": "Bern"}, call_id="call_sc")

    model = ScriptedModel([answer])
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    app = create_app(settings, agents=[helper_agent()], models={"scripted": model})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://localhost") as http,
            openai.AsyncOpenAI(
                base_url="http://localhost/v1", api_key="unused", http_client=http
            ) as client,
        ):
            got = await client.chat.completions.create(
                model="scripted",
                messages=[user("Weather in Bern?")],
                tools=[WEATHER_TOOL],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
                temperature=0.5,
            )
    [call] = got.choices[0].message.tool_calls or []
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_sc",
        "get_weather",
        {"city": "Bern"},
    )
    assert got.choices[0].finish_reason == "tool_calls"
    model.assert_consumed()


async def test_json_mode_is_refused_for_a_model_that_cannot_hold_to_it(tmp_path: Path) -> None:
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    app = create_app(settings, agents=[helper_agent()], models={"scripted": ScriptedModel([])})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            response = await http.post(
                "/v1/chat/completions",
                json={
                    "model": "scripted",
                    "messages": [user("JSON!")],
                    "response_format": {"type": "json_object"},
                },
            )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "response_format"


# -- the embedded model --------------------------------------------------------------------------


def test_the_embedded_local_model_is_served_with_a_clients_tool(tmp_path: Path) -> None:
    # A forced tool: llama.cpp holds the arguments to the tool's schema (a grammar), so the
    # 135M model's answer is a call of the client's tool whatever it makes of the question.
    forced = {"type": "function", "function": {"name": "get_weather"}}
    with serving(tmp_path, helper_agent(), served_models=["local"]) as url, sdk(url) as client:
        answer = client.chat.completions.create(
            model="local",
            messages=[user("What is the weather in Paris?")],
            tools=[WEATHER_TOOL],
            tool_choice=forced,
            max_tokens=40,
        )
    [call] = answer.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    assert answer.choices[0].finish_reason == "tool_calls"
    assert answer.usage.completion_tokens > 0
    assert answer.model == "local"
