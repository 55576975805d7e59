"""Qwen-Agent's `examples/assistant_mcp_sqlite_bot.py`, with only its imports changed.

An `Assistant` with an `mcpServers` entry for SQLite is asked how many tables the database
has, a PDF attached to the question (the example's `resource/poem.pdf`). The example starts
`mcp-server-sqlite` with `uvx`, which downloads it: offline, the same config starts
`sqlite_mcp_server.py` instead, a real stdio MCP server (the official SDK's) with the same
tools over real SQLite. The model is the OpenAI wire stand-in (`model_server` added to the
example's llm config); the PDF is a small local one.
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.testing.openai_server import OpenAIServer, Reply
from tests._requires import require_module
from tests.compat.qwen_examples._doc_support import (
    message_text,
    request_text,
    text_only,
    tool_call,
)
from tests.tools._hostile import text_pdf

SERVER = Path(__file__).with_name("sqlite_mcp_server.py")
POEM = [["Quiet Night Thought", "Moonlight before my bed, like frost upon the ground."]]


def test_assistant_mcp_sqlite_bot_lists_the_tables_through_the_mcp_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_module("mcp", "mcp")
    require_module("pypdf", "tools")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with sqlite3.connect(tmp_path / "test.db") as db:
        db.execute("CREATE TABLE students (name TEXT, age INTEGER)")
        db.execute("CREATE TABLE teachers (name TEXT)")
    file = str(text_pdf(tmp_path / "poem.pdf", POEM))
    steps = [
        tool_call("sqlite-list_tables", {}),
        Reply(text="数据库里有2张表：students 和 teachers。"),
    ]
    with OpenAIServer(steps) as server:
        # The example's init_agent_service() and test(); `uvx mcp-server-sqlite` → the
        # stand-in script, the model → the stand-in server.
        llm_cfg = {"model": "qwen-max", "model_server": server.url, "api_key": "EMPTY"}
        system = "你扮演一个数据库助手，你具有查询数据库的能力"
        tools = [
            {
                "mcpServers": {
                    "sqlite": {
                        "command": sys.executable,
                        "args": [str(SERVER), "--db-path", "test.db"],
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
        first, second = server.requests
    final = responses[-1]
    assert [m["role"] for m in final] == ["assistant", "function", "assistant"]
    assert {m["name"] for m in final} == {"数据库助手", "sqlite-list_tables"}
    # The MCP server's real answer, from the database.
    assert "students" in final[1]["content"]
    assert "teachers" in final[1]["content"]
    assert final[-1]["content"] == "数据库里有2张表：students 和 teachers。"
    # The model was offered the server's tools under Qwen-Agent's names, and read the
    # attached poem as knowledge; the question reached it as text.
    offered = json.dumps(first.json, ensure_ascii=False)
    for name in ("sqlite-list_tables", "sqlite-read_query", "sqlite-describe_table"):
        assert name in offered
    sent = first.json["messages"]
    assert message_text(sent[0]).startswith(system)
    assert "Moonlight before my bed" in message_text(sent[0])
    assert message_text(sent[-1]) == query
    assert text_only(sent[-1])  # the file is for retrieval, not the model (as in Qwen-Agent)
    assert "teachers" in request_text(second)
