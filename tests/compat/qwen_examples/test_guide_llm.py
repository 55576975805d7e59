"""The guide's LLM chapter (`qwen-agent-docs/.../core_moduls/llm.md`), with imports changed.

1.1, "Direct External Call": `get_chat_model(llm_cfg)` and a streamed `llm.chat(messages,
functions)`, in the guide's config (DashScope, on its stand-in: Qwen-Agent's `qwen_dashscope`
sends functions natively) and in its commented "your own model service compatible with
OpenAI API" (the stand-in OpenAI server: the functions in the prompt, no `tools`).
2, "LLM Development": a model registered with `register_llm` that implements only the
streaming and non-streaming interfaces, inheriting `BaseFnCallModel` for function calls, is
built by `get_chat_model` from its `model_type` and calls a function through its prompt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from parley.compat.qwen.llm import LLM_REGISTRY, get_chat_model, register_llm
from parley.compat.qwen.llm.function_calling import BaseFnCallModel
from parley.compat.qwen.llm.schema import ASSISTANT, Message
from parley.providers.dashscope.server import Reply as DSReply
from parley.providers.dashscope.server import ToolCall as DSToolCall
from parley.providers.openai.server import OpenAIServer, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._llm_support import WEATHER_FUNCTIONS, nous_call, tools_in_prompt

MESSAGES = [{"role": "user", "content": "What's the weather like in San Francisco?"}]
FUNCTIONS = WEATHER_FUNCTIONS


def stream(llm_cfg: dict[str, Any]) -> list[Any]:
    """The guide's snippet: the last streamed response."""
    llm = get_chat_model(llm_cfg)
    try:
        responses: list[Any] = []
        for responses in llm.chat(messages=MESSAGES, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        return responses
    finally:
        llm.close_sync()


def test_the_guides_dashscope_config(monkeypatch: pytest.MonkeyPatch) -> None:
    call = DSToolCall("get_current_weather", {"location": "San Francisco, CA"}, id="c1")
    with dashscope_stand_in(monkeypatch, [DSReply(tool_calls=[call])]) as server:
        responses = stream(
            {"model": "qwen-max", "model_server": "dashscope", "generate_cfg": {"top_p": 0.8}}
        )
        [body] = (json.loads(r.body) for r in server.generation_requests())
    assert responses[-1]["function_call"]["name"] == "get_current_weather"
    assert json.loads(responses[-1]["function_call"]["arguments"]) == {
        "location": "San Francisco, CA"
    }
    assert body["parameters"]["top_p"] == 0.8
    assert [t["function"]["name"] for t in body["parameters"]["tools"]] == ["get_current_weather"]


def test_the_guides_openai_compatible_config() -> None:
    reply = Reply(text=nous_call("get_current_weather", {"location": "San Francisco, CA"}))
    with OpenAIServer([reply]) as server:
        responses = stream(
            {"model": "Qwen", "model_server": server.url, "generate_cfg": {"top_p": 0.8}}
        )
        [body] = server.bodies()
    assert responses[-1]["function_call"]["name"] == "get_current_weather"
    assert "tools" not in body
    assert tools_in_prompt(body["messages"][0]["content"]) == FUNCTIONS
    assert body["top_p"] == 0.8


class PlainTextLLM(BaseFnCallModel):
    """A registered model with no function calling of its own (the guide's section 2)."""

    prompts: list[list[Message]] = []

    def _chat_no_stream(
        self, messages: list[Message], generate_cfg: dict[str, Any]
    ) -> list[Message]:
        self.prompts.append(messages)
        if messages[-1].role == "user" and "<tool_response>" in str(messages[-1].content):
            return [Message(ASSISTANT, "It is 72 degrees in San Francisco.")]
        return [Message(ASSISTANT, nous_call("get_current_weather", {"location": "San Francisco"}))]

    def _chat_stream(
        self, messages: list[Message], delta_stream: bool, generate_cfg: dict[str, Any]
    ) -> Iterator[list[Message]]:
        # "If the LLM itself does not support streaming generation, the non-streaming
        # results can be wrapped into a generator for return."
        yield self._chat_no_stream(messages, generate_cfg)


def test_a_registered_llm_calls_functions_through_its_prompt() -> None:
    register_llm("guide_plain_text")(PlainTextLLM)
    PlainTextLLM.prompts.clear()
    try:
        llm = get_chat_model({"model_type": "guide_plain_text", "model": "mine"})
        assert isinstance(llm, PlainTextLLM)
        *_, responses = llm.chat(messages=MESSAGES, functions=FUNCTIONS, stream=True)
        [call] = responses
        assert call["function_call"]["name"] == "get_current_weather"
        history = [
            *MESSAGES,
            *responses,
            {"role": "function", "name": "get_current_weather", "content": '{"temperature": 72}'},
        ]
        answer = llm.chat(messages=history, functions=FUNCTIONS, stream=False)
    finally:
        LLM_REGISTRY.pop("guide_plain_text")
    assert answer[-1]["content"] == "It is 72 degrees in San Francisco."
    first, second = PlainTextLLM.prompts
    system = first[0].content
    text = system if isinstance(system, str) else "".join(i.text or "" for i in system)
    assert tools_in_prompt(text) == FUNCTIONS
    assert "<tool_response>" in str(second[-1].content)
