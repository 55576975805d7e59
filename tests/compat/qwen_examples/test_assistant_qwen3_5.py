"""Qwen-Agent's `examples/assistant_qwen3.5.py`: its config's URL points at a local stand-in.

An `Assistant` on `qwen3.5-plus` (`model_type: "qwenvl_oai"`, `use_raw_api: True`,
`extra_body: {"enable_thinking": True}`) with three MCP servers (`time`, `fetch`,
`filesystem`); its `test()` asks "What time is it?" and prints the streamed response with
`typewriter_print`. The example's `model_server` is DashScope's public compatible-mode URL:
pointing it at `parley.testing`'s OpenAI-wire server is the one llm config change (the key
is read from `DASHSCOPE_API_KEY` as written). The tools go natively (`use_raw_api`), and
`extra_body` reaches the request's top level, as the OpenAI SDK sends it.

The example starts its MCP servers with `uvx`/`npx`, which download them: offline, the same
entries start `stand_in_mcp_servers.py` (real stdio MCP servers, the official SDK's, with
the reference servers' tool names) with the interpreter instead; the filesystem one gets a
temporary folder for the example's placeholder `/path/to/allowed/files`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.openai.server import OpenAIServer, Reply, ToolCall
from tests._requires import require_module
from tests.compat.qwen_examples._example_run import typewriter_run

SERVERS = str(Path(__file__).with_name("stand_in_mcp_servers.py"))


def init_agent_service(model_server: str, allowed: Path) -> Assistant:
    llm_cfg = {
        "model": "qwen3.5-plus",
        "model_type": "qwenvl_oai",
        "model_server": model_server,  # the example: DashScope's compatible-mode URL
        "api_key": os.getenv("DASHSCOPE_API_KEY"),
        "generate_cfg": {
            "use_raw_api": True,
            "extra_body": {"enable_thinking": True},
        },
    }
    tools = [
        {
            "mcpServers": {  # the example: "uvx" / "npx -y @modelcontextprotocol/server-..."
                "time": {
                    "command": sys.executable,
                    "args": [SERVERS, "time", "--local-timezone=Asia/Shanghai"],
                },
                "fetch": {"command": sys.executable, "args": [SERVERS, "fetch"]},
                "filesystem": {
                    "command": sys.executable,
                    "args": [SERVERS, "filesystem", str(allowed)],
                },
            }
        }
    ]
    return Assistant(
        llm=llm_cfg,
        function_list=tools,
        name="Qwen3.5 Tool-calling Demo",
        description="I'm a demo using the Qwen3.5 tool calling. Welcome to add and play with "
        "your own tools!",
    )


def test_what_time_is_it_thinks_and_calls_the_time_server_natively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_module("mcp", "mcp")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-qwen35")
    call = ToolCall("time-get_current_time", {"timezone": "Asia/Shanghai"}, id="c1")
    steps = [
        Reply(reasoning="Ask the time server.", tool_calls=[call]),
        Reply(reasoning="Got it.", text="It is the time the server gave, in Shanghai."),
    ]
    with OpenAIServer(steps) as server:
        _, response_plain_text = typewriter_run(
            init_agent_service(server.url, tmp_path), "What time is it?"
        )
        server.assert_consumed()
        first, second = server.requests

    assert first.headers["authorization"] == "Bearer sk-qwen35"
    body = first.json
    assert body["model"] == "qwen3.5-plus"
    assert body["enable_thinking"] is True  # extra_body, at the top level
    offered = {tool["function"]["name"] for tool in body["tools"]}
    assert {"time-get_current_time", "fetch-fetch", "filesystem-list_directory"} <= offered
    [result] = [m for m in second.json["messages"] if m["role"] == "tool"]
    assert json.loads(result["content"])["timezone"] == "Asia/Shanghai"
    assert capsys.readouterr().out == response_plain_text
    assert "[THINK]\nAsk the time server.\n[TOOL_CALL] time-get_current_time" in (
        response_plain_text
    )
    assert response_plain_text.endswith("[ANSWER]\nIt is the time the server gave, in Shanghai.")
