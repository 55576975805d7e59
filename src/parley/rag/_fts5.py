"""FTS5's side of keyword search: its tokenizer, its postings read into numpy, its own BM25.

The store's FTS5 table keeps the postings on disk, and FTS5's tokenizer (`TOKENIZE`: words
folded by `unicode61`, stemmed by Porter's algorithm) decides what a term is. Nothing here
analyses text another way: `read_postings` reads the table's terms through `fts5vocab`, and
`Analyzer` runs the same tokenizer over a private in-memory table, for query words and for
chunks added since the postings were read.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from parley.rag._bm25 import Postings
from parley.rag._numpy import np

__all__ = ["TOKENIZE", "Analyzer", "fts5_ranked", "read_postings"]

TOKENIZE = "porter unicode61 remove_diacritics 2"
"""The FTS5 tokenizer of the keyword index."""

_BATCH_CHARS = 1 << 22  # postings parsed at once: bounds the memory a load takes beside them


def read_postings(db: sqlite3.Connection, vocab: str) -> Postings:
    """Every (term, chunk, count) of an FTS5 table, through its `fts5vocab` instance table.

    The instance table has a row per occurrence; SQLite joins each term's chunk ids into one
    string (`group_concat`), which numpy parses: a Python object per occurrence (12.7 million
    at 100,000 chunks) would take seconds more.
    """
    parts: list[Postings] = []
    batch: list[tuple[str, int, str]] = []
    size = 0
    query = f"SELECT term, count(*), group_concat(doc) FROM {vocab} GROUP BY term"
    for row in db.execute(query):
        batch.append(row)
        size += len(row[2])
        if size >= _BATCH_CHARS:
            parts.append(_parse(batch))
            batch, size = [], 0
    parts.append(_parse(batch))
    return Postings(
        [term for part in parts for term in part.terms],
        np.concatenate([part.per_term for part in parts]),
        np.concatenate([part.ids for part in parts]),
        np.concatenate([part.counts for part in parts]),
    )


def _parse(batch: Sequence[tuple[str, int, str]]) -> Postings:
    """One batch of (term, occurrences, their chunk ids joined by commas) into postings."""
    if not batch:
        return Postings([], np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint8))
    occurrences = np.array([row[1] for row in batch], dtype=np.int64)
    ids = np.fromstring(",".join(row[2] for row in batch), dtype=np.int64, sep=",")
    terms = np.repeat(np.arange(len(batch)), occurrences)
    if np.any((ids[1:] < ids[:-1]) & (terms[1:] == terms[:-1])):
        order = np.lexsort((ids, terms))  # fts5vocab gives them in order; if ever not, sort
        ids, terms = ids[order], terms[order]
    # A run of one chunk's occurrences of one term is a posting; its length is the count.
    new_run = np.ones(len(ids), bool)
    new_run[1:] = (ids[1:] != ids[:-1]) | (terms[1:] != terms[:-1])
    starts = np.flatnonzero(new_run)
    counts = np.diff(np.append(starts, len(ids)))
    return Postings(
        [row[0] for row in batch],
        np.bincount(terms[starts], minlength=len(batch)).astype(np.int64),
        ids[starts],
        counts.astype(np.min_scalar_type(int(counts.max()))),
    )


class Analyzer:
    """The keyword index's tokenizer, run on a private in-memory FTS5 table.

    It says what FTS5 indexes a text or a query word as: the same code, not a copy of it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.execute(
            f"CREATE VIRTUAL TABLE text USING fts5(body, content = '', tokenize = '{TOKENIZE}')"
        )
        self._db.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(text, instance)")

    def terms(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's terms, in order (one, but for a word FTS5 splits, or none)."""
        found: list[list[str]] = [[] for _ in words]
        with self._filled(enumerate(words)) as db:
            for i, term in db.execute("SELECT doc, term FROM terms ORDER BY doc, offset"):
                found[i].append(term)
        return found

    def postings(self, texts: Iterable[tuple[int, str]]) -> Postings:
        """The postings of (chunk id, keyword text) pairs, as the index would hold them."""
        with self._filled(texts) as db:
            return read_postings(db, "terms")

    @contextmanager
    def _filled(self, rows: Iterable[tuple[int, str]]) -> Iterator[sqlite3.Connection]:
        """The table holding `rows` inside the block, and nothing after it (rolled back)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT INTO text (rowid, body) VALUES (?, ?)", rows)
                yield self._db
            finally:
                self._db.execute("ROLLBACK")

    def close(self) -> None:
        """Close the in-memory database."""
        with self._lock:
            self._db.close()


def fts5_ranked(
    db: sqlite3.Connection, words: Sequence[str], top_k: int, doc_ids: Sequence[str] | None
) -> list[tuple[int, float]]:
    """FTS5's own BM25 ranking of the words (each a phrase), as (chunk id, score) pairs.

    The in-memory index holds no positions, so a word FTS5 reads as several terms (a
    phrase: they must stand side by side) is ranked here.
    """
    match = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
    if doc_ids is None:
        # The FTS table alone ranks; only the winners' rows are read (a join here would read
        # a chunk row for every match before sorting: twice the time).
        rows = db.execute(
            "SELECT rowid, bm25(chunks_fts) AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
            (match, top_k),
        ).fetchall()
    else:
        rows = db.execute(
            "SELECT f.rowid, bm25(chunks_fts) AS score FROM chunks_fts f "
            "JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ? "
            f"AND c.doc_id IN ({', '.join('?' * len(doc_ids))}) ORDER BY score, f.rowid LIMIT ?",
            [match, *doc_ids, top_k],
        ).fetchall()
    return [(int(rowid), -float(score)) for rowid, score in rows]
