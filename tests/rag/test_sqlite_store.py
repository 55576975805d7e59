"""The embedded store's own behaviour: its file, its layout, its in-memory matrices.

What every store does runs on it through the store contract (`test_sqlite_contract.py`);
`record` and `chunks_for` here build the contract's documents too.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from parley.errors import RetrievalError
from parley.rag import Chunk, DocumentRecord, SQLiteIndexStore, _vectors, document_id


def record(source: str, content_hash: str = "h1", chunks: int = 0) -> DocumentRecord:
    return DocumentRecord(
        doc_id=document_id(source),
        source=source,
        content_hash=content_hash,
        pipeline="test",
        format="text",
        title=source.upper(),
        size=10,
        chunk_count=chunks,
    )


def chunks_for(source: str, texts: list[str], **where: object) -> list[Chunk]:
    doc_id = document_id(source)
    return [
        Chunk(doc_id, i, text, len(text.split()), source, **where)  # type: ignore[arg-type]
        for i, text in enumerate(texts)
    ]


async def test_a_file_that_is_not_an_index_is_refused_with_its_name(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"this is not a database at all " * 200)
    with pytest.raises(RetrievalError, match=r"notes\.txt is not a usable index"):
        await SQLiteIndexStore.open(junk)


async def test_a_later_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    await (await SQLiteIndexStore.open(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(RetrievalError, match="later parley"):
        await SQLiteIndexStore.open(path)


async def test_a_changed_keyword_analysis_rebuilds_the_fts_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = await SQLiteIndexStore.open(path)
    await store.put_document(record("a"), chunks_for("a", ["自然语言"]), None)
    await store.close()
    with sqlite3.connect(path) as db:  # as if made by an older analysis: CJK unsplit
        db.execute("UPDATE meta SET value = 'old' WHERE key = 'keyword_analyzer'")
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
        db.execute("INSERT INTO chunks_fts (rowid, body) SELECT id, text FROM chunks")
    store = await SQLiteIndexStore.open(path)
    try:
        assert [h.text for h in await store.keyword_search("语言", 5)] == ["自然语言"]
    finally:
        await store.close()


async def test_large_matrices_search_sign_bits_first_and_still_find_the_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small limit puts this index over it, so the sign-bit pass runs (counted).
    monkeypatch.setattr(_vectors, "EXACT_LIMIT", 50)
    passes = []
    shortlist = _vectors.VectorMatrix._shortlist

    def counted(self: _vectors.VectorMatrix, *args: object) -> object:
        result = shortlist(self, *args)  # type: ignore[arg-type]
        passes.append(len(result))
        return result

    monkeypatch.setattr(_vectors.VectorMatrix, "_shortlist", counted)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((6000, 64)).astype(np.float32)
    store = await SQLiteIndexStore.open(tmp_path / "big.db")
    try:
        await store.bind_embedding("test/model", 64)
        texts = [f"row {i}" for i in range(6000)]
        await store.put_document(record("big"), chunks_for("big", texts), vectors)
        for probe in vectors[:20] + 0.3 * rng.standard_normal((20, 64)).astype(np.float32):
            exact = vectors @ probe / np.linalg.norm(vectors, axis=1) / np.linalg.norm(probe)
            hits = await store.vector_search(probe, 3)
            assert hits[0].text == f"row {int(np.argmax(exact))}"
            assert hits[0].score == pytest.approx(float(exact.max()), rel=1e-5)
    finally:
        await store.close()
    assert passes == [_vectors.candidates(3)] * 20  # 400 of 6,000 rows scored exactly
