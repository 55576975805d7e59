"""Keyword search over postings held in memory: FTS5's BM25, kept up to date, bounded.

The reference is FTS5 itself: `bm25()` over the store's FTS table, asked on a connection of
the test's own, as the store searched before its postings moved into memory.
"""

from __future__ import annotations

import os
import sqlite3
import textwrap
from collections.abc import AsyncIterator, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from parley.rag import SQLiteIndexStore, document_id, keyword_query, sqlite_store
from parley.rag._vectors import best_positions
from tests._process import run_python
from tests.rag.test_sqlite_store import chunks_for, record

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).parents[2]

# Stems shared by several words (pump, pumps, pumping), diacritics (école / ecole), CJK text
# (indexed as character pairs), and, drawn most often (Zipf), words so common that their idf
# falls to FTS5's floor.
WORDS = [
    *("pump", "pumps", "pumping", "valve", "valves", "motor", "cable", "filter", "sensor"),
    *("gear", "belt", "fan", "seal", "hose", "clamp", "école", "ecole", "naïve", "自然语言"),
    *("语言处理", "run", "running", "runs", "the", "and", "impeller", "bolt", "floor"),
]


def texts(rng: np.random.Generator, count: int) -> list[str]:
    """Chunks of Zipf-distributed words, 0 to 40 of them (an empty chunk holds no term)."""
    weights = 1 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    return [
        " ".join(rng.choice(WORDS, size=int(rng.integers(0, 40)), p=weights)) for _ in range(count)
    ]


def queries(rng: np.random.Generator, count: int) -> list[str]:
    extra = ["absent", "pump pumping", "自然", "Ecole NAIVE", "runs the running"]
    drawn = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 5)))) for _ in range(count)]
    return extra + drawn


def fts5_bm25(
    path: Path, query: str, top_k: int, doc_ids: Sequence[str] | None = None
) -> list[tuple[str, float]]:
    """FTS5's ranking of `query`: (chunk id, score) pairs, best first (ties: lower rowid)."""
    words = keyword_query(query)
    if not words:
        return []  # nothing to search for: the store answers nothing too
    match = " OR ".join(f'"{word}"' for word in words)
    where = "" if doc_ids is None else f"AND c.doc_id IN ({', '.join('?' * len(doc_ids))})"
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT c.doc_id, c.idx, -bm25(chunks_fts) AS score FROM chunks_fts f "
            f"JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ? {where} "
            "ORDER BY score DESC, f.rowid LIMIT ?",
            [match, *(doc_ids or []), top_k],
        ).fetchall()
    return [(f"{doc}:{idx}", score) for doc, idx, score in rows]


async def assert_ranked_as_fts5(store: SQLiteIndexStore, rng: np.random.Generator) -> None:
    """Every query's hits are FTS5's, in FTS5's order, with FTS5's scores."""
    names = [d.doc_id for d in await store.documents()]
    for query in queries(rng, 25):
        for doc_ids in (None, names[::2]):
            hits = await store.keyword_search(query, 1000, doc_ids)
            expected = fts5_bm25(store.path, query, 1000, doc_ids)
            assert [h.chunk_id for h in hits] == [chunk for chunk, _ in expected], query
            assert [h.score for h in hits] == pytest.approx([s for _, s in expected], rel=1e-12)
            top = await store.keyword_search(query, 5, doc_ids)
            assert [h.chunk_id for h in top] == [chunk for chunk, _ in expected[:5]], query


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteIndexStore]:
    opened = await SQLiteIndexStore.open(tmp_path / "index.db")
    yield opened
    await opened.close()


@pytest.fixture
def full_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the times a store reads every posting from the file (one entry per read)."""
    reads: list[int] = []
    read = sqlite_store.read_postings

    def counted(*args: object) -> object:
        reads.append(1)
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "read_postings", counted)
    return reads


async def put(store: SQLiteIndexStore, name: str, chunk_texts: list[str], version: str) -> None:
    await store.put_document(record(name, version), chunks_for(name, chunk_texts), None)


async def test_rankings_and_scores_are_fts5s_through_every_change(
    store: SQLiteIndexStore, full_reads: list[int]
) -> None:
    rng = np.random.default_rng(11)
    for name in "abcdef":
        await put(store, name, texts(rng, 40), "h1")
    await assert_ranked_as_fts5(store, rng)
    assert full_reads == [1]

    # Replaced, removed and added documents: N, every n_i and the mean length move.
    await put(store, "b", texts(rng, 25), "h2")
    await store.remove_documents([document_id("d")])
    await assert_ranked_as_fts5(store, rng)
    await put(store, "g", texts(rng, 5), "h1")
    await put(store, "a", ["pump"] * 3, "h3")
    await assert_ranked_as_fts5(store, rng)
    assert full_reads == [1]  # brought up to date by reading the changed chunks only

    for name in "abceg":  # more than a fifth of the chunks held, at once: read all again
        await put(store, name, texts(rng, 30), "h4")
    await assert_ranked_as_fts5(store, rng)
    assert full_reads == [1, 1]


async def test_another_process_s_commits_reach_the_next_search(
    store: SQLiteIndexStore, tmp_path: Path
) -> None:
    rng = np.random.default_rng(5)
    for name in "abc":
        await put(store, name, texts(rng, 30), "h1")
    await assert_ranked_as_fts5(store, rng)  # the postings are in memory now

    writer = textwrap.dedent(
        f"""
        import asyncio
        from parley.rag import SQLiteIndexStore, document_id
        from tests.rag.test_sqlite_store import chunks_for, record

        async def main():
            store = await SQLiteIndexStore.open({str(store.path)!r})
            await store.put_document(
                record("b", "h2"), chunks_for("b", ["turbine bolt", "floor pump"]), None
            )
            await store.put_document(record("z", "h1"), chunks_for("z", ["naïve turbine"]), None)
            await store.remove_documents([document_id("c")])
            await store.close()

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    run_python(writer, env=env, cwd=ROOT, timeout=60)

    hits = await store.keyword_search("turbine", 10)
    assert sorted(h.text for h in hits) == ["naïve turbine", "turbine bolt"]
    assert {h.source for h in await store.keyword_search("pump valve", 100)} == {"a", "b"}
    await assert_ranked_as_fts5(store, rng)


