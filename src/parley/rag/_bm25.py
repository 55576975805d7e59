"""BM25 over the keyword index's postings, held in memory: FTS5's scores, without its scan.

FTS5's `bm25()` scores every chunk that matches any query term inside SQLite's virtual
machine: about 19 ms at 100,000 chunks for a typical question, which matches a quarter of
them (`benchmarks/rag.py`). `KeywordIndex` holds the same postings (for each term, the chunks
it occurs in and how often) as numpy arrays, and scores a query with a few vector operations
over its terms' postings.

The score is FTS5's (`bm25()` in SQLite's `fts5_aux.c`), for each query word i:

    idf_i = ln((N - n_i + 0.5) / (n_i + 0.5)), or 1e-6 where that is not above 0
    score = sum over i of idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl))

with k1 = 1.2, b = 0.75, N the chunks held, n_i how many hold the word's term, f_i how often
it occurs in the chunk, D the chunk's length in terms and avgdl the mean length. It is
computed in float64 with the same operations in the same order (`math.log` is the C
library's `log`, as FTS5's), so the scores are FTS5's, and a query naming a term twice
(`run running`) counts it twice, as FTS5 does. Of equal scores, the older chunk (the lower
id) ranks first.

Layout: a row per chunk, in id order (`ids`, `docs`, `lengths`, `alive`); a term's postings
are the rows it occurs in and how often, in CSR form (a term's slice of `rows` and `counts`
starts at `offsets[term]`). Changes do not rebuild it: removed chunks are marked dead (N,
avgdl and every n_i count live rows only), and added chunks go into a second CSR segment,
small beside the first. When dead rows or added postings pass a quarter of the whole, both
segments are merged into one without the dead rows, so memory stays within about a quarter
above what the live chunks need (`nbytes`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from parley.rag._numpy import np, npt
from parley.rag._vectors import best_positions

__all__ = ["K1", "MIN_IDF", "B", "KeywordIndex", "Postings"]

K1 = 1.2
"""BM25's term-frequency saturation (FTS5's)."""

B = 0.75
"""BM25's length normalisation (FTS5's)."""

MIN_IDF = 1e-6
"""The idf of a term in half the chunks or more (FTS5's floor)."""

_MERGE_SHARE = 4  # merge the segments when dead rows or added postings pass 1/4 of the whole
_INT_BYTES = 28  # a Python int above 256, as the term dictionary holds its values

IntArray = npt.NDArray[np.int64]
Counts = npt.NDArray[np.unsignedinteger]


@dataclass(frozen=True)
class Postings:
    """Term occurrences as arrays: for each term, the chunks it occurs in and how often.

    Attributes:
        terms: The distinct terms.
        per_term: How many chunks each term occurs in (the length of its run below).
        ids: The chunks' ids, term by term, ascending within a term.
        counts: How often the term occurs in each of those chunks.
    """

    terms: list[str]
    per_term: IntArray
    ids: IntArray
    counts: Counts


@dataclass(frozen=True)
class _Segment:
    """Postings in CSR form: term t's rows and counts are `[offsets[t]:offsets[t + 1]]`."""

    offsets: IntArray
    rows: npt.NDArray[np.int32]
    counts: Counts

    @classmethod
    def empty(cls) -> _Segment:
        return cls(np.zeros(1, np.int64), np.empty(0, np.int32), np.empty(0, np.uint8))

    @classmethod
    def build(
        cls, terms: IntArray, rows: npt.NDArray[np.int32], counts: Counts, size: int
    ) -> _Segment:
        """From (term, row, count) triples ascending by row within each term; `size` terms."""
        if np.any(terms[1:] < terms[:-1]):  # a full read comes in term order: no sort
            order = np.argsort(terms, kind="stable")  # keeps rows ascending within a term
            rows, counts = rows[order], counts[order]
        offsets = np.zeros(size + 1, np.int64)
        np.cumsum(np.bincount(terms, minlength=size), out=offsets[1:])
        return cls(offsets, rows, counts)

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, term: int) -> tuple[npt.NDArray[np.int32], Counts]:
        if term + 1 >= len(self.offsets):
            return self.rows[:0], self.counts[:0]
        start, end = self.offsets[term], self.offsets[term + 1]
        return self.rows[start:end], self.counts[start:end]

    def triples(self) -> tuple[IntArray, npt.NDArray[np.int32], Counts]:
        terms = np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets))
        return terms, self.rows, self.counts

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + self.rows.nbytes + self.counts.nbytes


