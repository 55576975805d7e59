"""Another process on a PostgreSQL index, for `test_postgres_store.py`: writes, reads, reports.

    python -m tests.rag._pg_worker read URL SCHEMA
    python -m tests.rag._pg_worker put URL SCHEMA VERSION COUNT
    python -m tests.rag._pg_worker churn URL SCHEMA NAME ROUNDS

The document `shared` is written as COUNT chunks `stamp VERSION of COUNT part J`, each with a
vector, so any reader can tell a whole version (every chunk of one VERSION, COUNT of them) from
a mix. `read` prints what one process sees as JSON; `put` writes one version; `churn` (two run
at once) replaces `shared` ROUNDS times and reads after each write, and prints the reads that
saw a mix (none, or the test fails) and the versions seen.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

import numpy as np

from parley.rag import Chunk, DocumentRecord, PostgresIndexStore, document_id

SHARED = "shared"
DIMENSIONS = 4
_STAMP = re.compile(r"stamp (\S+) of (\d+) part \d+")


def shared_version(version: str, count: int) -> tuple[DocumentRecord, list[Chunk], Any]:
    """The record, chunks and vectors of one version of `shared`."""
    doc_id = document_id(SHARED)
    record = DocumentRecord(doc_id, SHARED, version, "test", "text", None, 10, count)
    chunks = [
        Chunk(doc_id, j, f"stamp {version} of {count} part {j}", 6, SHARED) for j in range(count)
    ]
    vectors = np.random.default_rng(count).standard_normal((count, DIMENSIONS))
    return record, chunks, vectors.astype(np.float32)


def mixed(texts: list[str]) -> str | None:
    """What is wrong with these texts of `shared` as one version, or None if nothing."""
    stamps = {_STAMP.fullmatch(text).groups() for text in texts}  # type: ignore[union-attr]
    if len(stamps) != 1:
        return f"versions mixed: {sorted(stamps)}"
    ((_, count),) = stamps
    if len(texts) != int(count):
        return f"{len(texts)} chunks of a version of {count}"
    return None


async def observe(store: PostgresIndexStore) -> dict[str, Any]:
    """What one reader sees of `shared`: its record, chunks and both searches' hits."""
    records = [d for d in await store.documents() if d.source == SHARED]
    keyword = await store.keyword_search("stamp", 100)
    similar = await store.vector_search(np.ones(DIMENSIONS, np.float32), 100)
    return {
        "documents": [(d.content_hash, d.chunk_count) for d in records],
        "chunks": [c.text for c in await store.chunks(document_id(SHARED))],
        "keyword": [h.text for h in keyword if h.source == SHARED],
        "vector": [h.text for h in similar if h.source == SHARED],
    }


async def churn(store: PostgresIndexStore, name: str, rounds: int) -> dict[str, Any]:
    await store.bind_embedding("test/model", DIMENSIONS)
    problems: list[str] = []
    versions: set[str] = set()
    for i in range(rounds):
        await store.put_document(*shared_version(f"{name}r{i}", 2 + i % 4))
        seen = await observe(store)
        for what in ("chunks", "keyword", "vector"):
            wrong = mixed(seen[what])
            if wrong:
                problems.append(f"round {i}, {what}: {wrong}")
        versions.update(_STAMP.fullmatch(t).group(1) for t in seen["chunks"])  # type: ignore[union-attr]
    return {"problems": problems, "versions": sorted(versions)}


async def main(command: str, url: str, schema: str, *args: str) -> None:
    store = await PostgresIndexStore.open(url, schema=schema, pool_size=2)
    try:
        if command == "read":
            result: dict[str, Any] = await observe(store)
        elif command == "put":
            await store.put_document(*shared_version(args[0], int(args[1])))
            result = {}
        else:
            result = await churn(store, args[0], int(args[1]))
    finally:
        await store.close()
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
