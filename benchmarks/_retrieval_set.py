"""The labelled retrieval set of the benchmarks: Python's library reference, 142 questions.

`load()` returns the corpus (passage id to text), the queries (query id to text) and the
qrels (query id to {passage id: relevance}) of `benchmarks/data/pydocs/`, in BEIR's layout
(corpus.jsonl, queries.jsonl, qrels.tsv); the README there names the sources and licence.
`recall_at` and `ndcg_at` score a ranking against the qrels.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "pydocs"


@dataclass(frozen=True)
class RetrievalSet:
    """A corpus, its queries and which passages answer each query."""

    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load(folder: Path = DATA) -> RetrievalSet:
    """Read a BEIR-style folder: corpus.jsonl, queries.jsonl, qrels.tsv."""
    corpus = {row["_id"]: row["text"] for row in _jsonl(folder / "corpus.jsonl")}
    queries = {row["_id"]: row["text"] for row in _jsonl(folder / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels.tsv").open(encoding="utf-8") as file:
        for row in csv.DictReader(file, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return RetrievalSet(corpus, queries, qrels)


def _jsonl(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def recall_at(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """The share of the relevant passages found in the first `k`."""
    hits = sum(1 for doc in ranking[:k] if relevant.get(doc, 0) > 0)
    return hits / sum(1 for score in relevant.values() if score > 0)


def ndcg_at(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Normalized discounted cumulative gain of the first `k` (graded relevance)."""
    gain = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranking[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    best = sum(score / math.log2(rank + 2) for rank, score in enumerate(ideal))
    return gain / best if best else 0.0
