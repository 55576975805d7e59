"""Qwen-Agent's `examples/react_data_analysis.py`, run with only its imports changed.

The example: a `ReActChat` with `code_interpreter`, asked to look at a CSV file of stock
prices attached to the message and draw a line chart. The example's llm config (`qwen-max`
with `model_server: "dashscope"`, DashScope's native API as Qwen-Agent reads it) is kept as
written, its `api_key` from `DASHSCOPE_API_KEY` as the example reads it: the model is the
DashScope stand-in, reached through Qwen-Agent's own environment variables.
`code_interpreter` is parley's sandboxed interpreter, which really runs the model's code on
the file: the user's attached file (under the working directory, as the example's
`resource/` is) is copied into the conversation's directory, as Qwen-Agent copies it.
"""

from __future__ import annotations

import os
from pathlib import Path
from pprint import pprint
from typing import Any

import pytest

from parley.compat.qwen.agents import ReActChat
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

PRICES = """,Date,Open,High,Low,Close
0,2020/1/3,74.13,74.31,73.6,73.91
1,2020/1/4,73.91,74.2,73.68,74.08
2,2020/1/5,74.08,74.29,73.82,73.93
"""
QUERY = (
    "pd.head the file first and then help me draw a line chart to show the changes in stock prices"
)
HEAD = """Look at the file first.
Action: code_interpreter
Action Input: ```py
import csv
rows = list(csv.DictReader(open("stock_prices.csv")))
print(len(rows), rows[0]["Date"], rows[-1]["Close"])
```
"""
PLOT = """Now the chart.
Action: code_interpreter
Action Input: ```py
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([r["Date"] for r in rows], [float(r["Close"]) for r in rows])
plt.savefig("prices.png")
print("saved")
```
"""


def init_agent_service() -> ReActChat:
    llm_cfg = {
        "model": "qwen-max",
        "model_server": "dashscope",
        "api_key": os.getenv("DASHSCOPE_API_KEY"),
    }
    tools = ["code_interpreter"]
    return ReActChat(
        llm=llm_cfg,
        name="code interpreter",
        description="This agent can run code to solve the problem",
        function_list=tools,
    )


def test_react_chat_reads_the_csv_and_draws_the_chart_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the user's file is under the working directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    resource = tmp_path / "resource"
    resource.mkdir()
    file = resource / "stock_prices.csv"
    file.write_text(PRICES)
    steps = [
        Reply(text=HEAD),
        Reply(text=PLOT),
        Reply(text="I now know the final answer\nFinal Answer: The chart is in prices.png."),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = init_agent_service()
        interpreter = bot.function_map["code_interpreter"]
        work_dir = Path(interpreter.work_dir())  # type: ignore[attr-defined]
        try:
            messages: list[Any] = [
                {"role": "user", "content": [{"text": QUERY}, {"file": str(file)}]}
            ]
            response: list[Any] = []
            for response in bot.run(messages):
                pprint(response, indent=2)
        finally:
            interpreter.close()  # type: ignore[attr-defined]
            bot.close_sync()
        server.assert_consumed()
        first, second, third = server.bodies()
        keys = {r.headers.get("authorization") for r in server.generation_requests()}

    assert keys == {"Bearer sk-test"}  # the example's api_key, from the environment
    # No function calling: the tool is described in the prompt, the file by name.
    for body in (first, second, third):
        assert body["model"] == "qwen-max"
        assert "tools" not in body["parameters"]
        assert body["parameters"]["stop"] == ["Observation:", "Observation:\n"]
    prompt = first["input"]["messages"][-1]["content"]
    assert "code_interpreter: the code_interpreter tool." in prompt
    assert f"Question: [file](stock_prices.csv)\n{QUERY}\nThought: " in prompt
    # The code really ran: what it printed, and the chart it saved.
    assert second["input"]["messages"][-1]["content"].endswith(
        "Observation: stdout:\n\n```\n3 2020/1/3 73.93\n```\nThought: "
    )
    observed = third["input"]["messages"][-1]["content"]
    assert "stdout:\n\n```\nsaved\n```" in observed
    assert "files written in the work directory: prices.png" in observed
    assert (work_dir / "prices.png").read_bytes().startswith(b"\x89PNG")
    # The user's file was copied in; the original is untouched.
    assert (work_dir / "stock_prices.csv").read_text() == file.read_text() == PRICES
    [answer] = response
    assert answer["name"] == "code interpreter"
    assert answer["content"].startswith(
        "Thought: Look at the file first.\nAction: code_interpreter"
    )
    assert answer["content"].endswith("Final Answer: The chart is in prices.png.")
