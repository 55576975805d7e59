"""Qwen-Agent's `examples/long_dialogue.py`, with only its imports changed.

A `DialogueRetrievalAgent` gets one user message of some 14000 characters: a question and,
hidden in filler, the one sentence that answers it. The model is asked first to pick the
question out, then answers from what retrieval finds in the rest. The example's llm config
(`{'model': 'qwen-max'}`, a `qwen_dashscope` model) is kept as it is: the DashScope stand-in is
reached through Qwen-Agent's own environment variables (`DASHSCOPE_HTTP_URL`,
`DASHSCOPE_API_KEY`).
"""

# ruff: noqa: RUF001  (the example's Chinese text, as Qwen-Agent's example writes it)

from __future__ import annotations

from pathlib import Path

import pytest

from parley.compat.qwen.agents import DialogueRetrievalAgent
from parley.providers.dashscope.server import RecordedRequest, Reply
from parley.tools.workspace import default_workspace
from tests.compat.qwen_examples._dashscope import dashscope_stand_in
from tests.compat.qwen_examples._doc_support import message_text

QUESTION = "小明爸爸叫什么？"


def request_text(request: RecordedRequest) -> str:
    """Every message's text of a DashScope generation request, joined."""
    return "\n".join(message_text(m) for m in request.json["input"]["messages"])


def test_long_dialogue_answers_from_the_one_sentence_retrieval_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    saved_dir = default_workspace().root / "dialogues"  # where the agent keeps dialogues
    before = set(saved_dir.iterdir()) if saved_dir.is_dir() else set()
    with dashscope_stand_in(
        monkeypatch, [Reply(text=QUESTION), Reply(text="小明的爸爸叫大头。")]
    ) as server:
        # The example's test().
        bot = DialogueRetrievalAgent(llm={"model": "qwen-max"})
        long_text = "，".join(
            ["这是干扰内容"] * 1000 + ["小明的爸爸叫大头"] + ["这是干扰内容"] * 1000
        )
        messages = [{"role": "user", "content": f"小明爸爸叫什么？\n{long_text}"}]
        responses = list(bot.run(messages))
        bot.close_sync()
        server.assert_consumed()
        extract, answer = server.generation_requests()
    assert responses[-1][-1]["content"] == "小明的爸爸叫大头。"
    # First the model picks the request out of the message's two ends ...
    asked = request_text(extract)
    assert asked.startswith("<给定文本>\n小明爸爸叫什么？")
    assert " ... " in asked
    assert "小明的爸爸叫大头" not in asked
    # ... then answers the question alone, the answering sentence in its knowledge, and far
    # from the whole message in its prompt.
    assert extract.json["model"] == answer.json["model"] == "qwen-max"
    sent = answer.json["input"]["messages"]
    assert message_text(sent[-1]) == QUESTION
    knowledge = message_text(sent[0])
    assert "小明的爸爸叫大头" in knowledge
    assert len(request_text(answer)) < len(long_text) / 2
    (saved,) = set(saved_dir.iterdir()) - before
    assert "小明的爸爸叫大头" in saved.read_text()
