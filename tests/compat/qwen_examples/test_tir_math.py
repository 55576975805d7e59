"""Qwen-Agent's `examples/tir_math.py`, run with only its imports changed.

The example: a `TIRMathAgent` (tool-integrated reasoning: the model writes Python, the agent
runs it and shows the output, the model goes on) for Qwen2.5-Math, asked for the first ten
Fibonacci numbers. Here the model is a `parley.testing` OpenAI-wire server: the example's
llm config names DashScope (`model_type: "qwen_dashscope"`); `model_server` (the stand-in's
URL) takes its place, and the programs run in parley's sandboxed `code_interpreter`.
"""

from __future__ import annotations

from pprint import pprint
from typing import Any

from parley.compat.qwen.agents import TIRMathAgent
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.testing.openai_server import OpenAIServer, Reply

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


def init_agent_service(server: OpenAIServer) -> TIRMathAgent:
    llm_cfg = {
        "model": "qwen2.5-math-72b-instruct",
        "model_server": server.url,  # the example: "model_type": "qwen_dashscope"
        "api_key": "EMPTY",
        "generate_cfg": {"top_k": 1},
    }
    return TIRMathAgent(llm=llm_cfg, name="Qwen2.5-Math", system_message=TIR_SYSTEM)


def test_tir_agent_runs_the_models_program_and_lets_it_go_on_from_the_output() -> None:
    with OpenAIServer([Reply(text=PROGRAM), Reply(text=ANSWER)]) as server:
        bot = init_agent_service(server)
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

    assert first["stop"] == ["```output"]
    assert "tools" not in first  # the program is text in the reply, not a function call
    assert first["messages"][0] == {"role": "system", "content": TIR_SYSTEM}
    assert first["top_k"] == 1
    output = "```output\n[0, 1, 1, 2, 3, 5, 8, 13, 21, 34]\n```\n"
    # The model goes on from its own reply with the program's real output after it.
    continued = second["messages"][-1]
    assert (continued["role"], continued["content"]) == ("assistant", PROGRAM + output)
    [answer] = response
    assert answer["name"] == "Qwen2.5-Math"
    assert answer["content"] == PROGRAM + output + ANSWER
