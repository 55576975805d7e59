"""The embedded store: one SQLite file, replaced a document at a time, one model's vectors."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from parley.errors import IndexMismatchError, RetrievalError
from parley.rag import Chunk, DocumentRecord, IndexStore, SQLiteIndexStore, _vectors, document_id


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


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteIndexStore]:
    opened = await SQLiteIndexStore.open(tmp_path / "index.db")
    yield opened
    await opened.close()


async def test_it_is_an_index_store(store: SQLiteIndexStore) -> None:
    assert isinstance(store, IndexStore)
    info = await store.info()
    assert (info.embedding_model, info.dimensions, info.schema_version) == (None, None, 1)


async def test_keyword_search_ranks_by_bm25_and_keeps_where_chunks_came_from(
    store: SQLiteIndexStore,
) -> None:
    texts = [
        "The refund policy: refunds are paid within 14 days of a return.",
        "Shipping takes three days.",
        "Opening hours are nine to five; refunds are not paid on Sundays.",
    ]
    await store.put_document(record("a"), chunks_for("a", texts, page=3), None)

    hits = await store.keyword_search("How are refunds paid?", 5)

    assert [h.chunk.index for h in hits] == [0, 2]  # two matches of `refund`, one, none
    assert hits[0].score > hits[1].score > 0
    first = hits[0]
    assert (first.source, first.page, first.chunk.title, first.mode) == ("a", 3, "A", "keyword")
    assert first.chunk_id == f"{document_id('a')}:0"


async def test_keyword_search_stems_and_reads_cjk(store: SQLiteIndexStore) -> None:
    await store.put_document(
        record("zh"),
        chunks_for(
            "zh", ["自然语言处理是人工智能的一个分支", "天气预报说明天下雨", "running shoes"]
        ),
        None,
    )
    assert [h.text for h in await store.keyword_search("语言", 5)] == [
        "自然语言处理是人工智能的一个分支"
    ]
    assert [h.text for h in await store.keyword_search("明天会下雨吗", 5)] == ["天气预报说明天下雨"]
    assert [h.text for h in await store.keyword_search("shoe runs", 5)] == ["running shoes"]


async def test_putting_a_document_again_replaces_all_of_it(store: SQLiteIndexStore) -> None:
    await store.put_document(record("a"), chunks_for("a", ["alpha one", "alpha two"]), None)
    await store.put_document(record("b"), chunks_for("b", ["beta"]), None)
    await store.put_document(record("a", "h2"), chunks_for("a", ["gamma"]), None)

    assert [c.text for c in await store.chunks(document_id("a"))] == ["gamma"]
    assert await store.keyword_search("alpha", 5) == []  # the old terms left the FTS index
    assert [h.text for h in await store.keyword_search("gamma beta", 5)] in (
        ["gamma", "beta"],
        ["beta", "gamma"],
    )
    held = {d.source: (d.content_hash, d.chunk_count) for d in await store.documents()}
    assert held == {"a": ("h2", 1), "b": ("h1", 1)}


async def test_removing_drops_chunks_terms_and_vectors(store: SQLiteIndexStore) -> None:
    await store.bind_embedding("test/model", 3)
    await store.put_document(record("a"), chunks_for("a", ["alpha"]), np.eye(3)[:1])
    await store.put_document(record("b"), chunks_for("b", ["beta"]), np.eye(3)[1:2])
    assert len(await store.vector_search(np.ones(3, np.float32), 5)) == 2

    assert await store.remove_documents([document_id("a"), document_id("nope")]) == 1

    assert [d.source for d in await store.documents()] == ["b"]
    assert await store.keyword_search("alpha", 5) == []
    assert [h.source for h in await store.vector_search(np.ones(3, np.float32), 5)] == ["b"]


async def test_vector_search_is_cosine_best_first(store: SQLiteIndexStore) -> None:
    await store.bind_embedding("test/model", 2)
    vectors = np.array([[1, 0], [0, 5], [3, 3]], dtype=np.float32)  # lengths differ
    await store.put_document(record("a"), chunks_for("a", ["x", "y", "xy"]), vectors)

    hits = await store.vector_search(np.array([2, 0.1], np.float32), 2)

    assert [h.text for h in hits] == ["x", "xy"]
    assert hits[0].score == pytest.approx(2 / np.hypot(2, 0.1))
    assert hits[1].score == pytest.approx((2 + 0.1) / np.sqrt(2) / np.hypot(2, 0.1))
    assert hits[0].mode == "vector"


async def test_another_model_or_size_is_refused(store: SQLiteIndexStore, tmp_path: Path) -> None:
    await store.bind_embedding("local/minilm", 3)
    await store.bind_embedding("local/minilm", 3)  # the same again is fine
    with pytest.raises(IndexMismatchError, match=r"local/minilm \(3 dimensions\), not of other/m"):
        await store.bind_embedding("other/m", 3)
    with pytest.raises(IndexMismatchError, match="not of local/minilm \\(4\\)"):
        await store.bind_embedding("local/minilm", 4)
    with pytest.raises(IndexMismatchError, match="4 dimensions cannot go into an index of 3"):
        await store.put_document(record("a"), chunks_for("a", ["x"]), np.ones((1, 4)))
    with pytest.raises(IndexMismatchError, match="needs its vectors"):
        await store.put_document(record("a"), chunks_for("a", ["x"]), None)
    with pytest.raises(IndexMismatchError, match="4 dimensions"):
        await store.vector_search(np.ones(4, np.float32), 3)
    assert await store.documents() == []  # nothing refused was stored

    # The binding is in the file: another store on it refuses the same way.
    again = await SQLiteIndexStore.open(tmp_path / "index.db")
    try:
        with pytest.raises(IndexMismatchError):
            await again.bind_embedding("other/m", 3)
    finally:
        await again.close()


async def test_searches_can_be_limited_to_some_documents(store: SQLiteIndexStore) -> None:
    await store.bind_embedding("test/model", 2)
    for name in ("a", "b", "c"):
        await store.put_document(
            record(name), chunks_for(name, [f"common {name}0", f"common {name}1"]), np.ones((2, 2))
        )
    only = [document_id("a"), document_id("c")]
    assert {h.source for h in await store.keyword_search("common", 10, only)} == {"a", "c"}
    assert {h.source for h in await store.vector_search(np.ones(2, np.float32), 10, only)} == {
        "a",
        "c",
    }
    assert [(c.source, c.index) for c in await store.front_chunks(1, only)] == [("a", 0), ("c", 0)]
    assert await store.keyword_search("common", 10, []) == []


async def test_front_chunks_are_each_documents_first(store: SQLiteIndexStore) -> None:
    await store.put_document(record("b"), chunks_for("b", ["b0", "b1", "b2"]), None)
    await store.put_document(record("a"), chunks_for("a", ["a0"]), None)
    front = await store.front_chunks(2)
    assert [c.text for c in front] == ["a0", "b0", "b1"]


async def test_a_second_store_on_the_file_sees_every_commit(tmp_path: Path) -> None:
    # Two stores are two sets of connections, as two processes would have.
    writer = await SQLiteIndexStore.open(tmp_path / "shared.db")
    reader = await SQLiteIndexStore.open(tmp_path / "shared.db")
    try:
        await writer.bind_embedding("test/model", 2)
        await writer.put_document(record("a"), chunks_for("a", ["east"]), np.array([[1.0, 0.0]]))
        assert [h.text for h in await reader.vector_search(np.array([1, 0], np.float32), 5)] == [
            "east"
        ]
        await writer.put_document(record("b"), chunks_for("b", ["north"]), np.array([[0.0, 1.0]]))
        await writer.put_document(
            record("a", "h2"), chunks_for("a", ["west"]), np.array([[-1, 0.0]])
        )
        hits = await reader.vector_search(np.array([1, 0], np.float32), 5)
        assert [h.text for h in hits] == ["north", "west"]  # the reader's matrix caught up
        assert [h.text for h in await reader.keyword_search("west", 5)] == ["west"]
    finally:
        await writer.close()
        await reader.close()


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
