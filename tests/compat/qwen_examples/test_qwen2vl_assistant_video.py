"""Qwen-Agent's `examples/qwen2vl_assistant_video.py`, run with only its imports changed.

An `Assistant` on `qwen-vl-max-latest` (no `model_type`: Qwen-Agent deduces
`qwenvl_dashscope` from `-vl`) is shown a video given by four frame URLs. The example's
config is kept as written: DashScope is the stand-in, reached through Qwen-Agent's
environment variables. The frames go to the multimodal endpoint as one `video` list, as
DashScope takes a video sampled into images (nothing is downloaded).
"""

from __future__ import annotations

import json

import pytest

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.llm.models import QwenVLChatAtDS
from parley.providers.dashscope.server import MULTIMODAL_PATH, Reply
from tests.compat.qwen_examples._dashscope import dashscope_stand_in

BASE = "https://help-static-aliyun-doc.aliyuncs.com/file-manage-files/zh-CN/20241108"
FRAMES = [
    f"{BASE}/xzsgiz/football1.jpg",
    f"{BASE}/tdescd/football2.jpg",
    f"{BASE}/zefdja/football3.jpg",
    f"{BASE}/aedbqh/football4.jpg",
]
ANSWER = "A player dribbles past a defender and scores."


def test_the_frames_go_to_the_vision_model_as_one_video(monkeypatch: pytest.MonkeyPatch) -> None:
    with dashscope_stand_in(monkeypatch, [Reply(text=ANSWER)]) as server:
        bot = Assistant(llm={"model": "qwen-vl-max-latest"})
        messages = [
            {
                "role": "user",
                "content": [
                    {"video": FRAMES},
                    {"text": "Describe the specific process of this video"},
                ],
            }
        ]
        try:
            for rsp in bot.run(messages):  # noqa: B007
                pass
        finally:
            bot.close_sync()
        server.assert_consumed()
        [request] = server.generation_requests()

    assert isinstance(bot.llm, QwenVLChatAtDS)
    assert request.path.split("?")[0] == MULTIMODAL_PATH
    body = json.loads(request.body)
    assert body["model"] == "qwen-vl-max-latest"
    assert body["input"]["messages"][-1] == {
        "role": "user",
        "content": [{"video": FRAMES}, {"text": "Describe the specific process of this video"}],
    }
    assert [(m["role"], m["content"]) for m in rsp] == [("assistant", ANSWER)]
