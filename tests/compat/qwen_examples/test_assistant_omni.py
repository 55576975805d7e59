"""Qwen-Agent's `examples/assistant_omni.py`: its config's URL points at a local stand-in.

An `Assistant` on Qwen-Omni (`model_type: "qwenomni_oai"`) hears an audio URL, then, with
its answer in the history, is shown a video URL. The example's `base_url` is DashScope's
public compatible-mode URL; pointing it at `parley.testing`'s OpenAI-wire server is the one
change beyond the imports. The media go as Qwen-Agent sends them: the audio URL as
`input_audio.data`, the video as `video_url` (nothing is downloaded).
"""

from __future__ import annotations

from typing import Any

from parley.compat.qwen.agents import Assistant
from parley.compat.qwen.gui import WebUI  # noqa: F401  (imported by the example, unused here)
from parley.providers.openai.server import OpenAIServer, Reply

AUDIO = "https://dashscope.oss-cn-beijing.aliyuncs.com/audios/welcome.mp3"
VIDEO = "https://help-static-aliyun-doc.aliyuncs.com/file-manage-files/zh-CN/20241115/cqqkru/1.mp4"


def example(base_url: str) -> list[Any]:
    """The example's `test()`: the conversation at its end."""
    bot = Assistant(
        llm={
            "model_type": "qwenomni_oai",
            "model": "qwen-omni-turbo-latest",
            "base_url": base_url,  # the example: 'https://dashscope.aliyuncs.com/compatible-mode/v1'
        }
    )
    try:
        messages: list[Any] = [
            {"role": "user", "content": [{"audio": AUDIO}, {"text": "这段音频在说什么?"}]}
        ]
        for rsp in bot.run(messages):  # noqa: B007
            pass
        messages.extend(rsp)
        messages.append({"role": "user", "content": [{"video": VIDEO}, {"text": "描述这个视频"}]})
        for rsp in bot.run(messages):  # noqa: B007
            pass
        messages.extend(rsp)
        return messages
    finally:
        bot.close_sync()


def test_the_omni_model_hears_the_audio_then_sees_the_video() -> None:
    steps = [Reply(text="欢迎使用阿里云。"), Reply(text="一个人在踢足球。")]
    with OpenAIServer(steps) as server:
        messages = example(server.url)
        server.assert_consumed()
        first, second = server.bodies()

    assert first["model"] == second["model"] == "qwen-omni-turbo-latest"
    assert first["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_audio", "input_audio": {"data": AUDIO}},
                {"type": "text", "text": "这段音频在说什么?"},
            ],
        }
    ]
    assert second["messages"][1:] == [
        {"role": "assistant", "content": "欢迎使用阿里云。"},
        {
            "role": "user",
            "content": [
                {"type": "video_url", "video_url": {"url": VIDEO}},
                {"type": "text", "text": "描述这个视频"},
            ],
        },
    ]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [
        "欢迎使用阿里云。",
        "一个人在踢足球。",
    ]
