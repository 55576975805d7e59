"""Qwen-Agent's `examples/llm_riddles.py`, with only its imports changed.

A custom `Agent` takes `llm` as a dict or a `BaseChatModel`, nests an `Assistant` on its own
`self.llm` (a `BaseChatModel`), asks it for ten phrases at construction, and answers each
riddle with `self._call_llm`. Its config (`{'model': 'qwen-max'}`, a `qwen_dashscope` model)
runs on the DashScope stand-in, reached through Qwen-Agent's own environment variables.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
from collections.abc import Iterator

import json5
import pytest

from parley.compat.qwen import Agent
from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.llm import BaseChatModel
from parley.compat.qwen.llm.schema import Message
from parley.providers.dashscope.server import Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

EXAMINER = (
    "请你创造十个比较离谱或小众的短语，长度在10个汉字以内。例如“1+1=3”、“主莫朗玛峰”等反人类直觉的短语，"
    "尽量类型丰富一些，包含数学、文学、地理、生物等领域。返回格式为字符串列表，不要返回其余任何内容。"
)
TOPICS = ["1+1=3", "主莫朗玛峰", "鱼会爬树"]


class LLMRiddles(Agent):
    """Customize an agent for game: Surrounded by LLM (the example's class)."""

    def __init__(self, llm: dict | BaseChatModel | None = None) -> None:  # type: ignore[type-arg]
        super().__init__(llm=llm)
        self.examiner_agent = Assistant(llm=self.llm, system_message=EXAMINER)
        *_, last = self.examiner_agent.run([Message("user", "开始")])
        self.topics = json5.loads(last[-1].content)

    def _run(
        self, messages: list[Message], lang: str = "en", **kwargs: object
    ) -> Iterator[list[Message]]:
        return self._call_llm(messages=messages)  # type: ignore[return-value]


def test_the_riddle_game_runs_on_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [
        Reply(text=json.dumps(TOPICS, ensure_ascii=False)),
        Reply(text=TOPICS[0]),
        Reply(text="我不知道"),
    ]
    with dashscope_stand_in(monkeypatch, steps) as server:
        bot = LLMRiddles(llm={"model": "qwen-max"})
        outcomes = []
        try:
            for topic in bot.topics[:2]:  # the example's `test()`, two topics of the list
                messages = [Message("user", f"请直接输出“{topic}”（不需要引号），不要说其他内容")]
                response: list[Message] = []
                for response in bot.run(messages=messages):  # noqa: B007
                    pass
                outcomes.append(bool(response) and response[-1]["content"] == topic)
        finally:
            bot.close_sync()
            bot.examiner_agent.close_sync()
        server.assert_consumed()
        requests = [json.loads(r.body) for r in server.generation_requests()]

    assert bot.topics == TOPICS
    assert outcomes == [True, False]  # "You win!" once
    # The nested assistant shares the agent's model; its instruction led its request.
    assert bot.examiner_agent.llm is bot.llm
    assert isinstance(bot.llm, BaseChatModel)
    assert requests[0]["input"]["messages"][0]["content"].startswith(EXAMINER)
    assert all(r["model"] == "qwen-max" for r in requests)
    assert requests[1]["input"]["messages"][-1]["content"].startswith("请直接输出“1+1=3”")
