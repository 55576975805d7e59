"""The peer of `rag.py`: Qwen-Agent 0.0.34's keyword search over the benchmark's chunks.

Qwen-Agent keeps no index: its `KeywordSearch` (`qwen_agent.tools.search_tools`) gets the
parsed documents (`Record`s of `Chunk`s, as its `DocParser` makes them) with every question,
splits every chunk into stemmed words, builds a `rank_bm25.BM25Okapi` over them, scores the
question's words, sorts every chunk by score and hands back the best ones within a token
budget (`max_ref_token`, 4,000 by default). Its `Retrieval` tool calls it that way, once per
question. `QwenKeywordSearch.search` makes that call; `rankings` computes the same order for
quality, with the chunks' words split once (the same functions, the same sort) so that 142
questions do not split the set 142 times.

Import it only where `qwen_agent` is installed (benchmarks/setup.sh's `.venv-bench`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from qwen_agent.tools.doc_parser import Chunk, Record
from qwen_agent.tools.search_tools.keyword_search import (
    KeywordSearch,
    parse_keyword,
    split_text_into_keywords,
)
from qwen_agent.utils.tokenization_qwen import count_tokens
from rank_bm25 import BM25Okapi

VERSION = metadata.version("qwen-agent")

# Qwen-Agent logs every search's token count at INFO; the benchmark prints its own figures.
logging.getLogger("qwen_agent_logger").setLevel(logging.WARNING)


class QwenKeywordSearch:
    """The benchmark's documents as Qwen-Agent's `Record`s, searched by its `KeywordSearch`.

    Args:
        documents: Each document's source and chunk texts, in order.
    """

    def __init__(self, documents: Sequence[tuple[str, Sequence[str]]]) -> None:
        self.records = [
            Record(
                url=source,
                raw=[
                    Chunk(text, {"source": source, "title": "", "chunk_id": i}, count_tokens(text))
                    for i, text in enumerate(texts)
                ],
                title="",
            )
            for source, texts in documents
        ]
        self.tool = KeywordSearch()

    def search(self, query: str) -> list[dict[str, Any]]:
        """What Qwen-Agent's retrieval gets for `query`: `[{"url", "text": [chunks]}]`."""
        result: list[dict[str, Any]] = self.tool.call({"query": query}, docs=self.records)
        return result

    def sorted_chunks(self, query: str) -> list[tuple[str, int]]:
        """Every chunk as `KeywordSearch.sort_by_scores` orders it: (source, chunk number)."""
        return [(s, i) for s, i, _ in self.tool.sort_by_scores(query=query, docs=self.records)]

    def rankings(self, queries: Sequence[str], depth: int) -> list[list[tuple[str, int]]]:
        """The first `depth` chunks for each query, in `sort_by_scores`'s order.

        The chunks are split into words once; each query is then scored and sorted as
        `sort_by_scores` does (BM25Okapi's scores, a stable sort, best first). The first
        query is checked against `sort_by_scores` itself.
        """
        chunks = [(r.url, c.metadata["chunk_id"], c.content) for r in self.records for c in r.raw]
        bm25 = BM25Okapi([split_text_into_keywords(text) for _, _, text in chunks])
        found = []
        for query in queries:
            words = parse_keyword(query)
            if not words:  # Qwen-Agent answers with the documents' first chunks
                found.append([(s, i) for s, i, _ in chunks[:depth]])
                continue
            scored = sorted(
                zip(chunks, bm25.get_scores(words), strict=True),
                key=lambda pair: pair[1],
                reverse=True,
            )
            found.append([(s, i) for (s, i, _), _ in scored[:depth]])
        if queries and found[0] != self.sorted_chunks(queries[0])[:depth]:
            raise AssertionError("the BM25 shortcut does not rank as KeywordSearch does")
        return found
