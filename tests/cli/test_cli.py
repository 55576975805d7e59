"""The `parley` command, driven in-process with a scripted provider."""

from __future__ import annotations

import importlib.metadata
import io
import sys
from typing import Any

import pytest

from parley import cli
from parley.models import ChatModel, Credential, credentials
from parley.models.testing import ScriptedModel


class _EchoModel(ScriptedModel):
    """Answers every question with its last words reversed, streamed in small chunks."""

    def __init__(self, credential: Any = None, model: str = "echo", **kwargs: Any) -> None:
        super().__init__(model=model, chunk_size=3, **kwargs)

    def _next(self, request: Any) -> Any:
        self.steps.append("echo: " + request.messages[-1].text[::-1])
        return super()._next(request)


class _EchoCredential(Credential):
    type: str = "echo-test"

    @classmethod
    def chat_model_classes(cls) -> list[type[ChatModel]]:
        return [_EchoModel]


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"parley {importlib.metadata.version('parley')}\n"


def test_chat_streams_one_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--model", "echo-test:any", "hello", "there"]) == 0
    out = capsys.readouterr()
    assert out.out == "echo: ereht olleh\n"
    assert "Loading echo-test:any" in out.err


def test_chat_reads_a_conversation_from_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\n\nsecond\n/exit\nnever\n"))
    assert cli.main(["chat", "--model", "echo-test:any", "--system", "be kind"]) == 0
    assert capsys.readouterr().out == "echo: tsrif\necho: dnoces\n"


def test_unknown_provider_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--model", "nosuch:model", "hi"]) == 2
    assert "unknown credential type 'nosuch'" in capsys.readouterr().err


def test_models_lists_cards(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["provider", "model", "label", "status", "context", "input"]


def test_models_lists_embedding_cards_with_their_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["models", "--embeddings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["provider", "model", "label", "status", "context", "dimensions"]
    rows = {tuple(line.split()[:2]): line for line in lines[1:]}
    assert rows[("local", "all-minilm-l6-v2")].rstrip().endswith("384")
    assert rows[("openai", "text-embedding-3-small")].rstrip().endswith("1-1536")
    assert rows[("dashscope", "text-embedding-v4")].rstrip().endswith("64")  # its list's end
    assert ("gemini", "gemini-embedding-001") in rows
    assert any(key[0] == "ollama" for key in rows)


def test_a_provider_whose_cards_cannot_load_hides_no_other(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class _BrokenCredential(Credential):
        type: str = "broken-cards-test"

        @classmethod
        def list_models(cls) -> list[Any]:
            raise ModuleNotFoundError("No module named 'gone'")

    try:
        assert cli.main(["models"]) == 1
    finally:
        credentials._REGISTRY.pop("broken-cards-test", None)
    out = capsys.readouterr()
    assert "broken-cards-test: cannot list its cards: No module named 'gone'" in out.err
    listed = {tuple(line.split()[:2]) for line in out.out.splitlines()[1:]}
    assert {"local", "anthropic", "openai"} <= {kind for kind, _ in listed}


class _CoderModel(ScriptedModel):
    """Asks the code interpreter for 6 * 7, then reports what it printed."""

    def __init__(self, credential: Any = None, model: str = "coder", **kwargs: Any) -> None:
        super().__init__(
            [
                ScriptedModel.tool_call("code_interpreter", {"code": "print(6 * 7)"}),
                lambda request: f"It printed {request.messages[-1].tool_results[0].text.strip()}",
            ],
            model=model,
            **kwargs,
        )


class _CoderCredential(Credential):
    type: str = "coder-test"

    @classmethod
    def chat_model_classes(cls) -> list[type[ChatModel]]:
        return [_CoderModel]


def test_chat_with_tools_runs_the_agent_loop(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["chat", "--tools", "--model", "coder-test:x", "compute 6 * 7"]) == 0
    out = capsys.readouterr()
    assert '[code_interpreter] {"code": "print(6 * 7)"}' in out.err
    assert "[code_interpreter result]" in out.err
    assert "It printed" in out.out
    assert "42" in out.out
