"""`parley index` and `parley ask`: real processes, the embedded defaults, offline."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from parley.models.testing import ScriptedModel
from parley.rag import DocumentIndex
from parley.rag.assistant import Assistant
from parley.rag.cli import _answer, _Bar
from tests._requires import require_module
from tests.cli._run import keyless_env, run_parley

HANDBOOK = """# Refund policy

Customers may return any item within 30 days of delivery. Refunds are paid to the original
payment method within 14 days after the returned item arrives at our warehouse in Lyon.
"""


def parley(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = keyless_env(XDG_CACHE_HOME=str(cwd / "cache"))
    return run_parley(*args, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "handbook.md").write_text(HANDBOOK)
    return folder


def test_index_builds_then_updates_only_what_changed(tmp_path: Path, docs: Path) -> None:
    first = parley(tmp_path, "index", str(docs), "--embedding", "none")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("1 added: ")
    location = Path(first.stdout.strip().split(": ", 1)[1])
    assert location.parent == tmp_path / "cache" / "parley" / "indexes"
    assert location.is_file()
    assert "indexed 1/1 handbook.md" in first.stderr  # progress, one line per document

    (docs / "faq.md").write_text("# FAQ\n\nAsk us anything.\n")
    second = parley(tmp_path, "index", str(docs), "--embedding", "none")
    assert second.stdout.startswith("1 added, 1 unchanged: ")

    (docs / "faq.md").unlink()
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    third = parley(tmp_path, "index", str(docs), "--embedding", "none")
    assert third.returncode == 1
    assert third.stdout.startswith("1 unchanged, 1 removed, 1 failed: ")
    assert "broken.pdf" in third.stderr


def test_a_terminal_gets_a_progress_bar_naming_each_document() -> None:
    require_module("tqdm", "rag")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    bar = _Bar(out)
    for done in (1, 2, 3):
        bar(done, 3, f"/docs/part{done}.md")
    bar.close()
    drawn = out.getvalue().split("\r")
    for done in (1, 2, 3):  # each document redraws the one line
        assert any(f"{done}/3" in line and f"part{done}.md" in line for line in drawn), drawn
    assert "\n" not in out.getvalue()  # a bar, not a line per document
    assert drawn[-1] == ""  # and cleared once done


async def test_escape_sequences_in_names_and_answers_are_shown_not_obeyed(tmp_path: Path) -> None:
    # A folder's file names and its documents' text are anyone's: a terminal must not obey
    # them (a retitled window, a cleared screen, a name that reads backwards).
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "evil\x1b]0;owned\x07\u202egpj.md").write_text("# Kettles\n\nDescale it monthly.\n")
    index = await DocumentIndex.open(tmp_path / "i.sqlite", embedding_model=None)
    try:
        progress = io.StringIO()
        await index.sync(docs, progress=_Bar(progress))
        model = ScriptedModel(["Monthly \x1b[2J[1].\n\tDone."], stream=True)
        out = io.StringIO()
        assert await _answer(Assistant(index, model), "How often is it descaled?", out) == 0
    finally:
        await index.close()
    assert progress.getvalue() == "indexed 1/1 evil\\x1b]0;owned\\x07\\u202egpj.md\n"
    answer, _, sources = out.getvalue().partition("\nSources:\n")
    assert answer == "Monthly \\x1b[2J[1].\n\tDone.\n"  # line breaks and tabs kept
    assert sources == "  [1] evil\\x1b]0;owned\\x07\\u202egpj.md: Kettles\n"


def test_index_refuses_a_missing_path_clearly(tmp_path: Path) -> None:
    done = parley(tmp_path, "index", str(tmp_path / "nowhere.md"), "--index", "i.sqlite")
    assert done.returncode == 1
    assert "nowhere.md" in done.stderr
    assert "Traceback" not in done.stderr


def test_ask_answers_from_the_documents_with_sources(tmp_path: Path, docs: Path) -> None:
    require_module("llama_cpp", "local")
    require_module("onnxruntime", "embeddings")
    done = parley(tmp_path, "ask", "--docs", str(docs), "In which city is the warehouse?")
    assert done.returncode == 0, done.stderr
    answer, _, sources = done.stdout.partition("\nSources:\n")
    assert "Lyon" in answer
    assert sources.strip() == "[1] handbook.md: Refund policy"
