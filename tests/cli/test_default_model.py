"""`parley chat` and `parley serve` with no model configured: which they run, and saying so.

Real `parley` processes, in the environment the suite's conftest leaves (no provider key,
`OLLAMA_HOST` on a closed port, no pulled model) plus what each test sets: a provider key
and base URL pointing at the project's wire-format stand-ins, or `OLLAMA_HOST` at its
Ollama stand-in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from parley.providers.ollama.server import OllamaServer
from parley.providers.openai.server import OpenAIServer, Reply
from tests.cli._run import run_parley
from tests.providers.test_auto import CHAT, EMBEDDER, first_card
from tests.service._live import free_port
from tests.service.test_default_model import answer_or_load

TIMEOUT = 120
START_TIMEOUT = 60.0


def parley(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_parley(*args, env={**os.environ, "HOME": str(cwd), **env}, cwd=cwd)


def test_chat_uses_a_provider_key_and_says_so(tmp_path: Path) -> None:
    with OpenAIServer([Reply(text="Hello from the stand-in.")]) as server:
        done = parley(
            "chat",
            "Hi",
            env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url},
            cwd=tmp_path,
        )
        server.assert_consumed()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from the stand-in."
    spec = f"openai:{first_card('openai')}"
    assert f"parley: model {spec} (OPENAI_API_KEY is set; choose another with --model" in (
        done.stderr
    )
    assert server.bodies()[0]["model"] == first_card("openai")


def test_chat_uses_an_ollama_chat_model_and_says_so(tmp_path: Path) -> None:
    with OllamaServer([answer_or_load("From Ollama.")] * 2, models=[EMBEDDER, CHAT]) as server:
        done = parley("chat", "Hi", env={"OLLAMA_HOST": server.url}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "From Ollama."
    assert "parley: model ollama:qwen3:1.7b (the Ollama server at" in done.stderr


def test_chat_model_flag_and_parley_model_win_and_say_nothing(tmp_path: Path) -> None:
    with (
        OpenAIServer([Reply(text="Configured.")] * 2) as server,
        OllamaServer(models=[CHAT]) as ollama,
    ):
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": server.url,
            "OLLAMA_HOST": ollama.url,
            "DASHSCOPE_API_KEY": "sk-test",  # would come after OpenAI's; never used here
        }
        flag = parley("chat", "--model", "openai:gpt-4o-mini", "Hi", env=env, cwd=tmp_path)
        variable = parley(
            "chat", "Hi", env={**env, "PARLEY_MODEL": "openai:gpt-4o-mini"}, cwd=tmp_path
        )
    for done in (flag, variable):
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Configured."
        assert "parley: model" not in done.stderr
    assert [body["model"] for body in server.bodies()] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert ollama.requests == []


def test_serve_chooses_once_says_which_and_info_agrees(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with OllamaServer([answer_or_load("")] * 2, models=[EMBEDDER, CHAT]) as ollama:
        env = {**os.environ, "OLLAMA_HOST": ollama.url, "PARLEY_WORKSPACE": str(tmp_path / "w")}
        command = [sys.executable, "-m", "parley", "serve", "--port", str(port)]
        with log.open("w") as out:
            server = subprocess.Popen(command, stderr=out, stdout=out, cwd=tmp_path, env=env)
        try:
            info = wait_for_info(port, server, log)
        finally:
            server.terminate()
            server.wait(timeout=30)
        listings = [r.path for r in ollama.requests].count("/api/tags")
    text = log.read_text()
    assert "parley: model ollama:qwen3:1.7b (the Ollama server at" in text
    assert info["model"]["spec"] == "ollama:qwen3:1.7b"
    assert info["model"]["source"] == "ollama"
    assert listings == 1  # chosen by `parley serve`, taken by the app's process as it was


def wait_for_info(port: int, server: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        assert server.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"not serving in time:\n{log.read_text()}"
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/info", timeout=5)
        except httpx.TransportError:
            time.sleep(0.1)
            continue
        info: dict[str, object] = response.json()
        return info
