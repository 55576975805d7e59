"""Qwen-Agent's `examples/assistant_rag.py`, with only its imports changed.

The example asks an `Assistant` about a PDF given as a file item of the user's message (an
arxiv URL). Its config (`{'model': 'qwen-plus-latest'}`, a `qwen_dashscope` model) is kept as
it is: the DashScope stand-in is reached through Qwen-Agent's own environment variables
(`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`). The paper's URL, in the example's message, is the
one other change: it points at a stand-in site serving a PDF made here (no internet).
"""
# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parley.compat.qwen.agents import Assistant
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import (
    local_web,
    message_text,
    serve_pdf,
    text_only,
)

__all__ = ["local_web"]

PAPER = [
    [
        "Attention Is All You Need",
        "Figure 1: The Transformer - model architecture.",
        "The encoder maps an input sequence to a sequence of continuous representations.",
    ],
    ["Section 2 Background: reducing sequential computation is the goal of this work."],
]
ANSWER = "图一展示了 Transformer 的模型结构：编码器和解码器。"


def test_assistant_rag_reads_the_attached_pdf_and_the_model_gets_text(
    tmp_path: Path, local_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        serve_pdf(tmp_path, "/pdf/1706.03762.pdf", PAPER) as site,
        dashscope_stand_in(monkeypatch, [Reply(text=ANSWER)]) as server,
    ):
        # The example's code.
        bot = Assistant(llm={"model": "qwen-plus-latest"})
        messages = [
            {
                "role": "user",
                "content": [{"text": "介绍图一"}, {"file": f"{site}/pdf/1706.03762.pdf"}],
            }
        ]
        responses = list(bot.run(messages))
        bot.close_sync()
        server.assert_consumed()
        (request,) = server.generation_requests()
    assert responses[-1][-1]["content"] == ANSWER
    body = json.loads(request.body)
    assert body["model"] == "qwen-plus-latest"
    sent = body["input"]["messages"]
    system, user = sent[0], sent[-1]
    # The document's text reached the model as knowledge, under Qwen-Agent's heading ...
    assert "# 知识库" in message_text(system)
    assert "Figure 1: The Transformer - model architecture." in message_text(system)
    assert "1706.03762.pdf" in message_text(system)
    # ... and the user's message is the question alone: no file part.
    assert message_text(user) == "介绍图一"
    assert text_only(user)
