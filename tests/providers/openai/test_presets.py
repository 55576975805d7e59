"""The OpenAI-compatible presets: their credentials, wire quirks and reasoning."""

from __future__ import annotations

from typing import Any

import pytest

from parley import Msg
from parley.errors import ConfigurationError
from parley.messages import ThinkingBlock, ToolCallBlock
from parley.providers.openai import (
    DashScopeCompatibleChatModel,
    DashScopeCompatibleCredential,
    DeepSeekChatModel,
    DeepSeekCredential,
    MoonshotChatModel,
    MoonshotCredential,
    OpenAICompatibleChatModel,
    OpenAICompatibleCredential,
    XAIChatModel,
    XAICredential,
)
from parley.providers.openai.server import HTTPError, OpenAIServer, Reply, ToolCall
from tests.providers._chat import HI
from tests.providers._fixtures import ModelFactory

PRESETS = [
    (DeepSeekChatModel, DeepSeekCredential, "deepseek-reasoner"),
    (MoonshotChatModel, MoonshotCredential, "kimi-k2-thinking"),
    (XAIChatModel, XAICredential, "grok-3-mini"),
    (DashScopeCompatibleChatModel, DashScopeCompatibleCredential, "qwen-plus"),
]


@pytest.mark.parametrize(("cls", "credential_cls", "name"), PRESETS)
async def test_reasoning_content_streams_as_thinking(
    server: OpenAIServer,
    make_model: ModelFactory,
    cls: type[Any],
    credential_cls: type[Any],
    name: str,
) -> None:
    server.add(Reply(reasoning="Let me think.", text="42", chunk_size=4))
    credential = credential_cls(api_key="k", base_url=server.url)
    chunks = [c async for c in make_model(cls, name, credential=credential).chat_stream(HI)]
    assert "".join(c.thinking for c in chunks[:-1]) == "Let me think."
    final = chunks[-1]
    assert isinstance(final.content[0], ThinkingBlock)
    assert (final.thinking, final.text) == ("Let me think.", "42")
    body = server.bodies()[0]
    assert body["model"] == name
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
async def test_compatible_server_reasoning_fields(
    server: OpenAIServer, make_model: ModelFactory, field: str
) -> None:
    # vLLM and OpenRouter send `reasoning`; DeepSeek-style servers `reasoning_content`.
    server.add(Reply(reasoning="hmm", text="ok", reasoning_field=field))
    model = make_model(
        OpenAICompatibleChatModel, "qwen3", credential=server.compatible_credential()
    )
    response = await model.chat(HI)
    assert (response.thinking, response.text) == ("hmm", "ok")


async def test_compatible_server_without_a_key(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    model = make_model(
        OpenAICompatibleChatModel, "llama", credential=server.compatible_credential()
    )
    await model.chat(HI, max_tokens=20, top_k=5, extra_body={"chat_template_kwargs": {"x": 1}})
    body = server.bodies()[0]
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"
    assert body["max_tokens"] == 20
    assert body["top_k"] == 5
    assert body["chat_template_kwargs"] == {"x": 1}
    assert "extra_body" not in body


def test_compatible_model_needs_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="base_url"):
        OpenAICompatibleChatModel(model="x")
    with pytest.raises(ConfigurationError, match="OPENAI_COMPATIBLE_BASE_URL"):
        OpenAICompatibleChatModel(OpenAICompatibleCredential(), "x")


async def test_compatible_server_from_the_environment(
    server: OpenAIServer, make_model: ModelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-local")
    server.add(Reply(text="ok"))
    model = make_model(OpenAICompatibleChatModel, "qwen3", credential=OpenAICompatibleCredential())
    assert (await model.chat(HI)).text == "ok"
    assert server.requests[0].headers["authorization"] == "Bearer sk-local"


async def test_deepseek_sends_thinking_back_and_switches_it(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.add(Reply(text="ok"))
    credential = DeepSeekCredential(api_key="k", base_url=server.url)
    model = make_model(DeepSeekChatModel, "deepseek-reasoner", credential=credential)
    history = [
        *HI,
        Msg.assistant(ThinkingBlock(thinking="plan"), ToolCallBlock(id="c1", name="f", input={})),
        Msg.tool_result("c1", "done", name="f"),
    ]
    await model.chat(history, enable_thinking=False, max_tokens=10)
    body = server.bodies()[0]
    assert body["messages"][1]["reasoning_content"] == "plan"
    assert body["thinking"] == {"type": "disabled"}
    assert "enable_thinking" not in body
    assert body["max_tokens"] == 10


async def test_moonshot_thinking_switch(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    credential = MoonshotCredential(api_key="k", base_url=server.url)
    await make_model(MoonshotChatModel, "kimi-k2-0905-preview", credential=credential).chat(
        HI, enable_thinking=True
    )
    assert server.bodies()[0]["thinking"] == {"type": "enabled"}


async def test_dashscope_streams_even_whole_answers(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # Qwen3's open models and QwQ answer only when streamed.
    server.add(Reply(reasoning="r", text="ok"))
    credential = DashScopeCompatibleCredential(api_key="k", base_url=server.url)
    model = make_model(DashScopeCompatibleChatModel, "qwq-plus", credential=credential)
    response = await model.chat(HI, enable_thinking=True, thinking_budget=100)
    assert (response.thinking, response.text) == ("r", "ok")
    body = server.bodies()[0]
    assert body["stream"] is True
    assert (body["enable_thinking"], body["thinking_budget"]) == (True, 100)
    # DashScope's docs ask for no reasoning back: the default formatter drops it.
    assert not model.send_thinking


async def test_dashscope_structured_output_turns_thinking_off(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    server.add(
        HTTPError(400, "tool_choice is not supported in thinking mode"),
        Reply(tool_calls=[ToolCall("generate_response", {"n": 1})]),
    )
    credential = DashScopeCompatibleCredential(api_key="k", base_url=server.url)
    model = make_model(DashScopeCompatibleChatModel, "qwen-plus", credential=credential)
    result = await model.generate_structured_output(HI, schema)
    assert (result.strategy, result.content) == ("thinking_off", {"n": 1})
    assert server.bodies()[1]["enable_thinking"] is False


async def test_xai_keeps_openai_wire_names(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.add(Reply(text="ok"))
    credential = XAICredential(api_key="k", base_url=server.url)
    await make_model(XAIChatModel, "grok-3-mini", credential=credential).chat(
        HI, reasoning_effort="high", max_tokens=5
    )
    body = server.bodies()[0]
    assert (body["reasoning_effort"], body["max_completion_tokens"]) == ("high", 5)


@pytest.mark.parametrize(
    ("credential_cls", "env", "url"),
    [
        (DeepSeekCredential, "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
        (MoonshotCredential, "MOONSHOT_API_KEY", "https://api.moonshot.ai/v1"),
        (XAICredential, "XAI_API_KEY", "https://api.x.ai/v1"),
        (
            DashScopeCompatibleCredential,
            "DASHSCOPE_API_KEY",
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
        ),
    ],
)
def test_preset_credentials_read_their_environment(
    monkeypatch: pytest.MonkeyPatch, credential_cls: type[Any], env: str, url: str
) -> None:
    monkeypatch.setenv(env, "from-env")
    credential = credential_cls()
    assert credential.key() == "from-env"
    assert credential.endpoint() == url
