"""A write is one transaction per document: readers never wait for it nor see half of it, and
a process killed or an error raised midway leaves the index as it was before that document."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from parley.rag import DocumentIndex, SQLiteIndexStore, document_id, sqlite_store
from tests._requires import require_module
from tests.rag._stall import STALL

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def _local_model() -> None:
    require_module("onnxruntime", "embeddings")  # the default embedding model's runtime


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The original alpha text.")
    (folder / "b.txt").write_text("Bravo stays as it is.")
    return folder


def rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every stored row, table by table (the FTS table is checked by its own integrity check)."""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        return {
            table: db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("documents", "chunks", "vectors", "meta")
        }


@pytest.fixture
def writer_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def start_writer(
    index: Path, sources: list[Path], env: dict[str, str], *flags: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.rag._stall", *flags, str(index), *map(str, sources)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def finish(writer: subprocess.Popen[str]) -> None:
    """Kill the writer if it still runs, and close its pipes."""
    writer.kill()
    writer.communicate(timeout=30)


@pytest.fixture
def indexed(tmp_path: Path, docs: Path) -> Path:
    path = tmp_path / "index.db"
    index = DocumentIndex.open_sync(path)
    index.add_sync([docs / "a.txt", docs / "b.txt"])
    index.close_sync()
    return path


def texts(path: Path, query: str) -> list[str]:
    index = DocumentIndex.open_sync(path)
    try:
        return [hit.text for hit in index.search_sync(query, top_k=10, mode="keyword")]
    finally:
        index.close_sync()


def test_a_writer_killed_mid_document_leaves_that_document_as_it_was(
    indexed: Path, docs: Path, writer_env: dict[str, str]
) -> None:
    (docs / "c.txt").write_text("Charlie is new.")
    (docs / "a.txt").write_text(f"The replacement alpha text {STALL}.")
    (docs / "d.txt").write_text("Delta comes after.")
    before = rows(indexed)
    writer = start_writer(indexed, [docs / "c.txt", docs / "a.txt", docs / "d.txt"], writer_env)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "stalled\n"
        # Mid-write: another process reads the index as it was before `a`'s transaction.
        assert texts(indexed, "alpha") == ["The original alpha text."]
        assert texts(indexed, "charlie") == ["Charlie is new."]
        writer.send_signal(signal.SIGKILL)
    finally:
        finish(writer)

    after = rows(indexed)
    charlie = document_id(str(docs / "c.txt"))
    assert [d for d in after["documents"] if d[0] != charlie] == before["documents"]
    assert [c for c in after["chunks"] if c[1] != charlie] == before["chunks"]
    assert texts(indexed, "alpha") == ["The original alpha text."]
    assert texts(indexed, "replacement delta") == []
    assert texts(indexed, "charlie") == ["Charlie is new."]  # committed before the kill


def test_readers_see_the_old_document_until_the_new_one_commits(
    indexed: Path, docs: Path, writer_env: dict[str, str]
) -> None:
    (docs / "a.txt").write_text(f"The replacement alpha text {STALL}.")
    reader = DocumentIndex.open_sync(indexed)
    writer = start_writer(indexed, [docs / "a.txt"], writer_env)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "stalled\n"
        assert [h.text for h in reader.search_sync("alpha", mode="keyword")] == [
            "The original alpha text."
        ]
        writer.communicate("go on\n", timeout=60)
        assert writer.returncode == 0
        # The same reader (its vectors and statements cached) sees the new version whole.
        assert [h.text for h in reader.search_sync("alpha", mode="keyword")] == [
            f"The replacement alpha text {STALL}."
        ]
        assert reader.search_sync("original", mode="keyword") == []
    finally:
        finish(writer)
        reader.close_sync()


def test_a_second_writer_waits_for_the_first_and_then_writes(
    indexed: Path, docs: Path, writer_env: dict[str, str]
) -> None:
    (docs / "a.txt").write_text(f"The replacement alpha text {STALL}.")
    (docs / "e.txt").write_text("Echo from the second writer.")
    first = start_writer(indexed, [docs / "a.txt"], writer_env)
    second: subprocess.Popen[str] | None = None
    try:
        assert first.stdout is not None
        assert first.stdout.readline() == "stalled\n"  # it holds the write lock now
        second = start_writer(indexed, [docs / "e.txt"], writer_env, "--announce")
        assert second.stdout is not None
        assert second.stdout.readline() == "writing\n"  # it asks for the lock while held
        first.communicate("go on\n", timeout=60)
        assert second.wait(timeout=60) == 0
        assert second.stdout.read() == "done\n"  # it waited, then wrote
        assert first.returncode == 0
    finally:
        finish(first)
        if second is not None:
            finish(second)
    assert texts(indexed, "alpha") == [f"The replacement alpha text {STALL}."]
    assert texts(indexed, "echo") == ["Echo from the second writer."]


def test_an_error_inside_a_documents_write_rolls_it_back(
    indexed: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = rows(indexed)
    analyse = sqlite_store.keyword_text

    def failing(text: str) -> str:
        if "replacement" in text:  # the new chunks' terms, after the old rows were deleted
            raise RuntimeError("disk on fire")
        return analyse(text)

    monkeypatch.setattr(sqlite_store, "keyword_text", failing)
    (docs / "a.txt").write_text("The replacement alpha text.")
    index = DocumentIndex.open_sync(indexed)
    try:
        with pytest.raises(RuntimeError, match="disk on fire"):
            index.add_sync(docs / "a.txt")
        assert [h.text for h in index.search_sync("alpha", mode="keyword")] == [
            "The original alpha text."
        ]
    finally:
        index.close_sync()
    assert rows(indexed) == before


async def test_an_error_between_documents_keeps_those_done_and_leaves_the_rest(
    indexed: Path, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (docs / "c.txt").write_text("Charlie is new.")
    (docs / "a.txt").write_text("The replacement alpha text.")
    put = SQLiteIndexStore.put_document
    calls = []

    async def crash_after_the_first(self: SQLiteIndexStore, *args: object) -> None:
        calls.append(args[0])
        if len(calls) > 1:
            raise RuntimeError("crashed between two documents")
        await put(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLiteIndexStore, "put_document", crash_after_the_first)
    async with await DocumentIndex.open(indexed) as index:
        with pytest.raises(RuntimeError, match="between two documents"):
            await index.add([docs / "c.txt", docs / "a.txt"])
    monkeypatch.undo()
    async with await DocumentIndex.open(indexed) as index:
        assert [h.text for h in await index.search("charlie", mode="keyword")] == [
            "Charlie is new."
        ]
        assert [h.text for h in await index.search("alpha", mode="keyword")] == [
            "The original alpha text."
        ]
    rows(indexed)  # and the file is sound
