"""Retrieval: quality on the labelled Python-docs set, and latency at 10,000 and 100,000 chunks.

    python benchmarks/rag.py [-n 10000 100000] [--queries 142] [--skip-scale]

Part 1, quality (`benchmarks/data/pydocs`: 2,373 passages, 142 questions): each passage is a
chunk of the embedded store, embedded by the local model; recall@5 and nDCG@10 for keyword
search with parley's analysis (words, Porter stems, CJK pairs; FTS5 `unicode61`), with FTS5's
`trigram` tokenizer instead, vector search and hybrid search (RRF, k=60).

Part 2, scale, for each `-n` (default 10,000 and 100,000 chunks): chunks of two passages of
the set joined (so the text is real and no two chunks are equal), each chunk's vector the
normalised mean of the two passages' vectors (real embeddings, real distribution). The chunks
go into one SQLite file in documents of 1,000 chunks. Then, per query (the set's questions,
their vectors computed once): keyword search (BM25 over the postings held in memory; FTS5's
own `bm25()` beside it, as the store ranked before), vector and hybrid search through the
store, the query's vector given; and hybrid through `DocumentIndex.search`, which embeds the
query too. p50 and p95 in milliseconds. The vector pass above `EXACT_LIMIT` rows is the
sign-bit shortlist; its recall@10 against the exact search is printed, and the exact search's
own latency beside it. Also: the first keyword search (it reads every posting), the memory
the store holds, and the first keyword search after a document of 1,000 chunks was added or
removed (only those are read).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _retrieval_set import load, ndcg_at, recall_at
from parley.embeddings.local import LocalEmbeddingModel
from parley.rag import (
    Chunk,
    DocumentIndex,
    DocumentRecord,
    SQLiteIndexStore,
    _vectors,
    document_id,
    keyword_query,
    reciprocal_rank_fusion,
)
from parley.rag._fts5 import fts5_ranked


async def embed(model: LocalEmbeddingModel, texts: list[str]) -> np.ndarray:
    return (await model(texts)).array()


def record(name: str, count: int) -> DocumentRecord:
    return DocumentRecord(document_id(name), name, "h", "bench", "text", None, 0, count)


# -- part 1: quality ---------------------------------------------------------------------------


def trigram_rankings(corpus: dict[str, str], queries: dict[str, str], k: int) -> dict[str, list]:
    """FTS5's trigram tokenizer over the raw passages, the query's words OR-ed."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body, tokenize='trigram')")
    db.executemany("INSERT INTO t VALUES (?, ?)", corpus.items())
    rankings = {}
    for qid, text in queries.items():
        terms = [w for w in keyword_query(text) if len(w) >= 3]
        if not terms:
            rankings[qid] = []
            continue
        match = " OR ".join(f'"{w}"' for w in terms)
        rows = db.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, k)
        ).fetchall()
        rankings[qid] = [r[0] for r in rows]
    return rankings


async def quality(model: LocalEmbeddingModel, folder: Path) -> dict[str, np.ndarray]:
    data = load()
    ids = list(data.corpus)
    texts = [data.corpus[i] for i in ids]
    print(f"embedding {len(texts)} passages and {len(data.queries)} questions ...", flush=True)
    vectors = await embed(model, texts)
    query_ids = list(data.queries)
    query_vectors = await embed(model, [data.queries[q] for q in query_ids])

    store = await SQLiteIndexStore.open(folder / "quality.db")
    await store.bind_embedding("local/all-minilm-l6-v2", vectors.shape[1])
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        name = f"part{start}"
        chunks = [
            Chunk(document_id(name), n, data.corpus[pid], 0, name, heading=pid)
            for n, pid in enumerate(part)
        ]
        await store.put_document(record(name, len(part)), chunks, vectors[start : start + 500])

    depth = 50
    rankings: dict[str, dict[str, list[str]]] = {"keyword": {}, "vector": {}, "hybrid": {}}
    for qid, qvec in zip(query_ids, query_vectors, strict=True):
        keyword = await store.keyword_search(data.queries[qid], depth)
        vector = await store.vector_search(qvec, depth)
        rankings["keyword"][qid] = [str(h.chunk.heading) for h in keyword]
        rankings["vector"][qid] = [str(h.chunk.heading) for h in vector]
        hybrid = reciprocal_rank_fusion([keyword, vector])
        rankings["hybrid"][qid] = [str(h.chunk.heading) for h in hybrid]
    await store.close()
    rankings["keyword (trigram)"] = trigram_rankings(data.corpus, data.queries, depth)

    print(f"\nquality on {len(data.queries)} questions, {len(ids)} passages")
    print(f"{'search':<20} {'recall@5':>9} {'nDCG@10':>8}")
    for name in ("keyword", "keyword (trigram)", "vector", "hybrid"):
        recall = statistics.mean(recall_at(rankings[name][q], data.qrels[q], 5) for q in query_ids)
        ndcg = statistics.mean(ndcg_at(rankings[name][q], data.qrels[q], 10) for q in query_ids)
        print(f"{name:<20} {recall:>9.3f} {ndcg:>8.3f}")
    return {
        "passages": vectors,
        "queries": query_vectors,
        "texts": np.array(texts, dtype=object),
        "questions": np.array([data.queries[q] for q in query_ids], dtype=object),
    }


# -- part 2: scale -----------------------------------------------------------------------------


