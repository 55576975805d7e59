"""Qwen-Agent's `examples/parallel_doc_qa.py`, with only its imports changed.

A `ParallelDocQA` is asked about a paper's experimental method, the paper (an arxiv URL) a
file item of the user's message. Each chunk of the paper is given to the model in parallel;
the chunk that answers says so in JSON, the others say they do not; the question and that
answer are searched for in the paper; and the model answers from the passages found. The
example's llm config (`qwen2.5-72b-instruct`, a `qwen_dashscope` model, with `max_retries`)
is kept as it is: the DashScope stand-in is reached through Qwen-Agent's own environment
variables (`DASHSCOPE_HTTP_URL`, `DASHSCOPE_API_KEY`). The paper's URL, in the example's
message, is the one other change: it points at a stand-in site serving a PDF made here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parley.compat.qwen.agents.doc_qa import ParallelDocQA
from parley.providers.dashscope.server import RecordedRequest, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import local_web, message_text, serve_pdf

__all__ = ["local_web"]

FILLER = "Related work surveys memory systems for language models in general terms."
METHOD = "Experimental method: we evaluate MemGPT on document QA and multi-session chat."
ANSWER = "论文在文档问答和多轮对话上评估了 MemGPT。"


def paper() -> list[list[str]]:
    """Pages enough for several chunks of about 1000 tokens; the method on one page only."""
    pages = [[f"{FILLER} ({page}.{line})" for line in range(40)] for page in range(1, 6)]
    pages[3][5] = METHOD
    return pages


def reply(request: RecordedRequest) -> Reply:
    """A member answers from its chunk in JSON; the summary call gets the final answer."""
    messages = request.json["input"]["messages"]
    text = message_text(messages[-1])
    if "JSON" not in message_text(messages[0]):
        return Reply(text=ANSWER)
    if METHOD in text:
        return Reply(text=json.dumps({"res": "ans", "content": METHOD}))
    return Reply(text='{"res": "none", "content": "<None>"}')


def test_parallel_doc_qa_reads_each_chunk_then_answers_from_the_retrieval(
    tmp_path: Path, local_web: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        serve_pdf(tmp_path, "/pdf/2310.08560.pdf", paper()) as site,
        dashscope_stand_in(monkeypatch, [reply] * 20) as server,
    ):
        # The example's test().
        bot = ParallelDocQA(
            llm={"model": "qwen2.5-72b-instruct", "generate_cfg": {"max_retries": 10}}
        )
        messages = [
            {
                "role": "user",
                "content": [
                    {"text": "介绍实验方法"},
                    {"file": f"{site}/pdf/2310.08560.pdf"},
                ],
            },
        ]
        responses = list(bot.run(messages))
        bot.close_sync()
        requests = [r.json for r in server.generation_requests()]
    assert responses[-1][-1]["content"] == ANSWER
    assert all(r["model"] == "qwen2.5-72b-instruct" for r in requests)
    *members, summary = requests
    # One member per chunk, each given one chunk and the question; exactly one chunk answers.
    assert len(members) >= 3
    chunks = [message_text(r["input"]["messages"][-1]) for r in members]
    assert all("介绍实验方法" in chunk for chunk in chunks)
    assert sum(METHOD in chunk for chunk in chunks) == 1
    # The summary call holds the retrieved passage with the method, and the question.
    sent = summary["input"]["messages"]
    assert METHOD in message_text(sent[0])
    assert "# 知识库" in message_text(sent[0])
    assert message_text(sent[-1]) == "介绍实验方法"
