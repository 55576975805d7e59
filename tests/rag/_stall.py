"""A writer process for the durability tests: `python -m tests.rag._stall INDEX SOURCE...`.

It indexes the sources with a `DocumentIndex`, but stops inside the write transaction of any
chunk whose text holds `STALL`: it prints `stalled` and waits for a line on stdin (the test
then reads the index, and lets it go on or kills it). With `--announce` first, it prints
`writing` just before each document's write. It prints `done` when it finishes.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from parley.rag import DocumentIndex, sqlite_store

STALL = "STALLHERE"


def main() -> None:
    announce = sys.argv[1] == "--announce"
    path, *sources = sys.argv[2:] if announce else sys.argv[1:]
    analyse = sqlite_store.keyword_text
    put = sqlite_store.SQLiteIndexStore._put

    def announced(self: sqlite_store.SQLiteIndexStore, *args: Any) -> None:
        print("writing", flush=True)
        put(self, *args)

    if announce:
        sqlite_store.SQLiteIndexStore._put = announced  # type: ignore[method-assign]

    def stalling(text: str) -> str:
        # Called for the new chunks' terms, inside the document's transaction.
        if STALL in text:
            print("stalled", flush=True)
            sys.stdin.readline()
        return analyse(text)

    sqlite_store.keyword_text = stalling  # type: ignore[assignment]

    async def run() -> None:
        async with await DocumentIndex.open(path) as index:
            await index.add(sources)
        print("done", flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
