"""Qwen-Agent's `examples/assistant_mcp_sqlite_bot.py`, with only its imports changed.

An `Assistant` with an `mcpServers` entry for SQLite is asked how many tables the database
has, a PDF attached to the question (the example's `resource/poem.pdf`). The example's
config is kept as it is. Its llm (`{'model': 'qwen-max'}`, a `qwen_dashscope` model) is the
DashScope stand-in, reached through Qwen-Agent's own environment variables
(`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`); as in Qwen-Agent, the functions go natively. Its
MCP server is started with `uvx mcp-server-sqlite`, which downloads it: offline, the `uvx` on
the test's `PATH` is a small script that starts `sqlite_mcp_server.py` instead, a real stdio
MCP server (the official SDK's) with the same tools over real SQLite. The PDF is a small
local one.
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import sys
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.providers.dashscope.server import Reply, ToolCall
from tests._requires import require_module
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import message_text, text_only
from tests.tools._hostile import text_pdf

SERVER = Path(__file__).with_name("sqlite_mcp_server.py")
POEM = [["Quiet Night Thought", "Moonlight before my bed, like frost upon the ground."]]


def install_uvx(bin_dir: Path) -> Path:
    """A `uvx` that runs `uvx mcp-server-sqlite ARGS` as the local server with ARGS."""
    bin_dir.mkdir()
    uvx = bin_dir / "uvx"
    uvx.write_text(
        "#!/bin/sh\n"
        '[ "$1" = mcp-server-sqlite ] || { echo "uvx stand-in: unknown tool $1" >&2; exit 2; }\n'
        f'shift\nexec {shlex.quote(sys.executable)} {shlex.quote(str(SERVER))} "$@"\n'
    )
    uvx.chmod(0o755)
    return bin_dir


def test_assistant_mcp_sqlite_bot_lists_the_tables_through_the_mcp_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_module("mcp", "mcp")
    require_module("pypdf", "tools")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bin_dir = install_uvx(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with sqlite3.connect(tmp_path / "test.db") as db:
        db.execute("CREATE TABLE students (name TEXT, age INTEGER)")
        db.execute("CREATE TABLE teachers (name TEXT)")
    file = str(text_pdf(tmp_path / "poem.pdf", POEM))
    steps = [
        Reply(tool_calls=[ToolCall("sqlite-list_tables", {})]),
        Reply(text="数据库里有2张表：students 和 teachers。"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        # The example's init_agent_service() and test().
        llm_cfg = {"model": "qwen-max"}
        system = "你扮演一个数据库助手，你具有查询数据库的能力"
        tools = [
            {
                "mcpServers": {
                    "sqlite": {
                        "command": "uvx",
                        "args": ["mcp-server-sqlite", "--db-path", "test.db"],
                    }
                }
            }
        ]
        bot = Assistant(
            llm=llm_cfg,
            name="数据库助手",
            description="数据库查询",
            system_message=system,
            function_list=tools,
        )
        query = "数据库里有几张表"
        messages = [{"role": "user", "content": [{"text": query}, {"file": file}]}]
        try:
            responses = list(bot.run(messages))
        finally:
            bot.close_sync()
        server.assert_consumed()
        first, second = (json.loads(r.body) for r in server.generation_requests())
    final = responses[-1]
    assert [m["role"] for m in final] == ["assistant", "function", "assistant"]
    assert {m["name"] for m in final} == {"数据库助手", "sqlite-list_tables"}
    # The MCP server's real answer, from the database.
    assert "students" in final[1]["content"]
    assert "teachers" in final[1]["content"]
    assert final[-1]["content"] == "数据库里有2张表：students 和 teachers。"
    # The model was offered the server's tools natively under Qwen-Agent's names, and read
    # the attached poem as knowledge; the question reached it as text.
    assert first["model"] == "qwen-max"
    offered = {t["function"]["name"] for t in first["parameters"]["tools"]}
    assert {"sqlite-list_tables", "sqlite-read_query", "sqlite-describe_table"} <= offered
    sent = first["input"]["messages"]
    assert message_text(sent[0]).startswith(system)
    assert "Moonlight before my bed" in message_text(sent[0])
    assert message_text(sent[-1]) == query
    assert text_only(sent[-1])  # the file is for retrieval, not the model (as in Qwen-Agent)
    # The MCP server's answer went back to the model as the call's `tool` result.
    *_, call, result = second["input"]["messages"]
    assert call["tool_calls"][0]["function"]["name"] == "sqlite-list_tables"
    assert result["role"] == "tool"
    assert "teachers" in result["content"]
