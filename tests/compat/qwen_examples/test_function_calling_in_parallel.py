"""Qwen-Agent's `examples/function_calling_in_parallel.py`, with only its imports changed.

The example's config (an OpenAI-compatible `model_server`, the `qwen` prompt format) points
at the stand-in OpenAI server (its one change: `model_server`; the key is read from
`$DASHSCOPE_API_KEY` as the example reads it); each call asks for `parallel_function_calls` and a
`max_input_tokens` bound. The model writes three calls at once, in the `qwen` format; the
example runs each and asks again with the three results in call order.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.providers.openai.server import OpenAIServer, Reply
from tests.compat.qwen_examples._llm_support import WEATHER_FUNCTIONS, qwen_call

CALLED: list[str] = []
TEMPERATURES = {"tokyo": ("Tokyo", "10"), "san francisco": ("San Francisco", "72")}


def get_current_weather(location: str, unit: str = "fahrenheit") -> str:
    """The example's function."""
    CALLED.append(location)
    for key, (city, degrees) in TEMPERATURES.items():
        if key in location.lower():
            return json.dumps({"location": city, "temperature": degrees})
    if "paris" in location.lower():
        return json.dumps({"location": "Paris", "temperature": "22", "unit": "celsius"})
    return json.dumps({"location": location, "temperature": "unknown"})


FUNCTIONS = WEATHER_FUNCTIONS


def example(llm: Any) -> list[Any]:
    """The example's `test()` on the model its config made."""
    messages: list[Any] = [
        {
            "role": "user",
            "content": "What's the weather like in San Francisco? And what about Tokyo? Paris?",
        }
    ]
    responses: list[Any] = []
    for responses in llm.chat(  # noqa: B007
        messages=messages,
        functions=FUNCTIONS,
        stream=True,
        extra_generate_cfg={"max_input_tokens": 6500, "parallel_function_calls": True},
    ):
        pass
    messages.extend(responses)
    fncall_msgs = [rsp for rsp in responses if rsp.get("function_call", None)]
    if fncall_msgs:
        available_functions = {"get_current_weather": get_current_weather}
        for msg in fncall_msgs:
            function_name = msg["function_call"]["name"]
            function_to_call = available_functions[function_name]
            function_args = json.loads(msg["function_call"]["arguments"])
            function_response = function_to_call(
                location=function_args.get("location"),
                unit=function_args.get("unit"),
            )
            messages.append(
                {"role": "function", "name": function_name, "content": function_response}
            )
        for responses in llm.chat(  # noqa: B007
            messages=messages,
            functions=FUNCTIONS,
            extra_generate_cfg={"max_input_tokens": 6500, "parallel_function_calls": True},
            stream=True,
        ):
            pass
        messages.extend(responses)
    return messages


def test_three_calls_at_once_run_and_their_results_go_back_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
    CALLED.clear()
    cities = ["San Francisco, CA", "Tokyo", "Paris"]
    calls = "".join(qwen_call("get_current_weather", {"location": c}) for c in cities)
    steps = [
        Reply(text=calls),
        Reply(text="San Francisco 72°F, Tokyo 10°C, Paris 22°C."),
    ]
    with OpenAIServer(steps) as server:
        llm = get_chat_model(
            {
                "model": "qwen-plus-latest",
                "model_server": server.url,  # the example's DashScope compatible-mode URL
                "api_key": os.getenv("DASHSCOPE_API_KEY"),
                "generate_cfg": {"fncall_prompt_type": "qwen"},
            }
        )
        try:
            messages = example(llm)
        finally:
            llm.close_sync()
        server.assert_consumed()
        first, second = server.bodies()
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"

    # Each call ran, with the arguments the model wrote, in the order it wrote them.
    assert cities == CALLED
    calls_made = [m for m in messages if m.get("function_call")]
    assert [json.loads(m["function_call"]["arguments"])["location"] for m in calls_made] == cities
    assert messages[-1]["content"] == "San Francisco 72°F, Tokyo 10°C, Paris 22°C."
    # No native tools; the prompt shows the parallel form of the `qwen` format.
    assert "tools" not in first
    assert "parallel_tool_calls" not in first
    system = first["messages"][0]["content"]
    assert "## Insert the following command in your reply when you need to call N tools" in system
    assert "### get_current_weather" in system
    assert first["stop"] == ["✿RESULT✿", "✿RETURN✿"]
    # The results follow the three calls, in their order, then the return marker.
    last = second["messages"][-1]
    text = (
        last["content"]
        if isinstance(last["content"], str)
        else "".join(p["text"] for p in last["content"])
    )
    assert text.count("✿FUNCTION✿: get_current_weather") == 3
    results = [line for line in text.splitlines() if line.startswith("✿RESULT✿")]
    assert [json.loads(r.removeprefix("✿RESULT✿: "))["location"] for r in results] == [
        "San Francisco",
        "Tokyo",
        "Paris",
    ]
    assert text.endswith("✿RETURN✿")


def test_without_parallel_calls_only_the_first_call_is_kept() -> None:
    calls = qwen_call("get_current_weather", {"location": "Tokyo"}) + qwen_call(
        "get_current_weather", {"location": "Paris"}
    )
    with OpenAIServer([Reply(text=calls)]) as server:
        llm = get_chat_model(
            {
                "model": "qwen-plus-latest",
                "model_server": server.url,
                "generate_cfg": {"fncall_prompt_type": "qwen"},
            }
        )
        try:
            response = llm.chat(
                [{"role": "user", "content": "Tokyo? Paris?"}], functions=FUNCTIONS, stream=False
            )
        finally:
            llm.close_sync()
        [body] = server.bodies()
    assert [m["function_call"]["arguments"] for m in response] == ['{"location": "Tokyo"}']
    assert "## When you need to call a tool" in body["messages"][0]["content"]
