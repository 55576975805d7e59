"""Qwen-Agent's `examples/assistant_qwq.py`, run with only its imports changed.

The example: an `Assistant` on the reasoning model QwQ-32B, tools through the prompt
(`fncall_prompt_type: "nous"`), `image_gen`; its `test()` prints the streamed response with
`typewriter_print`. The example's llm config (`model_type: "qwen_dashscope"`) is kept as
written: the model is the DashScope stand-in, reached through Qwen-Agent's own environment
variables. With `qwen_dashscope` and no `use_raw_api` in `generate_cfg`, Qwen-Agent sends
functions natively (`fncall_prompt_type` then goes unused), so the stand-in answers with
DashScope tool calls. `image_gen` (a network tool) stands in locally.
"""

# The example's Chinese text keeps its full-width punctuation.
# ruff: noqa: RUF001

from __future__ import annotations

import json

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply, ToolCall
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._example_run import typewriter_run
from tests.compat.qwen_examples._image_gen import stand_in_image_gen

QUERY = "画一只猫，再画一只狗，最后画他们一起玩的画面，给我三张图"


@pytest.fixture(autouse=True)
def _image_gen(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in_image_gen(monkeypatch)


def init_agent_service() -> Assistant:
    llm_cfg = {
        "model": "qwq-32b",
        "model_type": "qwen_dashscope",
        "generate_cfg": {"fncall_prompt_type": "nous"},
    }
    tools = ["image_gen"]
    return Assistant(
        llm=llm_cfg,
        function_list=tools,
        name="QwQ-32B Tool-calling Demo",
        description="I'm a demo using the QwQ-32B tool calling. Welcome to add and play with "
        "your own tools!",
    )


def call(prompt: str) -> list[ToolCall]:
    return [ToolCall("image_gen", json.dumps({"prompt": prompt}, ensure_ascii=False))]


def test_typewriter_print_shows_the_streamed_thinking_calls_results_and_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        Reply(reasoning="先画猫。", tool_calls=call("猫")),
        Reply(reasoning="再画狗。", tool_calls=call("狗")),
        Reply(text="三张图都画好了。"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        _, response_plain_text = typewriter_run(init_agent_service(), QUERY)
        server.assert_consumed()
        first, second, _ = server.bodies()

    # qwen_dashscope: the function goes natively, not in the system prompt.
    assert [t["function"]["name"] for t in first["parameters"]["tools"]] == ["image_gen"]
    assert all("<tools>" not in m["content"] for m in first["input"]["messages"])
    assert first["model"] == "qwq-32b"
    # The call and its result went back to the model as DashScope messages.
    call_turn, result = second["input"]["messages"][-2:]
    assert call_turn["tool_calls"][0]["function"]["name"] == "image_gen"
    assert (result["role"], result["content"]) == ("tool", "https://images.test/猫.png")
    printed = capsys.readouterr().out
    # Printed piece by piece as the response grew, it reads as the whole rendering once.
    assert printed == response_plain_text
    assert response_plain_text == (
        "[THINK]\n先画猫。\n"
        '[TOOL_CALL] image_gen\n{"prompt": "猫"}\n'
        "[TOOL_RESPONSE] image_gen\nhttps://images.test/猫.png\n"
        "[THINK]\n再画狗。\n"
        '[TOOL_CALL] image_gen\n{"prompt": "狗"}\n'
        "[TOOL_RESPONSE] image_gen\nhttps://images.test/狗.png\n"
        "[ANSWER]\n三张图都画好了。"
    )
