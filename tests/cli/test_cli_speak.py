"""`parley chat --speak` end to end: the local chat model and the local voice, played through
a stand-in player (`PARLEY_AUDIO_PLAYER`, a script saving what it is fed)."""

from __future__ import annotations

import array
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parley.tts import read_wav
from tests._requires import require_module

SAVER = """
import sys
with open(sys.argv[1], "wb") as out:
    while chunk := sys.stdin.buffer.read(4096):
        out.write(chunk)
"""


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    env.update(extra)
    return env


def _chat(tmp_path: Path, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "parley", "chat", *options, "What is the capital of France?"],
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(**env),
        cwd=tmp_path,
        check=False,
    )


def _check_speech(wav: bytes, answer: str) -> None:
    pcm, fmt = read_wav(wav)
    assert fmt.rate == 22050
    words = len(answer.split())
    # The answer's words at a speaking pace of 1.5 to 5 words a second.
    assert words / 5 < fmt.duration(len(pcm)) < words / 1.5 + 1
    samples = array.array("h", pcm)
    assert math.sqrt(sum(s * s for s in samples) / len(samples)) > 300  # speech, not silence


def test_chat_speaks_the_answer_through_the_player(tmp_path: Path) -> None:
    saver = tmp_path / "saver.py"
    saver.write_text(SAVER)
    heard = tmp_path / "heard.wav"
    player = f"{sys.executable} {saver} {heard}"
    done = _chat(tmp_path, "--speak", PARLEY_AUDIO_PLAYER=player)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    _check_speech(heard.read_bytes(), done.stdout)


def test_chat_writes_the_speech_to_a_file(tmp_path: Path) -> None:
    done = _chat(tmp_path, "--speak-to", "answer.wav", "--tts", "local:espeak-ng")
    assert done.returncode == 0, done.stderr
    _check_speech((tmp_path / "answer.wav").read_bytes(), done.stdout)


def test_chat_says_when_no_player_is_found(tmp_path: Path) -> None:
    done = _chat(tmp_path, "--speak", PATH=str(tmp_path), PARLEY_AUDIO_PLAYER="")
    assert done.returncode != 0
    assert "no audio player found" in done.stderr
    assert "--speak-to" in done.stderr