async def build(path: Path, n: int, material: dict[str, np.ndarray]) -> SQLiteIndexStore:
    rng = random.Random(0)
    passages, texts = material["passages"], material["texts"]
    store = await SQLiteIndexStore.open(path)
    await store.bind_embedding("local/all-minilm-l6-v2", passages.shape[1])
    started = time.perf_counter()
    per_doc = 1000
    for d in range(0, n, per_doc):
        name = f"doc{d // per_doc}"
        pairs = [(rng.randrange(len(texts)), rng.randrange(len(texts))) for _ in range(per_doc)]
        chunks = [
            Chunk(document_id(name), i, f"{texts[a]}\n\n{texts[b]}", 0, name)
            for i, (a, b) in enumerate(pairs[: min(per_doc, n - d)])
        ]
        vectors = np.stack([passages[a] + passages[b] for a, b in pairs[: len(chunks)]])
        await store.put_document(record(name, len(chunks)), chunks, vectors)
    print(
        f"\nbuilt {n} chunks in {time.perf_counter() - started:.1f} s; "
        f"file {path.stat().st_size / 1e6:.0f} MB"
    )
    return store


async def timed(label: str, calls: list[Callable[[], Awaitable[Any]]]) -> list[float]:
    for call in calls[:3]:
        await call()  # warm: the matrix loaded, statements prepared
    times = []
    for call in calls:
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p50, p95 = statistics.median(times), times[int(len(times) * 0.95) - 1]
    print(f"{label:<44} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
    return times


async def scale(n: int, count: int, material: dict[str, np.ndarray], folder: Path) -> None:
    store = await build(folder / f"scale{n}.db", n, material)
    questions = list(material["questions"])[:count]
    vectors = list(material["queries"])[:count]
    pairs = list(zip(questions, vectors, strict=True))

    async def hybrid(q: str, v: np.ndarray) -> list[Any]:
        keyword, similar = await asyncio.gather(
            store.keyword_search(q, 50), store.vector_search(v, 50)
        )
        return reciprocal_rank_fusion([keyword, similar])[:5]

    print(f"{count} queries over {n} chunks (top 5; fusion depth 50)")
    await once("first keyword search (reads every posting)", store.keyword_search(questions[0], 5))
    keyword = await timed(
        "keyword (BM25 postings in memory)",
        [lambda q=q: store.keyword_search(q, 5) for q in questions],
    )
    fts5 = sqlite3.connect(store.path, check_same_thread=False)
    before = await timed(
        "keyword (FTS5's bm25(), as before)",
        [
            lambda q=q: asyncio.to_thread(fts5_ranked, fts5, keyword_query(q), 5, None)
            for q in questions
        ],
    )
    fts5.close()
    print(f"  FTS5 / in memory, p50: {statistics.median(before) / statistics.median(keyword):.1f}x")
    await timed(
        "vector (sign bits, then exact)", [lambda v=v: store.vector_search(v, 5) for _, v in pairs]
    )
    await timed(
        "hybrid (store, query vector given)", [lambda q=q, v=v: hybrid(q, v) for q, v in pairs]
    )
    memory = store.memory()
    print(
        f"memory beside the file: keyword {memory.keyword / 1e6:.0f} MB, "
        f"vector {memory.vector / 1e6:.0f} MB"
    )
    await changes(store, material, questions[0])

    shortlisted = [[h.chunk_id for h in await store.vector_search(v, 10)] for v in vectors]
    limit = _vectors.EXACT_LIMIT
    _vectors.EXACT_LIMIT = 10**9
    try:
        await timed(
            "vector (exact, every row)", [lambda v=v: store.vector_search(v, 5) for _, v in pairs]
        )
        exact = [[h.chunk_id for h in await store.vector_search(v, 10)] for v in vectors]
    finally:
        _vectors.EXACT_LIMIT = limit
    overlap = statistics.mean(
        len(set(a) & set(b)) / 10 for a, b in zip(shortlisted, exact, strict=True)
    )
    print(f"sign-bit shortlist recall@10 against the exact search: {overlap:.3f}")
    await store.close()

    index = await DocumentIndex.open(folder / f"scale{n}.db")
    try:
        await timed(
            "hybrid (DocumentIndex.search, embeds the query)",
            [lambda q=q: index.search(q, top_k=5) for q in questions],
        )
    finally:
        await index.close()


async def once(label: str, call: Awaitable[Any]) -> None:
    started = time.perf_counter()
    await call
    print(f"{label:<44} {(time.perf_counter() - started) * 1000:9.0f} ms")


async def changes(store: SQLiteIndexStore, material: dict[str, np.ndarray], query: str) -> None:
    """The first keyword search after a document of 1,000 chunks is added, then removed."""
    texts, passages = material["texts"], material["passages"]
    rng = random.Random(1)
    pairs = [(rng.randrange(len(texts)), rng.randrange(len(texts))) for _ in range(1000)]
    chunks = [
        Chunk(document_id("added"), i, f"{texts[a]}\n\n{texts[b]}", 0, "added")
        for i, (a, b) in enumerate(pairs)
    ]
    vectors = np.stack([passages[a] + passages[b] for a, b in pairs])
    await store.put_document(record("added", len(chunks)), chunks, vectors)
    await once("keyword, after 1,000 chunks were added", store.keyword_search(query, 5))
    await store.remove_documents([document_id("added")])
    await once("keyword, after they were removed", store.keyword_search(query, 5))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "-n", type=int, nargs="+", default=[10_000, 100_000], help="chunks in the scale indexes"
    )
    parser.add_argument("--queries", type=int, default=142, help="queries timed")
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    model = LocalEmbeddingModel()
    with tempfile.TemporaryDirectory() as folder:
        material = await quality(model, Path(folder))
        if not args.skip_scale:
            for n in args.n:
                print(f"\nload average before: {os.getloadavg()[0]:.1f}")
                await scale(n, args.queries, material, Path(folder))
                print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
