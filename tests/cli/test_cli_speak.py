"""`parley chat --speak` end to end: the local chat model and the local voice, played through
a stand-in player (`PARLEY_AUDIO_PLAYER`, a script saving what it is fed)."""

from __future__ import annotations

import array
import math
import subprocess
import sys
from pathlib import Path

import pytest

from parley.tts import read_wav
from tests._requires import require_module
from tests.cli._run import keyless_env, run_parley

SAVER = """
import sys
with open(sys.argv[1], "wb") as out:
    while chunk := sys.stdin.buffer.read(4096):
        out.write(chunk)
"""


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


def _chat(tmp_path: Path, *options: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = keyless_env(**variables)
    question = "What is the capital of France?"
    return run_parley("chat", *options, question, env=env, cwd=tmp_path, timeout=180)


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