async def test_a_word_fts5_splits_is_matched_as_the_phrase_it_is(
    store: SQLiteIndexStore,
) -> None:
    # U+19B0 is a letter to Python (one query word) and a separator to FTS5's Unicode 6.1
    # tables: FTS5 reads the word as the phrase "ab cd", which needs the terms side by side.
    await put(store, "a", ["ab cd", "cd ab", "ab then cd", "ab"], "h1")
    word = "ab\u19b0cd"
    assert keyword_query(word) == [word]
    hits = await store.keyword_search(word, 10)
    assert [h.text for h in hits] == ["ab cd"]
    assert [(h.chunk_id, h.score) for h in hits] == [
        (chunk, pytest.approx(score, rel=1e-12)) for chunk, score in fts5_bm25(store.path, word, 10)
    ]


async def test_equal_scores_go_to_the_older_chunk_even_at_the_cut(
    store: SQLiteIndexStore,
) -> None:
    await put(store, "a", ["other words"] + ["pump seal"] * 6, "h1")
    hits = await store.keyword_search("pump", 3)
    assert [h.chunk.index for h in hits] == [1, 2, 3]
    assert len({h.score for h in hits}) == 1


def test_best_positions_keep_the_first_of_equal_scores_at_the_cut() -> None:
    scores = np.array([1.0, 5.0, 3.0, 3.0, 3.0, 3.0, 3.0, 0.5, 3.0])
    for top_k in range(1, 10):
        expected = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:top_k]
        assert best_positions(scores, top_k).tolist() == expected


async def test_memory_is_reported_and_stays_bounded_as_documents_are_replaced(
    store: SQLiteIndexStore,
) -> None:
    rng = np.random.default_rng(3)
    await store.bind_embedding("test/model", 4)
    corpus = {name: texts(rng, 50) for name in "abcd"}
    for name, chunk_texts in corpus.items():
        vectors = rng.standard_normal((len(chunk_texts), 4))
        await store.put_document(record(name), chunks_for(name, chunk_texts), vectors)
    assert store.memory().keyword == 0  # nothing loaded before the first search

    await store.keyword_search("pump", 5)
    loaded = store.memory().keyword
    postings = sum(len(set(keyword_query(t))) for texts_ in corpus.values() for t in texts_)
    assert loaded > 5 * postings  # a row id and a count for each (term, chunk) at least
    assert store.memory().vector == 0
    await store.vector_search(np.ones(4, np.float32), 5)
    assert store.memory().vector >= 200 * 4 * 4  # every vector's floats
    assert store.memory().total == store.memory().keyword + store.memory().vector

    # The same document replaced again and again: its old postings die, new ones are added,
    # and merging keeps the memory near what the live chunks need.
    sizes = []
    for version in range(30):
        vectors = rng.standard_normal((50, 4))
        await store.put_document(record("a", f"v{version}"), chunks_for("a", corpus["a"]), vectors)
        assert len(await store.keyword_search("pump", 500)) == len(
            fts5_bm25(store.path, "pump", 500)
        )
        sizes.append(store.memory().keyword)
    assert max(sizes) < 1.6 * loaded


async def test_closing_lets_go_of_the_memory(tmp_path: Path) -> None:
    store = await SQLiteIndexStore.open(tmp_path / "index.db")
    await put(store, "a", ["pump seal"], "h1")
    await store.keyword_search("pump", 5)
    assert store.memory().keyword > 0
    await store.close()
    assert store.memory().keyword == 0


async def test_an_index_emptied_and_filled_again_and_chunks_without_terms(
    store: SQLiteIndexStore,
) -> None:
    await put(store, "a", ["pump seal", "", "..."], "h1")
    assert [h.text for h in await store.keyword_search("pump", 5)] == ["pump seal"]
    await store.remove_documents([document_id("a")])
    assert await store.keyword_search("pump", 5) == []
    await put(store, "b", ["", "seal"], "h1")
    assert await store.keyword_search("pump", 5) == []
    await put(store, "c", ["pump pump", "pump"], "h1")
    hits = await store.keyword_search("pump seal", 5)
    assert [(h.chunk_id, h.score) for h in hits] == [
        (chunk, pytest.approx(score, rel=1e-12))
        for chunk, score in fts5_bm25(store.path, "pump seal", 5)
    ]
    assert len(hits) == 3