class KeywordIndex:
    """The BM25 postings of an index's chunks, in memory (see the module docstring)."""

    def __init__(self) -> None:
        self.ids: IntArray = np.empty(0, np.int64)
        self.docs: npt.NDArray[np.int32] = np.empty(0, np.int32)
        self.lengths: IntArray = np.empty(0, np.int64)
        self.alive: npt.NDArray[np.bool_] = np.empty(0, bool)
        self.newest = 0
        """The highest chunk id ever added (ids only grow)."""
        self._doc_codes: dict[str, int] = {}
        self._terms: dict[str, int] = {}
        self._names: list[str] = []
        self._term_bytes = 0
        self._base = _Segment.empty()
        self._added = _Segment.empty()
        self._live = 0
        self._norms: npt.NDArray[np.float64] = np.empty(0, np.float64)

    def __len__(self) -> int:
        """The chunks held (live rows)."""
        return self._live

    @property
    def nbytes(self) -> int:
        """The memory it holds, in bytes: its arrays, and its terms as Python strings."""
        arrays = (self.ids, self.docs, self.lengths, self.alive, self._norms)
        strings = sys.getsizeof(self._terms) + sys.getsizeof(self._names) + self._term_bytes
        return sum(a.nbytes for a in arrays) + self._base.nbytes + self._added.nbytes + strings

    def apply(
        self,
        kept: IntArray,
        added_ids: Sequence[int],
        added_docs: Sequence[str],
        postings: Postings,
    ) -> None:
        """Keep only the rows whose ids are in `kept`, then add chunks with their postings.

        Args:
            kept: The ids of the chunks still held (any order).
            added_ids: The new chunks' ids, ascending, above `newest`.
            added_docs: Their documents' ids.
            postings: Their terms (no other chunk's).
        """
        self.alive = self.alive & np.isin(self.ids, kept)
        start = len(self.ids)
        ids = np.asarray(added_ids, dtype=np.int64)
        codes = [self._doc_codes.setdefault(d, len(self._doc_codes)) for d in added_docs]
        rows = (np.searchsorted(ids, postings.ids) + start).astype(np.int32)
        lengths = np.bincount(rows - start, weights=postings.counts, minlength=len(ids))
        self.ids = np.concatenate([self.ids, ids])
        self.docs = np.concatenate([self.docs, np.asarray(codes, dtype=np.int32)])
        self.lengths = np.concatenate([self.lengths, lengths.astype(np.int64)])
        self.alive = np.concatenate([self.alive, np.ones(len(ids), bool)])
        self.newest = max(self.newest, int(ids[-1]) if len(ids) else 0)
        self._add_postings(rows, postings)
        dead = len(self.ids) - int(np.count_nonzero(self.alive))
        if _MERGE_SHARE * dead > len(self.ids) or _MERGE_SHARE * len(self._added) > len(self._base):
            self._merge()
        self._live = int(np.count_nonzero(self.alive))
        self._norms = self._length_norms()

    def _add_postings(self, rows: npt.NDArray[np.int32], postings: Postings) -> None:
        """The new postings into the added segment (rebuilt: it stays small)."""
        codes = np.fromiter((self._term(t) for t in postings.terms), np.int64, len(postings.terms))
        new = (np.repeat(codes, postings.per_term), rows, postings.counts)
        old = self._added.triples()
        self._added = _Segment.build(
            np.concatenate([old[0], new[0]]),
            np.concatenate([old[1], new[1]]),
            np.concatenate([old[2], new[2]]),
            len(self._names),
        )

    def _term(self, term: str) -> int:
        code = self._terms.get(term)
        if code is None:
            code = self._terms[term] = len(self._names)
            self._names.append(term)
            self._term_bytes += sys.getsizeof(term) + _INT_BYTES
        return code

    def _merge(self) -> None:
        """Both segments into one, without the dead rows and the terms no live row holds."""
        base, added = self._base.triples(), self._added.triples()
        terms, rows, counts = (np.concatenate([b, a]) for b, a in zip(base, added, strict=True))
        keep = self.alive[rows]
        terms, rows, counts = terms[keep], rows[keep], counts[keep]
        renumbered = np.cumsum(self.alive, dtype=np.int64) - 1
        used = np.flatnonzero(np.bincount(terms, minlength=len(self._names)))
        codes = np.zeros(len(self._names), np.int64)
        codes[used] = np.arange(len(used))
        self._names = [self._names[t] for t in used]
        self._terms = {term: code for code, term in enumerate(self._names)}
        self._term_bytes = sum(sys.getsizeof(t) for t in self._names) + _INT_BYTES * len(used)
        rows = renumbered[rows].astype(np.int32)
        self._base = _Segment.build(codes[terms], rows, counts, len(self._names))
        self._added = _Segment.empty()
        self.ids, self.docs = self.ids[self.alive], self.docs[self.alive]
        self.lengths = self.lengths[self.alive]
        self.alive = np.ones(len(self.ids), bool)

    def _length_norms(self) -> npt.NDArray[np.float64]:
        """Each row's `k1 * (1 - b + b * D / avgdl)`, as FTS5 computes it."""
        tokens = int(self.lengths[self.alive].sum())
        avgdl = tokens / self._live if tokens else 1.0  # no terms: nothing matches anyway
        return np.asarray(K1 * (1 - B + B * self.lengths / avgdl), dtype=np.float64)

    def search(
        self, terms: Sequence[str], top_k: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The `top_k` (chunk id, score) pairs, best first, within `doc_ids` if given.

        Args:
            terms: The query's terms as the index holds them (analysed), one per word.
            top_k: The most pairs returned.
            doc_ids: Only chunks of these documents; N and the n_i still count every chunk,
                as FTS5's do under a filter.
        """
        if top_k <= 0 or not self._live:
            return []
        allowed = self.alive
        if doc_ids is not None:
            wanted = [self._doc_codes[d] for d in doc_ids if d in self._doc_codes]
            allowed = allowed & np.isin(self.docs, wanted)
        found_rows: list[npt.NDArray[np.int32]] = []
        weights: list[npt.NDArray[np.float64]] = []
        for term in terms:
            code = self._terms.get(term)
            if code is None:
                continue
            rows, counts = self._postings(code)
            holding = int(np.count_nonzero(self.alive[rows]))
            if not holding:
                continue
            idf = math.log((self._live - holding + 0.5) / (holding + 0.5))
            keep = allowed[rows]
            rows, freq = rows[keep], counts[keep].astype(np.float64)
            found_rows.append(rows)
            weights.append(
                (idf if idf > 0 else MIN_IDF) * (freq * (K1 + 1.0)) / (freq + self._norms[rows])
            )
        if not found_rows:
            return []
        # Summed row by row in the order of the query's words, as FTS5 sums them.
        scores = np.bincount(
            np.concatenate(found_rows), np.concatenate(weights), minlength=len(self.ids)
        ).astype(np.float64, copy=False)
        matched = np.flatnonzero(scores)  # every weight is above 0
        best = matched[best_positions(scores[matched], top_k)]
        return [(int(self.ids[r]), float(scores[r])) for r in best]

    def _postings(self, term: int) -> tuple[npt.NDArray[np.int32], Counts]:
        base_rows, base_counts = self._base.get(term)
        added_rows, added_counts = self._added.get(term)
        if not len(added_rows):
            return base_rows, base_counts
        return (
            np.concatenate([base_rows, added_rows]),
            np.concatenate([base_counts, added_counts]),
        )
