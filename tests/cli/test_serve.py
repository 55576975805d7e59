"""`parley serve` as a user starts it: where the page is, and which sandbox runs their code."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from parley.service import cli
from parley.tools.builtin import available_sandbox_modes
from tests._requires import require_module
from tests.service._live import free_port

START_TIMEOUT = 60.0
TOOL_AGENT = """
from parley.models.spec import model_from_spec
from parley.service.registry import builtin_agent


def assistant():
    return builtin_agent(model_from_spec("local"), tools=True)
"""


def _serve(
    tmp_path: Path,
    env: dict[str, str],
    until: str,
    then: Callable[[str], None] | None = None,
) -> str:
    """Start `parley serve` in `tmp_path`, wait for `until` in its log and its health, stop it.

    `then(url)`, if given, runs once the server is healthy, before it is stopped.
    """
    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "parley", "serve", "--port", str(port)]
    with log.open("w") as out:
        server = subprocess.Popen(command, stderr=out, stdout=out, cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while until not in log.read_text():
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no {until!r} line in time:\n{log.read_text()}"
            time.sleep(0.1)
        health = _health(server, f"http://127.0.0.1:{port}/health", deadline, log)
        if then is not None:
            then(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert health.status_code == 200
    text = log.read_text()
    assert f"the web page is at http://localhost:{port}/" in text
    return text


def _health(
    server: subprocess.Popen[bytes], url: str, deadline: float, log: Path
) -> httpx.Response:
    """The server's health once it listens: uvicorn says its startup is complete before it binds."""
    while True:
        try:
            return httpx.get(url, timeout=10)
        except httpx.ConnectError:
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no answer from {url} in time:\n{log.read_text()}"
            time.sleep(0.1)


def _user_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PARLEY_WORKSPACE"] = str(tmp_path / "workspace")
    return env


def test_serve_says_where_the_page_is_and_which_sandbox_runs_code(tmp_path: Path) -> None:
    env = _user_env(tmp_path)
    # The built-in agent offers the embedded model no tool (issue 21: it cannot use one), so
    # the code interpreter is asked for, as a user serving it to a larger model would have it.
    (tmp_path / "served.py").write_text(TOOL_AGENT, encoding="utf-8")
    env["PARLEY_AGENTS"] = '["served:assistant"]'
    text = _serve(tmp_path, env, until="code_interpreter: sandbox")
    assert "no auth configured" in text
    # Agents of the user's own bring their models: no model is chosen, so none is named.
    assert "parley: model " not in text
    strongest = available_sandbox_modes()[0]
    named = "bubblewrap" if strongest == "bwrap" else strongest
    assert f"code_interpreter: sandbox {named}" in text
    # The served database is where the user started it, outside anything the code can see.
    assert (tmp_path / "parley.db").exists()


def test_serve_names_the_embedded_model_and_how_to_get_a_better_one(tmp_path: Path) -> None:
    # No key, Ollama or pulled model here (tests/conftest.py): the embedded model, said tiny.
    text = _serve(tmp_path, _user_env(tmp_path), until="Application startup complete")
    assert "parley: model local (no provider key, Ollama model or pulled model found" in text
    assert "parley models pull qwen3-1.7b" in text
    # The built-in agent offers the tiny model no tool, so no code interpreter is made.
    assert "code_interpreter: sandbox" not in text


SCRIPTED_AGENT = """
from parley.agents import Agent
from parley.models.testing import ScriptedModel


def assistant():
    return Agent("assistant", ScriptedModel(["Paris."] * 10))
"""


def test_serve_logs_each_request_once_after_its_answer(tmp_path: Path) -> None:
    env = _user_env(tmp_path)
    # A scripted agent: its answer is known, and no model loads meanwhile.
    (tmp_path / "served.py").write_text(SCRIPTED_AGENT, encoding="utf-8")
    env["PARLEY_AGENTS"] = '["served:assistant"]'

    def ask(url: str) -> None:
        answer = httpx.post(f"{url}/invoke", json={"message": "Capital of France?"}, timeout=30)
        assert answer.json()["content"] == "Paris."
        assert httpx.get(f"{url}/threads/none?limit=1", timeout=30).status_code == 404

    text = _serve(tmp_path, env, until="Application startup complete", then=ask)
    # uvicorn's own line is off: each is the app's, written once, in uvicorn's format.
    assert text.count('"GET /health HTTP/1.1" 200 OK') == 1
    assert text.count("INFO:     127.0.0.1:") == 3
    assert text.count('"POST /invoke HTTP/1.1" 200 OK') == 1
    assert text.count('"GET /threads/none?limit=1 HTTP/1.1" 404 Not Found') == 1


def test_serve_runs_on_uvloop_and_httptools_when_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_module("uvloop", "service-fast")
    require_module("httptools", "service-fast")
    assert cli._server_parts() == ("uvloop", "httptools")
    assert capsys.readouterr().err == ""

    monkeypatch.setattr(cli, "find_spec", lambda name: None)  # as if the extra were missing
    assert cli._server_parts() == ("asyncio", "h11")
    assert "pip install 'parley[service-fast]'" in capsys.readouterr().err
