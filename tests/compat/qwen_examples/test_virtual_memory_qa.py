"""Qwen-Agent's `examples/virtual_memory_qa.py`, with only its imports changed.

A `VirtualMemoryAgent` is asked to list a report's contributions, the report's URL in the
question's text. The model calls `retrieval` with that URL; the passages found go into the
system message and the model answers. The example's llm config (`{'model': 'qwen-max'}`, a
`qwen_dashscope` model) is kept as it is: the DashScope stand-in is reached through
Qwen-Agent's own environment variables (`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`), and, as in
Qwen-Agent, `retrieval` goes to it natively. The report's URL, in the example's query, is the
one other change: it points at a stand-in site serving a PDF made here.
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parley.compat.qwen.agents import VirtualMemoryAgent
from parley.providers.dashscope.server import Reply, ToolCall
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import local_web, message_text, serve_pdf

__all__ = ["local_web"]

REPORT = [
    ["QWEN TECHNICAL REPORT", "Our contributions: a family of open models trained on 3T tokens."],
    ["We also release chat models aligned with human preference (RLHF)."],
]
ANSWER = "1. 开源了一系列模型；2. 发布了对齐的对话模型。"


def test_virtual_memory_qa_retrieves_the_named_report_into_the_system_message(
    tmp_path: Path, local_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_pdf(tmp_path, "/QWEN_TECHNICAL_REPORT.pdf", REPORT) as site:
        url = f"{site}/QWEN_TECHNICAL_REPORT.pdf"
        steps = [
            Reply(
                tool_calls=[ToolCall("retrieval", {"query": "贡献, contributions", "files": [url]})]
            ),
            Reply(text=ANSWER),
        ]
        with dashscope_stand_in(monkeypatch, steps) as server:
            # The example's init_agent_service() and test().
            llm_cfg = {"model": "qwen-max"}
            system = "一个文档问答助手。"
            bot = VirtualMemoryAgent(llm=llm_cfg, system_message=system)
            query = f"简单列出这篇文章的贡献{url}"
            messages = [{"role": "user", "content": query}]
            responses = list(bot.run(messages))
            bot.close_sync()
            server.assert_consumed()
            first, second = (r.json for r in server.generation_requests())
    final = responses[-1]
    assert [m["role"] for m in final] == ["assistant", "function", "assistant"]
    assert final[0]["function_call"]["name"] == "retrieval"
    assert final[1]["content"].startswith("The relevant content has already been retrieved")
    assert final[-1]["content"] == ANSWER
    # The model was offered `retrieval` natively (Qwen-Agent's: a query and files) ...
    assert first["model"] == "qwen-max"
    (offered,) = first["parameters"]["tools"]
    assert offered["function"]["name"] == "retrieval"
    assert {"query", "files"} <= set(offered["function"]["parameters"]["properties"])
    assert "Our contributions" not in json.dumps(first["input"], ensure_ascii=False)
    # ... and after calling it, the report's passages are in the system message.
    system_text = message_text(second["input"]["messages"][0])
    assert system_text.startswith("一个文档问答助手。")
    assert "# 知识库" in system_text
    assert "Our contributions: a family of open models" in system_text
