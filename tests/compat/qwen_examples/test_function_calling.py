"""Qwen-Agent's `examples/function_calling.py`, with only its imports changed.

The example asks `get_chat_model(...)` for a model, streams `llm.chat(messages, functions)`,
runs the function the model called with the arguments it wrote, and asks again with the
result. Its config is run in three forms: the example's own comment "Use your own model
service compatible with OpenAI API" (`model_server` a URL: the stand-in OpenAI server), in
both prompt formats the example offers (`fncall_prompt_type` `nous` and `qwen`); and the
config it runs (`model_server: dashscope`, a `qwen_dashscope` model) on the DashScope
stand-in, where Qwen-Agent sends the functions natively (`use_raw_api` is that type's
default).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.providers.dashscope.server import Reply as DSReply
from parley.providers.dashscope.server import ToolCall as DSToolCall
from parley.providers.openai.server import OpenAIServer, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._llm_support import (
    WEATHER_FUNCTIONS,
    nous_call,
    qwen_call,
    tools_in_prompt,
)

CALLED: list[dict[str, Any]] = []


def get_current_weather(location: str, unit: str = "fahrenheit") -> str:
    """Get the current weather in a given location (the example's function)."""
    CALLED.append({"location": location, "unit": unit})
    if "san francisco" in location.lower():
        return json.dumps({"location": "San Francisco", "temperature": "72", "unit": "fahrenheit"})
    return json.dumps({"location": location, "temperature": "unknown"})


FUNCTIONS = WEATHER_FUNCTIONS


def example(llm_cfg: dict[str, Any]) -> list[Any]:
    """The example's `test()`, its config given; the conversation at its end."""
    llm = get_chat_model(llm_cfg)
    try:
        return _example(llm)
    finally:
        llm.close_sync()  # a parley addition: the test leaves no connection open


def _example(llm: Any) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "What's the weather like in San Francisco?"}]
    responses: list[Any] = []
    for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True):  # noqa: B007
        pass
    messages.extend(responses)
    last_response = messages[-1]
    if last_response.get("function_call", None):
        available_functions = {"get_current_weather": get_current_weather}
        function_name = last_response["function_call"]["name"]
        function_to_call = available_functions[function_name]
        function_args = json.loads(last_response["function_call"]["arguments"])
        function_response = function_to_call(
            location=function_args.get("location"),
            unit=function_args.get("unit"),
        )
        messages.append({"role": "function", "name": function_name, "content": function_response})
        for responses in llm.chat(messages=messages, functions=FUNCTIONS, stream=True):  # noqa: B007
            pass
        messages.extend(responses)
    return messages


@pytest.mark.parametrize(
    ("fncall_prompt_type", "write_call"), [("nous", nous_call), ("qwen", qwen_call)]
)
def test_an_openai_compatible_server_gets_the_functions_in_the_prompt(
    fncall_prompt_type: str, write_call: Any
) -> None:
    CALLED.clear()
    arguments = {"location": "San Francisco, CA", "unit": "fahrenheit"}
    steps = [
        Reply(text=write_call("get_current_weather", arguments)),
        Reply(text="It is 72 degrees Fahrenheit in San Francisco."),
    ]
    with OpenAIServer(steps) as server:
        messages = example(
            {
                "model": "Qwen/qwen2.5-7b-instruct",
                "model_server": server.url,
                "api_key": "EMPTY",
                "generate_cfg": {"fncall_prompt_type": fncall_prompt_type},
            }
        )
        server.assert_consumed()
        first, second = server.bodies()

    # The function ran with the arguments the model wrote; the model answered from its result.
    assert [arguments] == CALLED
    call = messages[1]
    assert call["function_call"]["name"] == "get_current_weather"
    assert json.loads(call["function_call"]["arguments"]) == arguments
    assert messages[-1] == {
        **messages[-1],
        "role": "assistant",
        "content": "It is 72 degrees Fahrenheit in San Francisco.",
    }
    # No native `tools`: the functions were described in the system prompt.
    assert "tools" not in first
    assert "tools" not in second
    system = first["messages"][0]["content"]
    if fncall_prompt_type == "nous":
        assert tools_in_prompt(system) == FUNCTIONS
        assert second["messages"][-1]["role"] == "user"
        assert second["messages"][-1]["content"].startswith("<tool_response>\n{")
        assert '"temperature": "72"' in second["messages"][-1]["content"]
    else:
        assert "### get_current_weather\n\nget_current_weather: Get the current weather" in system
        assert "✿FUNCTION✿: The tool to use, should be one of [get_current_weather]" in system
        assert first["stop"] == ["✿RESULT✿", "✿RETURN✿"]
        # The call and its result continue the user's turn, as Qwen-Agent writes them.
        last = second["messages"][-1]
        assert last["role"] == "user"
        text = (
            "".join(p["text"] for p in last["content"])
            if isinstance(last["content"], list)
            else last["content"]
        )
        assert "✿FUNCTION✿: get_current_weather\n✿ARGS✿: {" in text
        assert '✿RESULT✿: {"location": "San Francisco", "temperature": "72"' in text
        assert text.endswith("✿RETURN✿")


def test_the_dashscope_config_sends_the_functions_natively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    CALLED.clear()
    steps = [
        DSReply(tool_calls=[DSToolCall("get_current_weather", {"location": "San Francisco"})]),
        DSReply(text="It is 72 degrees Fahrenheit in San Francisco."),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        messages = example(
            {
                "model": "qwen-plus-latest",
                "model_server": "dashscope",
                "api_key": os.getenv("DASHSCOPE_API_KEY"),
                "generate_cfg": {"fncall_prompt_type": "nous"},
            }
        )
        server.assert_consumed()
        first, second = (json.loads(r.body) for r in server.generation_requests())

    assert CALLED == [{"location": "San Francisco", "unit": None}]
    assert messages[-1]["content"] == "It is 72 degrees Fahrenheit in San Francisco."
    # `qwen_dashscope` uses the raw API by default in Qwen-Agent: the functions go natively.
    [tool] = first["parameters"]["tools"]
    assert tool["function"]["name"] == "get_current_weather"
    assert "<tools>" not in json.dumps(first["input"]["messages"])
    assert second["input"]["messages"][-1]["role"] == "tool"
