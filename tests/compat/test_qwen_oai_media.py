"""Qwen's multimodal OpenAI-wire types send media as Qwen-Agent does (`qwenvl_oai.py`).

Audio by URL goes as `input_audio.data` (OpenAI's formatter refuses it: OpenAI takes audio
inline only) and a video given by its frames as `{"type": "video", "video": [...]}`; local
files still go inline; plain `oai` (a text model) sends no audio.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from parley.compat.qwen.llm import get_chat_model
from parley.providers.openai.server import OpenAIServer, Reply

AUDIO = "https://media.test/welcome.mp3"
FRAMES = [f"https://media.test/frame{i}.jpg" for i in range(3)]


def sent_content(model_type: str, content: list[dict[str, Any]]) -> Any:
    with OpenAIServer([Reply(text="ok")]) as server:
        llm = get_chat_model(
            {"model_type": model_type, "model": "qwen-omni", "base_url": server.url}
        )
        try:
            *_, last = llm.chat([{"role": "user", "content": content}])
        finally:
            llm.close_sync()
        server.assert_consumed()
        [body] = server.bodies()
    assert last[-1]["content"] == "ok"
    return body["messages"][-1]["content"]


@pytest.mark.parametrize("model_type", ["qwenomni_oai", "qwenvl_oai"])
def test_an_audio_url_and_video_frames_go_as_qwen_agent_sends_them(model_type: str) -> None:
    content = sent_content(model_type, [{"audio": AUDIO}, {"video": FRAMES}, {"text": "?"}])

    assert content == [
        {"type": "input_audio", "input_audio": {"data": AUDIO}},
        {"type": "video", "video": FRAMES},
        {"type": "text", "text": "?"},
    ]


def test_local_audio_still_goes_inline(tmp_path: Path) -> None:
    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"RIFF0000WAVE")

    [audio, _] = sent_content("qwenomni_oai", [{"audio": str(clip)}, {"text": "?"}])

    assert audio["input_audio"]["data"] == base64.b64encode(b"RIFF0000WAVE").decode()
    assert audio["input_audio"]["format"] == "wav"


def test_plain_oai_is_a_text_model_and_sends_no_audio() -> None:
    content = sent_content("oai", [{"audio": AUDIO}, {"text": "?"}])

    assert "input_audio" not in str(content)
