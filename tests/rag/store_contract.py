"""What every `IndexStore` does, whatever its engine: one set of tests for all of them.

A test module subclasses `StoreContract` and gives two fixtures:

- `store`: an open, empty store, closed after the test;
- `reopen`: an async callable opening another store on the same index (another set of
  connections, as another process would have), which the test closes.

The SQLite store runs it in `test_sqlite_contract.py`, the PostgreSQL store in
`test_postgres_store.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from parley.errors import IndexMismatchError
from parley.rag import DocumentIndex, IndexStore, document_id
from tests.rag.test_sqlite_store import chunks_for, record

Reopen = Callable[[], Awaitable[IndexStore]]


class StoreContract:
    """The behaviour `IndexStore`'s docstring promises (not collected: no `Test` prefix)."""

    async def test_it_is_an_index_store(self, store: IndexStore) -> None:
        assert isinstance(store, IndexStore)
        info = await store.info()
        assert (info.embedding_model, info.dimensions, info.schema_version) == (None, None, 1)

    async def test_keyword_search_ranks_by_bm25_and_keeps_where_chunks_came_from(
        self, store: IndexStore
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

    async def test_rare_terms_weigh_more_than_common_ones(self, store: IndexStore) -> None:
        # BM25's idf: `pump` is in every chunk, `impeller` in one; both chunks match one term
        # once, and the one matching the rare term ranks first.
        texts = [f"pump model {i} bolted to the floor" for i in range(6)]
        texts.append("the impeller is replaced yearly")
        await store.put_document(record("a"), chunks_for("a", texts), None)
        hits = await store.keyword_search("impeller pump", 3)
        assert hits[0].text == "the impeller is replaced yearly"
        assert hits[0].score > 2 * hits[1].score

    async def test_keyword_search_stems_and_reads_cjk(self, store: IndexStore) -> None:
        texts = ["自然语言处理是人工智能的一个分支", "天气预报说明天下雨", "running shoes"]
        await store.put_document(record("zh"), chunks_for("zh", texts), None)
        assert [h.text for h in await store.keyword_search("语言", 5)] == [texts[0]]
        assert [h.text for h in await store.keyword_search("明天会下雨吗", 5)] == [texts[1]]
        assert [h.text for h in await store.keyword_search("shoe runs", 5)] == [texts[2]]

    async def test_case_and_diacritics_do_not_matter(self, store: IndexStore) -> None:
        await store.put_document(record("fr"), chunks_for("fr", ["L'ÉCOLE est fermée"]), None)
        assert len(await store.keyword_search("ecole", 5)) == 1
        assert len(await store.keyword_search("Fermee", 5)) == 1

    async def test_putting_a_document_again_replaces_all_of_it(self, store: IndexStore) -> None:
        await store.put_document(record("a"), chunks_for("a", ["alpha one", "alpha two"]), None)
        await store.put_document(record("b"), chunks_for("b", ["beta"]), None)
        await store.put_document(record("a", "h2"), chunks_for("a", ["gamma"]), None)

        assert [c.text for c in await store.chunks(document_id("a"))] == ["gamma"]
        assert await store.keyword_search("alpha", 5) == []  # the old terms left the index
        found = [h.text for h in await store.keyword_search("gamma beta", 5)]
        assert sorted(found) == ["beta", "gamma"]
        held = {d.source: (d.content_hash, d.chunk_count) for d in await store.documents()}
        assert held == {"a": ("h2", 1), "b": ("h1", 1)}

    async def test_a_refused_put_leaves_the_old_version(self, store: IndexStore) -> None:
        await store.bind_embedding("test/model", 2)
        await store.put_document(record("a"), chunks_for("a", ["old text"]), np.eye(2)[:1])
        with pytest.raises(IndexMismatchError):
            await store.put_document(
                record("a", "h2"), chunks_for("a", ["new text", "more"]), np.ones((2, 3))
            )
        assert [(d.content_hash, d.chunk_count) for d in await store.documents()] == [("h1", 1)]
        assert [c.text for c in await store.chunks(document_id("a"))] == ["old text"]
        assert [h.text for h in await store.vector_search(np.array([1, 0], np.float32), 5)] == [
            "old text"
        ]

    async def test_removing_drops_chunks_terms_and_vectors(self, store: IndexStore) -> None:
        await store.bind_embedding("test/model", 3)
        await store.put_document(record("a"), chunks_for("a", ["alpha"]), np.eye(3)[:1])
        await store.put_document(record("b"), chunks_for("b", ["beta"]), np.eye(3)[1:2])
        assert len(await store.vector_search(np.ones(3, np.float32), 5)) == 2

        assert await store.remove_documents([document_id("a"), document_id("nope")]) == 1

        assert [d.source for d in await store.documents()] == ["b"]
        assert await store.chunks(document_id("a")) == []
        assert await store.keyword_search("alpha", 5) == []
        assert [h.source for h in await store.vector_search(np.ones(3, np.float32), 5)] == ["b"]
        assert await store.remove_documents([]) == 0

    async def test_vector_search_is_cosine_best_first(self, store: IndexStore) -> None:
        await store.bind_embedding("test/model", 2)
        vectors = np.array([[1, 0], [0, 5], [3, 3]], dtype=np.float32)  # lengths differ
        await store.put_document(record("a"), chunks_for("a", ["x", "y", "xy"]), vectors)

        hits = await store.vector_search(np.array([2, 0.1], np.float32), 2)

        assert [h.text for h in hits] == ["x", "xy"]
        assert hits[0].score == pytest.approx(2 / np.hypot(2, 0.1))
        assert hits[1].score == pytest.approx((2 + 0.1) / np.sqrt(2) / np.hypot(2, 0.1))
        assert hits[0].mode == "vector"

    async def test_another_model_or_size_is_refused(
        self, store: IndexStore, reopen: Reopen
    ) -> None:
        await store.bind_embedding("local/minilm", 3)
        await store.bind_embedding("local/minilm", 3)  # the same again is fine
        with pytest.raises(
            IndexMismatchError, match=r"local/minilm \(3 dimensions\), not of other/m"
        ):
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

        # The binding is in the index: another store on it refuses the same way.
        again = await reopen()
        try:
            assert (await again.info()).embedding_model == "local/minilm"
            with pytest.raises(IndexMismatchError):
                await again.bind_embedding("other/m", 3)
        finally:
            await again.close()

    async def test_vectors_without_a_model_are_refused(self, store: IndexStore) -> None:
        with pytest.raises(IndexMismatchError, match="no embedding model"):
            await store.put_document(record("a"), chunks_for("a", ["x"]), np.ones((1, 2)))
        with pytest.raises(IndexMismatchError, match="no vectors"):
            await store.vector_search(np.ones(2, np.float32), 3)
        assert await store.documents() == []

    async def test_a_document_without_text_needs_no_vectors(self, store: IndexStore) -> None:
        empty = np.empty((0, 0), dtype=np.float32)  # what DocumentIndex embeds for no chunks
        await store.put_document(record("first"), [], empty)  # before any model is bound
        await store.bind_embedding("test/model", 2)
        await store.put_document(record("blank"), [], None)
        await store.put_document(record("x"), chunks_for("x", ["x"]), np.ones((1, 2)))
        held = {d.source: d.chunk_count for d in await store.documents()}
        assert held == {"blank": 0, "first": 0, "x": 1}
        assert await store.chunks(document_id("blank")) == []

    async def test_searches_can_be_limited_to_some_documents(self, store: IndexStore) -> None:
        await store.bind_embedding("test/model", 2)
        for name in ("a", "b", "c"):
            await store.put_document(
                record(name),
                chunks_for(name, [f"common {name}0", f"common {name}1"]),
                np.ones((2, 2)),
            )
        only = [document_id("a"), document_id("c")]
        assert {h.source for h in await store.keyword_search("common", 10, only)} == {"a", "c"}
        similar = await store.vector_search(np.ones(2, np.float32), 10, only)
        assert {h.source for h in similar} == {"a", "c"}
        assert len(similar) == 4
        front = await store.front_chunks(1, only)
        assert [(c.source, c.index) for c in front] == [("a", 0), ("c", 0)]
        assert await store.keyword_search("common", 10, []) == []
        assert await store.vector_search(np.ones(2, np.float32), 10, []) == []

    async def test_front_chunks_are_each_documents_first(self, store: IndexStore) -> None:
        await store.put_document(record("b"), chunks_for("b", ["b0", "b1", "b2"]), None)
        await store.put_document(record("a"), chunks_for("a", ["a0"]), None)
        front = await store.front_chunks(2)
        assert [c.text for c in front] == ["a0", "b0", "b1"]

    async def test_front_chunks_read_no_more_than_their_limit(self, store: IndexStore) -> None:
        for name in ("c", "b", "a"):
            texts = [f"{name}{i}" for i in range(3)]
            await store.put_document(record(name), chunks_for(name, texts), None)
        assert [c.text for c in await store.front_chunks(2, limit=3)] == ["a0", "a1", "b0"]
        assert len(await store.front_chunks(2, limit=None)) == 6
        assert await store.front_chunks(2, limit=0) == []
        only = [document_id("c"), document_id("b")]
        assert [c.text for c in await store.front_chunks(2, only, limit=3)] == ["b0", "b1", "c0"]

    async def test_a_query_without_terms_finds_nothing_by_keyword(
        self, store: IndexStore, tmp_path: Path
    ) -> None:
        # A question of stop words, a lone sign, an operator: no term to rank on. The
        # documents' openings at score 1.0 are no answer to them.
        reads = _FrontReads(store)
        index = DocumentIndex(reads, None)  # type: ignore[arg-type]
        for n in range(6):
            (tmp_path / f"doc{n}.md").write_text(f"# Part {n}\n\nPumps and valves, part {n}.\n")
        await index.add(sorted(tmp_path.glob("*.md")))
        for query in ("What is it?", "*", "AND", "the"):
            assert await index.search(query, mode="keyword") == [], query
        assert reads.sizes == []  # no front page was read for them
        # The front page, asked for, reads no more than top_k chunks.
        hits = await index.search("anything", mode="front_page", top_k=2)
        assert [(Path(h.source).name, h.mode) for h in hits] == [
            ("doc0.md", "front_page"),
            ("doc1.md", "front_page"),
        ]
        # Qwen-Agent's keyword search gives such a query the front page, bounded alike.
        fallback = await index.search("What is it?", top_k=3, front_page_fallback=True)
        assert [h.mode for h in fallback] == ["front_page"] * 3
        assert reads.sizes == [2, 3]
        # A query with a term is ranked as ever, fallback or not.
        ranked = await index.search("valves part 4", top_k=1, front_page_fallback=True)
        assert [(Path(h.source).name, h.mode) for h in ranked] == [("doc4.md", "keyword")]


class _FrontReads:
    """A store whose `front_chunks` reads are counted (each call's chunks read)."""

    def __init__(self, store: IndexStore) -> None:
        self.store = store
        self.sizes: list[int] = []

    async def front_chunks(self, *args: Any, **kwargs: Any) -> Any:
        chunks = await self.store.front_chunks(*args, **kwargs)
        self.sizes.append(len(chunks))
        return chunks

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def test_a_second_store_on_the_index_sees_every_commit(
        self, store: IndexStore, reopen: Reopen
    ) -> None:
        reader = await reopen()
        try:
            await store.bind_embedding("test/model", 2)
            await store.put_document(record("a"), chunks_for("a", ["east"]), np.array([[1.0, 0]]))
            east = np.array([1, 0], np.float32)
            assert [h.text for h in await reader.vector_search(east, 5)] == ["east"]
            await store.put_document(record("b"), chunks_for("b", ["north"]), np.array([[0, 1.0]]))
            await store.put_document(
                record("a", "h2"), chunks_for("a", ["west"]), np.array([[-1, 0.0]])
            )
            assert [h.text for h in await reader.vector_search(east, 5)] == ["north", "west"]
            assert [h.text for h in await reader.keyword_search("west", 5)] == ["west"]
            assert [d.content_hash for d in await reader.documents()] == ["h2", "h1"]
        finally:
            await reader.close()
