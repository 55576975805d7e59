"""Vector and hybrid retrieval on the embedded local model (all-MiniLM-L6-v2, real vectors)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from parley.errors import IndexMismatchError
from parley.providers.local.embeddings import LocalEmbeddingModel
from parley.rag import RRF_K, DocumentIndex, SearchHit, reciprocal_rank_fusion
from tests._requires import require_module

pytestmark = pytest.mark.timeout(120)

PASSAGES = {
    "cats.txt": "The feline dozed all afternoon on the living room rug.",
    "earnings.txt": "Quarterly earnings rose sharply on strong overseas demand.",
    "rust.txt": "Iron left in damp air slowly corrodes into flaky rust.",
    "pasta.txt": "Boil the spaghetti in salted water until it is al dente.",
    "refunds.txt": "Refunds are paid within fourteen days of receiving the return.",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PASSAGES.items():
        (docs / name).write_text(text)
    return docs


@pytest.fixture
async def index(tmp_path: Path, folder: Path) -> AsyncIterator[DocumentIndex]:
    require_module("onnxruntime", "embeddings")
    opened = await DocumentIndex.open(tmp_path / "index.db")  # the local model by default
    await opened.sync(folder)
    yield opened
    await opened.close()


def names(hits: list[SearchHit]) -> list[str]:
    return [Path(hit.source).name for hit in hits]


async def test_the_default_model_is_the_local_one_and_the_index_records_it(
    index: DocumentIndex,
) -> None:
    assert isinstance(index.embedding_model, LocalEmbeddingModel)
    info = await index.store.info()
    assert (info.embedding_model, info.dimensions) == ("local/all-minilm-l6-v2", 384)


async def test_vector_search_finds_meaning_without_shared_words(index: DocumentIndex) -> None:
    query = "a cat sleeping on a carpet"
    assert await index.search(query, mode="keyword") == []  # no word in common
    hits = await index.search(query, mode="vector", top_k=3)
    assert names(hits)[0] == "cats.txt"
    assert hits[0].mode == "vector"
    assert 0 < hits[0].score <= 1
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert names(await index.search("how long until I get my money back", mode="vector"))[0] == (
        "refunds.txt"
    )


async def test_a_cosine_threshold_keeps_only_close_chunks(index: DocumentIndex) -> None:
    every = await index.search("metal oxidation in humid conditions", mode="vector", top_k=5)
    assert names(every)[0] == "rust.txt"
    cut = (every[0].score + every[1].score) / 2
    kept = await index.search(
        "metal oxidation in humid conditions", mode="vector", top_k=5, score_threshold=cut
    )
    assert names(kept) == ["rust.txt"]


async def test_hybrid_is_the_reciprocal_rank_fusion_of_both_searches(
    index: DocumentIndex,
) -> None:
    query = "refunds for a sleeping cat"
    keyword = await index.search(query, mode="keyword", top_k=50)
    vector = await index.search(query, mode="vector", top_k=50)
    hybrid = await index.search(query, mode="hybrid", top_k=5)

    assert hybrid[0].mode == "hybrid"
    expected: dict[str, float] = {}
    for ranking in (keyword, vector):
        for rank, hit in enumerate(ranking, 1):
            expected[hit.chunk_id] = expected.get(hit.chunk_id, 0.0) + 1 / (RRF_K + rank)
    assert {h.chunk_id: h.score for h in hybrid} == pytest.approx(
        dict(sorted(expected.items(), key=lambda item: -item[1])[:5])
    )
    # Found by both, the refunds passage leads; the cat, found by meaning only, follows.
    assert names(hybrid)[:2] in (["refunds.txt", "cats.txt"], ["cats.txt", "refunds.txt"])
    assert names(keyword) == ["refunds.txt"]


async def test_hybrid_is_the_default_mode_with_a_model(index: DocumentIndex) -> None:
    hits = await index.search("boiling noodles")
    assert hits[0].mode == "hybrid"
    assert names(hits)[0] == "pasta.txt"


async def test_a_changed_file_gets_new_vectors(index: DocumentIndex, folder: Path) -> None:
    (folder / "pasta.txt").write_text("Whisk the eggs with sugar for a sponge cake.")
    report = await index.sync(folder)
    assert names_of(report.updated) == ["pasta.txt"]
    assert names(await index.search("baking a cake", mode="vector", top_k=1)) == ["pasta.txt"]
    assert names(await index.search("cooking spaghetti", mode="vector", top_k=1)) != ["pasta.txt"]


def names_of(sources: list[str]) -> list[str]:
    return [Path(source).name for source in sources]


async def test_another_embedding_model_is_refused_at_open(
    tmp_path: Path, index: DocumentIndex
) -> None:
    require_module("ollama", "ollama")
    from parley.providers.ollama.embeddings.model import OllamaEmbeddingModel  # noqa: PLC0415

    other = OllamaEmbeddingModel(model="nomic-embed-text")  # 768 dimensions; never called
    with pytest.raises(IndexMismatchError, match=r"local/all-minilm-l6-v2 \(384 dimensions\)"):
        await DocumentIndex.open(tmp_path / "index.db", embedding_model=other)
    # Without a model the same index still answers keyword searches, but takes no document
    # without vectors.
    (tmp_path / "docs" / "new.txt").write_text("Something new.")
    async with await DocumentIndex.open(tmp_path / "index.db", embedding_model=None) as plain:
        assert names(await plain.search("spaghetti")) == ["pasta.txt"]
        with pytest.raises(IndexMismatchError, match="needs its vectors"):
            await plain.add(tmp_path / "docs" / "new.txt")


def test_rrf_adds_reciprocal_ranks() -> None:
    from parley.rag import Chunk  # noqa: PLC0415

    def hit(name: str) -> SearchHit:
        return SearchHit(Chunk(name, 0, name, 1, name), 0.0, "keyword")

    fused = reciprocal_rank_fusion([[hit("a"), hit("b")], [hit("b"), hit("c")]])
    assert [(h.chunk.doc_id, h.score) for h in fused] == [
        ("b", pytest.approx(1 / 62 + 1 / 61)),
        ("a", pytest.approx(1 / 61)),
        ("c", pytest.approx(1 / 62)),
    ]
    assert all(h.mode == "hybrid" for h in fused)
