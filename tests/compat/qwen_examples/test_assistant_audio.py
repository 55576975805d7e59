"""Qwen-Agent's `examples/assistant_audio.py`, run with only its imports changed.

An `Assistant` on `qwen-audio-turbo-latest` (`model_type: "qwenaudio_dashscope"`) hears an
audio URL and a question. The example's config is kept as written: DashScope is the stand-in,
reached through Qwen-Agent's environment variables (`DASHSCOPE_HTTP_URL`,
`DASHSCOPE_API_KEY`). The audio goes to DashScope's multimodal endpoint as a URL (the model
reads audio itself), so nothing is downloaded. `app_gui()`'s agent (model type guessed from
the name) is built and asked the same, without starting the web UI.
"""

# ruff: noqa: RUF001  (the example's Chinese text, full-width punctuation as written)

from __future__ import annotations

import json
from typing import Any

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.compat.qwen.llm.models import QwenAudioChatAtDS
from parley.providers.dashscope.server import MULTIMODAL_PATH, DashScopeServer, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

AUDIO = "https://dashscope.oss-cn-beijing.aliyuncs.com/audios/welcome.mp3"
ANSWER = "这段音频在说：欢迎使用阿里云。"


def example_messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"audio": AUDIO}, {"text": "这段音频在说什么?"}]}]


@pytest.fixture
def dashscope(monkeypatch: pytest.MonkeyPatch) -> Any:
    with dashscope_stand_in(monkeypatch, [Reply(text=ANSWER)]) as server:
        yield server


def run(bot: Assistant) -> list[Any]:
    rsp: list[Any] = []
    try:
        for rsp in bot.run(example_messages()):  # noqa: B007
            pass
    finally:
        bot.close_sync()
    return rsp


def test_the_audio_model_hears_the_url_and_answers(dashscope: DashScopeServer) -> None:
    bot = Assistant(llm={"model_type": "qwenaudio_dashscope", "model": "qwen-audio-turbo-latest"})
    rsp = run(bot)
    dashscope.assert_consumed()
    [request] = dashscope.generation_requests()

    assert isinstance(bot.llm, QwenAudioChatAtDS)
    assert bot.llm.support_audio_input
    assert request.path.split("?")[0] == MULTIMODAL_PATH
    body = json.loads(request.body)
    assert body["model"] == "qwen-audio-turbo-latest"
    assert body["input"]["messages"][-1] == {
        "role": "user",
        "content": [{"audio": AUDIO}, {"text": "这段音频在说什么?"}],
    }
    assert [(m["role"], m["content"]) for m in rsp] == [("assistant", ANSWER)]


def test_app_gui_agent_guesses_the_audio_type_from_the_name(dashscope: DashScopeServer) -> None:
    bot = Assistant(llm={"model": "qwen-audio-turbo-latest"})  # app_gui()'s agent
    rsp = run(bot)
    dashscope.assert_consumed()
    [request] = dashscope.generation_requests()

    assert isinstance(bot.llm, QwenAudioChatAtDS)
    assert request.path.split("?")[0] == MULTIMODAL_PATH
    assert {"audio": AUDIO} in json.loads(request.body)["input"]["messages"][-1]["content"]
    assert rsp[-1]["content"] == ANSWER
