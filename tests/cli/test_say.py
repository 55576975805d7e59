"""`parley say` and `parley models --tts`, on the real local voice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parley.cli import main
from parley.tts import read_wav
from tests._requires import require_module


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


def test_say_writes_a_wav_file_of_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hello.wav"
    assert main(["say", "Hello", "from", "parley.", "-o", str(out)]) == 0
    pcm, fmt = read_wav(out.read_bytes())
    assert fmt.rate == 22050
    assert 0.5 < fmt.duration(len(pcm)) < 5
    assert f"wrote {out}" in capsys.readouterr().err


def test_say_reads_stdin_and_writes_stdout_when_piped() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "parley", "say", "--model", "local:espeak-ng", "--voice", "en-gb"],
        input=b"Good evening, everyone.",
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    pcm, fmt = read_wav(done.stdout)
    assert 0.8 < fmt.duration(len(pcm)) < 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["say", "hi", "-o", "x.mp3"], "name the file .wav, not 'x.mp3'"),
        (["say", "hi", "-o", "/no/such/folder/x.wav"], "no folder '/no/such/folder'"),
        (["say", "  ", "-o", "x.wav"], "nothing to say"),
        (["say", "hi", "-o", "x.wav", "--voice", "nobody"], "no voice 'nobody'"),
        (["say", "hi", "-o", "x.wav", "--model", "nowhere"], "nowhere"),
        (["say", "hi", "-o", "x.wav", "--speed", "9"], "speed"),
    ],
)
def test_say_explains_bad_input(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.wav").exists()


def test_models_tts_lists_voices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "local", "--tts"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:6] == ["provider", "model", "label", "status", "realtime", "voices"]
    piper = next(line for line in lines if " piper-joe " in line)
    assert piper.split()[-1] == "joe"
    assert " yes " in piper
