"""Qwen-Agent's `examples/assistant_qwen3_coder.py`, run with its imports and MCP commands
changed.

An `Assistant` on `qwen3-coder-480b-a35b-instruct` (`qwen_dashscope`, `use_raw_api: True`,
`max_input_tokens: 200000`) with three MCP servers (`time`, `fetch`, `filesystem` on
`~/Desktop/`) and `image_gen`, asked one of its GUI's suggestions: make an Angry Birds game
and save it on the desktop as an HTML file. The llm config is kept as written: DashScope is
the stand-in, reached through Qwen-Agent's environment variables; the tools go natively
(`use_raw_api`), so the stand-in answers with native tool calls.

The example starts its MCP servers with `uvx`/`npx`, which download them: offline, the same
entries start `stand_in_mcp_servers.py` (real stdio MCP servers, the official SDK's, with
the reference servers' tool names) with the interpreter instead, the filesystem one on the
example's own `~/Desktop/` (HOME set to a temporary folder). `image_gen` (a network tool)
stands in locally. Those are the changes beyond the imports.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.dashscope.server import Reply, ToolCall
from tests._requires import require_module
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._example_run import typewriter_run
from tests.compat.qwen_examples._image_gen import stand_in_image_gen

SERVERS = str(Path(__file__).with_name("stand_in_mcp_servers.py"))
QUERY = (
    "Please create a simple Angry Birds game, save it on the desktop as an HTML file, and open "
    "it to play directly."
)
GAME = "<!DOCTYPE html><html><body><canvas id='birds'></canvas></body></html>"


def init_agent_service() -> Assistant:
    llm_cfg = {
        # Use the model service provided by DashScope:
        "model": "qwen3-coder-480b-a35b-instruct",
        "model_type": "qwen_dashscope",
        "generate_cfg": {
            # Using the API's native tool call interface
            "use_raw_api": True,
            "max_input_tokens": 200000,
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
                    "args": [SERVERS, "filesystem", "~/Desktop/"],
                },
            }
        },
        "image_gen",
    ]
    return Assistant(
        llm=llm_cfg,
        function_list=tools,
        name="Qwen3-Coder Tool-calling Demo",
        description="I'm a demo using the Qwen3-Coder tool calling. Welcome to add and play with "
        "your own tools!",
    )


def test_the_coder_writes_the_game_onto_the_desktop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_module("mcp", "mcp")
    stand_in_image_gen(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "Desktop").mkdir()
    write = {"path": "~/Desktop/angry_birds.html", "content": GAME}
    steps = [
        Reply(tool_calls=[ToolCall("filesystem-write_file", write, id="c1")]),
        Reply(text="Saved angry_birds.html on your desktop: open it to play."),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        response, response_plain_text = typewriter_run(init_agent_service(), QUERY)
        server.assert_consumed()
        first, second = server.bodies()

    offered = {tool["function"]["name"] for tool in first["parameters"]["tools"]}
    assert {
        "time-get_current_time",
        "fetch-fetch",
        "filesystem-write_file",
        "filesystem-list_directory",
        "image_gen",
    } <= offered
    assert first["model"] == "qwen3-coder-480b-a35b-instruct"
    # The filesystem server really wrote the game where the example says.
    assert (tmp_path / "Desktop" / "angry_birds.html").read_text() == GAME
    [result] = [m for m in second["input"]["messages"] if m["role"] == "tool"]
    assert result["content"] == "Successfully wrote to ~/Desktop/angry_birds.html"
    assert [m["role"] for m in response] == ["assistant", "function", "assistant"]
    assert capsys.readouterr().out == response_plain_text
    assert response_plain_text.endswith(
        "[ANSWER]\nSaved angry_birds.html on your desktop: open it to play."
    )
