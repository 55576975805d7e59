"""Qwen-Agent's `examples/assistant_qwen3.py`, run with its imports and MCP commands changed.

An `Assistant` on `qwen3-235b-a22b` (`model_type: "qwen_dashscope"`) with two MCP servers
(`time`, `fetch`) and `code_interpreter`; its `test()` asks "What time is it?" and prints
the streamed response with `typewriter_print`. The llm config is kept as written: DashScope
is the stand-in, reached through Qwen-Agent's environment variables. `qwen_dashscope` sets
`use_raw_api` (Qwen-Agent's `BaseChatModel.__init__`), so the tools go natively in
`parameters.tools` and the stand-in answers with a native tool call.

The example starts its MCP servers with `uvx mcp-server-time ...` / `uvx mcp-server-fetch`,
which download them: offline, the same entries start `stand_in_mcp_servers.py` (real stdio
MCP servers, the official SDK's, with the same tool names) with the interpreter instead;
that is the one change beyond the imports.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply, ToolCall
from tests._requires import require_module
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._example_run import typewriter_run

SERVERS = str(Path(__file__).with_name("stand_in_mcp_servers.py"))


def init_agent_service() -> Assistant:
    llm_cfg = {
        # Use the model service provided by DashScope:
        "model": "qwen3-235b-a22b",
        "model_type": "qwen_dashscope",
    }
    tools = [
        {
            "mcpServers": {  # the example: "command": "uvx", "args": ["mcp-server-time", ...]
                "time": {
                    "command": sys.executable,
                    "args": [SERVERS, "time", "--local-timezone=Asia/Shanghai"],
                },
                "fetch": {"command": sys.executable, "args": [SERVERS, "fetch"]},
            }
        },
        "code_interpreter",  # Built-in tools
    ]
    return Assistant(
        llm=llm_cfg,
        function_list=tools,
        name="Qwen3 Tool-calling Demo",
        description="I'm a demo using the Qwen3 tool calling. Welcome to add and play with your "
        "own tools!",
    )


def test_what_time_is_it_goes_through_the_time_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_module("mcp", "mcp")
    steps = [
        Reply(
            reasoning="I should ask the time server.",
            tool_calls=[ToolCall("time-get_current_time", {"timezone": "Asia/Shanghai"}, id="c1")],
        ),
        Reply(text="It is now the time the server gave, in Shanghai."),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        response, response_plain_text = typewriter_run(init_agent_service(), "What time is it?")
        server.assert_consumed()
        first, second = server.bodies()

    offered = {tool["function"]["name"] for tool in first["parameters"]["tools"]}
    assert {
        "time-get_current_time",
        "time-convert_time",
        "fetch-fetch",
        "code_interpreter",
    } <= offered
    assert "<tools>" not in json.dumps(first["input"]["messages"])  # native, not the prompt
    assert first["model"] == "qwen3-235b-a22b"
    # The time server's real answer went back to the model as the tool's result.
    [result] = [m for m in second["input"]["messages"] if m["role"] == "tool"]
    told = json.loads(result["content"])
    assert told["timezone"] == "Asia/Shanghai"
    assert told["datetime"].endswith("+08:00")
    assert [m["role"] for m in response] == ["assistant", "assistant", "function", "assistant"]
    printed = capsys.readouterr().out
    assert printed == response_plain_text
    assert "[TOOL_CALL] time-get_current_time" in printed
    assert response_plain_text.endswith(
        "[ANSWER]\nIt is now the time the server gave, in Shanghai."
    )
