"""Qwen-Agent's `examples/tir_math.py`, run with only its imports changed.

The example: a `TIRMathAgent` (tool-integrated reasoning: the model writes Python, the agent
runs it and shows the output, the model goes on) for Qwen2.5-Math, asked for the first ten
Fibonacci numbers. The example's llm config (`model_type: "qwen_dashscope"`) is kept as
written: the model is the DashScope stand-in, reached through Qwen-Agent's own environment
variables (`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`), and the programs run in parley's
sandboxed `code_interpreter`.
"""

from __future__ import annotations

from pprint import pprint
from typing import Any

import pytest

from parley.compat.qwen.agents import TIRMathAgent
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

TIR_SYSTEM = (
    "Please integrate natural language reasoning with programs to solve the problem above, "
    "and put your final answer within \\boxed{}."
)
PROGRAM = """我用程序计算。
```python
a, b = 0, 1
numbers = []
for _ in range(10):
    numbers.append(a)
    a, b = b, a + b
print(numbers)
```
"""
ANSWER = "前10个数字是 \\boxed{0, 1, 1, 2, 3, 5, 8, 13, 21, 34}。"


def init_agent_service() -> TIRMathAgent:
    llm_cfg = {
        "model": "qwen2.5-math-72b-instruct",
        "model_type": "qwen_dashscope",
        "generate_cfg": {"top_k": 1},
    }
    return TIRMathAgent(llm=llm_cfg, name="Qwen2.5-Math", system_message=TIR_SYSTEM)


def test_tir_agent_runs_the_models_program_and_lets_it_go_on_from_the_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with dashscope_stand_in(monkeypatch, [Reply(text=PROGRAM), Reply(text=ANSWER)]) as server:
        bot = init_agent_service()
        messages: list[Any] = [{"role": "user", "content": "斐波那契数列前10个数字"}]
        response: list[Any] = []
        try:
            for response in bot.run(messages):
                pprint(response, indent=2)
        finally:
            bot.function_map["code_interpreter"].close()  # type: ignore[attr-defined]
            bot.close_sync()
        server.assert_consumed()
        first, second = server.bodies()

    assert first["model"] == second["model"] == "qwen2.5-math-72b-instruct"
    assert first["parameters"]["stop"] == ["```output"]
    assert first["parameters"]["top_k"] == 1
    assert "tools" not in first["parameters"]  # the program is text, not a function call
    assert first["input"]["messages"][0] == {"role": "system", "content": TIR_SYSTEM}
    output = "```output\n[0, 1, 1, 2, 3, 5, 8, 13, 21, 34]\n```\n"
    # The model goes on from its own reply with the program's real output after it.
    # (DashScope's partial mode: the last assistant message is marked to be continued.)
    continued = second["input"]["messages"][-1]
    assert continued == {"role": "assistant", "content": PROGRAM + output, "partial": True}
    [answer] = response
    assert answer["name"] == "Qwen2.5-Math"
    assert answer["content"] == PROGRAM + output + ANSWER
