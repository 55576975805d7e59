"""Qwen-Agent's `examples/llm_quick_chat_oai.py`, with only its imports changed.

The example chats through `llm.quick_chat_oai` in OpenAI's message format: a question, then
a request with `tools` that the model answers with a call, then the call's (simulated)
result as a `tool` message. Its config (`model_server: dashscope`, a `qwen_dashscope`
model) runs on the DashScope stand-in, where Qwen-Agent sends the tools natively; the same
code with an OpenAI-compatible `model_server` gets them in the prompt.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.providers.dashscope.server import Reply as DSReply
from parley.providers.dashscope.server import ToolCall as DSToolCall
from parley.providers.openai.server import OpenAIServer, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._llm_support import nous_call, tools_in_prompt

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "image_gen",
            "description": "AI painting (image generation) service, input text description and "
            "image resolution, and return the URL of the image drawn based on the text "
            "information.",
            "parameters": {
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "Detailed description of the desired content of the "
                        "generated image, in English.",
                    }
                },
                "required": ["prompt"],
            },
        },
    }
]
PICTURE = "![fig-001](https://seopic.699pic.com/photo/60098/4947.jpg_wh1200.jpg)"


def example(llm_cfg: dict[str, Any]) -> list[Any]:
    """The example's `test()`, its config given; the OpenAI-style messages at its end."""
    llm = get_chat_model(llm_cfg)
    try:
        messages: list[Any] = [{"role": "user", "content": "你是？"}]
        response = llm.quick_chat_oai(messages)
        for x in response:  # noqa: B007
            pass
        messages.append(x["choices"][0]["message"])
        messages.append({"role": "user", "content": "画个可爱小猫"})
        response = llm.quick_chat_oai(messages, tools=TOOLS)
        for x in response:  # noqa: B007
            pass
        messages.append(x["choices"][0]["message"])
        messages.append({"role": "tool", "name": "image_gen", "content": PICTURE})
        response = llm.quick_chat_oai(messages, tools=TOOLS)
        for x in response:  # noqa: B007
            pass
        messages.append(x["choices"][0]["message"])
        return messages
    finally:
        llm.close_sync()


def check_conversation(messages: list[Any]) -> None:
    assert messages[1]["content"] == "我是通义千问。"
    call = messages[3]["tool_calls"][0]
    assert call["function"]["name"] == "image_gen"
    assert json.loads(call["function"]["arguments"]) == {"prompt": "a cute kitten"}
    assert messages[-1]["content"] == f"画好了：{PICTURE}"


def test_the_dashscope_config_sends_the_tools_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [
        DSReply(text="我是通义千问。"),
        DSReply(tool_calls=[DSToolCall("image_gen", {"prompt": "a cute kitten"}, id="call_1")]),
        DSReply(text=f"画好了：{PICTURE}"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        messages = example({"model": "qwen-max", "model_server": "dashscope"})
        server.assert_consumed()
        first, second, third = (json.loads(r.body) for r in server.generation_requests())
    check_conversation(messages)
    assert first["model"] == "qwen-max"
    assert "tools" not in first["parameters"]
    assert [t["function"]["name"] for t in second["parameters"]["tools"]] == ["image_gen"]
    # The tool's result went back after the call it answers.
    roles = [m["role"] for m in third["input"]["messages"]]
    assert roles[-2:] == ["assistant", "tool"]
    assert third["input"]["messages"][-1]["content"] == PICTURE


def test_an_openai_compatible_server_gets_the_tools_in_the_prompt() -> None:
    steps = [
        Reply(text="我是通义千问。"),
        Reply(text=nous_call("image_gen", {"prompt": "a cute kitten"})),
        Reply(text=f"画好了：{PICTURE}"),
    ]
    with OpenAIServer(steps) as server:
        messages = example({"model": "qwen-max", "model_server": server.url, "api_key": "EMPTY"})
        server.assert_consumed()
        _, second, third = server.bodies()
    check_conversation(messages)
    assert "tools" not in second
    assert tools_in_prompt(second["messages"][0]["content"]) == [TOOLS[0]["function"]]
    assert third["messages"][-1]["content"] == f"<tool_response>\n{PICTURE}\n</tool_response>"
