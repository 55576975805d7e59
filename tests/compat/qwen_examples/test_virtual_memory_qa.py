"""Qwen-Agent's `examples/virtual_memory_qa.py`, with only its imports changed.

A `VirtualMemoryAgent` is asked to list a report's contributions, the report's URL in the
question's text. The model calls `retrieval` with that URL; the passages found go into the
system message and the model answers. The URL is served by a stand-in site and the model by
the OpenAI wire stand-in (`model_server` added to the example's llm config).
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import json
from pathlib import Path

from parley.compat.qwen.agents import VirtualMemoryAgent
from parley.testing.openai_server import OpenAIServer, Reply
from tests._requires import require_module
from tests.compat.qwen_examples._doc_support import (
    local_web,
    message_text,
    request_text,
    serve_files,
    tool_call,
)
from tests.tools._hostile import text_pdf

__all__ = ["local_web"]

REPORT = [
    ["QWEN TECHNICAL REPORT", "Our contributions: a family of open models trained on 3T tokens."],
    ["We also release chat models aligned with human preference (RLHF)."],
]
ANSWER = "1. 开源了一系列模型；2. 发布了对齐的对话模型。"


def test_virtual_memory_qa_retrieves_the_named_report_into_the_system_message(
    tmp_path: Path, local_web: None
) -> None:
    require_module("pypdf", "tools")
    pdf = text_pdf(tmp_path / "report.pdf", REPORT).read_bytes()
    with serve_files({"/QWEN_TECHNICAL_REPORT.pdf": (pdf, "application/pdf")}) as site:
        url = f"{site}/QWEN_TECHNICAL_REPORT.pdf"
        steps = [
            tool_call("retrieval", {"query": "贡献, contributions", "files": [url]}),
            Reply(text=ANSWER),
        ]
        with OpenAIServer(steps) as server:
            # The example's init_agent_service() and test(), the model pointed at the stand-in.
            llm_cfg = {"model": "qwen-max", "model_server": server.url, "api_key": "EMPTY"}
            system = "一个文档问答助手。"
            bot = VirtualMemoryAgent(llm=llm_cfg, system_message=system)
            query = f"简单列出这篇文章的贡献{url}"
            messages = [{"role": "user", "content": query}]
            responses = list(bot.run(messages))
            bot.close_sync()
            first, second = server.requests
    final = responses[-1]
    assert [m["role"] for m in final] == ["assistant", "function", "assistant"]
    assert final[0]["function_call"]["name"] == "retrieval"
    assert final[1]["content"].startswith("The relevant content has already been retrieved")
    assert final[-1]["content"] == ANSWER
    # The model was offered `retrieval` (Qwen-Agent's: a query and files) ...
    offered = json.dumps(first.json, ensure_ascii=False)
    assert "retrieval" in offered
    assert "files" in offered
    assert "Our contributions" not in request_text(first)
    # ... and after calling it, the report's passages are in the system message.
    system_text = message_text(second.json["messages"][0])
    assert system_text.startswith("一个文档问答助手。")
    assert "# 知识库" in system_text
    assert "Our contributions: a family of open models" in system_text
