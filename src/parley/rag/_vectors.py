"""Cosine search over the index's vectors, held in memory as one float32 matrix.

The vectors live in the index's file (a float32 blob per chunk); a store keeps this matrix
beside it and brings it up to date after commits (`apply`), reading only the chunks added.
Vectors are normalised when stored, so cosine similarity is a dot product.

A search over at most `EXACT_LIMIT` rows multiplies the query by every row (BLAS). Above it,
where that pass alone would take tens of milliseconds (it reads the whole matrix: 150 MB for
100,000 vectors of 384 dimensions), the rows are first ranked by the Hamming distance between
sign bits (each vector less the mean vector, one bit per dimension: 48 bytes for 384
dimensions), and the best `candidates(top_k)` rows are scored exactly. The bits are 1/32 of
the floats and a popcount is cheap, so the pass takes a few milliseconds at 100,000 rows;
`benchmarks/rag.py` measures the recall against the exact search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parley.errors import IndexMismatchError
from parley.rag._numpy import np, npt

__all__ = ["EXACT_LIMIT", "VectorMatrix", "best_positions", "candidates", "normalized"]

EXACT_LIMIT = 20_000
"""Searches over more rows than this go through the sign-bit pass first."""


def candidates(top_k: int) -> int:
    """How many rows the sign-bit pass hands to the exact scoring."""
    return max(400, 40 * top_k)


def normalized(vectors: npt.ArrayLike, dimensions: int | None = None) -> npt.NDArray[np.float32]:
    """Vectors as float32 rows of length 1 (a zero vector stays zero).

    Raises:
        IndexMismatchError: Their size is not `dimensions`.
    """
    array = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    if dimensions is not None and array.shape[1] != dimensions:
        raise IndexMismatchError(
            f"vectors of {array.shape[1]} dimensions cannot go into an index of "
            f"{dimensions}-dimensional vectors (another embedding model?)"
        )
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: npt.NDArray[np.float32] = array / norms
    return result


class VectorMatrix:
    """Rows of normalised vectors, each with its chunk's id and its document's id.

    Args:
        dimensions: The vectors' size.
    """

    def __init__(self, dimensions: int) -> None:

        self.dimensions = dimensions
        self.ids: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self.docs: npt.NDArray[np.int32] = np.empty(0, dtype=np.int32)
        self.matrix: npt.NDArray[np.float32] = np.empty((0, dimensions), dtype=np.float32)
        self._doc_codes: dict[str, int] = {}
        self._bits: npt.NDArray[np.uint64] | None = None  # (words, rows), built on demand
        self._mean: npt.NDArray[np.float32] | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        """The memory its arrays hold, in bytes (the sign bits once a search made them)."""
        extra = [a.nbytes for a in (self._bits, self._mean) if a is not None]
        return self.ids.nbytes + self.docs.nbytes + self.matrix.nbytes + sum(extra)

    def _code(self, doc_id: str) -> int:
        return self._doc_codes.setdefault(doc_id, len(self._doc_codes))

    def apply(
        self,
        kept: npt.NDArray[np.int64],
        added_ids: Sequence[int],
        added_docs: Sequence[str],
        added: npt.NDArray[np.float32],
    ) -> None:
        """Keep only the rows whose ids are in `kept`, then append the added rows."""
        keep = np.isin(self.ids, kept, assume_unique=True)
        if not keep.all():
            self.ids, self.docs, self.matrix = self.ids[keep], self.docs[keep], self.matrix[keep]
        if len(added_ids):
            codes = np.fromiter((self._code(d) for d in added_docs), dtype=np.int32)
            self.ids = np.concatenate([self.ids, np.asarray(added_ids, dtype=np.int64)])
            self.docs = np.concatenate([self.docs, codes])
            self.matrix = np.concatenate([self.matrix, added.reshape(-1, self.dimensions)])
        self._bits = None

    def search(
        self, vector: npt.NDArray[np.float32], top_k: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The `top_k` (chunk id, cosine) pairs, best first, within `doc_ids` if given."""
        query = normalized(vector, self.dimensions)[0]
        rows: npt.NDArray[np.intp] | None = None
        if doc_ids is not None:
            wanted = [self._doc_codes[d] for d in doc_ids if d in self._doc_codes]
            rows = np.flatnonzero(np.isin(self.docs, wanted))
        count = len(self) if rows is None else len(rows)
        if count == 0 or top_k <= 0:
            return []
        if count > EXACT_LIMIT:
            rows = self._shortlist(query, candidates(top_k), rows)
        # einsum, not `@`: BLAS spreads a matrix-vector product over threads, which costs
        # more than it saves for one query, and much more on a busy machine.
        chosen_rows = self.matrix if rows is None else self.matrix[rows]
        scores = np.einsum("ij,j->i", chosen_rows, query)
        best = best_positions(scores, top_k)
        chosen = best if rows is None else rows[best]
        return [(int(self.ids[r]), float(s)) for r, s in zip(chosen, scores[best], strict=True)]

    def _shortlist(
        self, query: npt.NDArray[np.float32], wanted: int, rows: npt.NDArray[np.intp] | None
    ) -> npt.NDArray[np.intp]:
        """The `wanted` rows nearest `query` by the Hamming distance of their sign bits."""
        bits, mean = self._signs()
        code = _pack_signs((query - mean)[None, :])[:, 0]
        words = bits if rows is None else bits[:, rows]
        distance = np.zeros(words.shape[1], dtype=np.uint16)
        scratch = np.empty(words.shape[1], dtype=np.uint64)
        counts = np.empty(words.shape[1], dtype=np.uint8)
        for word in range(words.shape[0]):  # a word at a time: no (rows, words) temporaries
            np.bitwise_xor(words[word], code[word], out=scratch)
            np.bitwise_count(scratch, out=counts)
            distance += counts
        if wanted < len(distance):
            nearest = np.argpartition(distance, wanted)[:wanted]
        else:
            nearest = np.arange(len(distance))
        return nearest if rows is None else rows[nearest]

    def _signs(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:

        if self._bits is None or self._mean is None:
            self._mean = self.matrix.mean(axis=0)
            self._bits = _pack_signs(self.matrix - self._mean)
        return self._bits, self._mean


def _pack_signs(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.uint64]:
    """Each row's sign bits as 64-bit words, laid out (words, rows) for a word-wise pass."""
    padded = -(-rows.shape[1] // 64) * 64
    signs = np.zeros((rows.shape[0], padded), dtype=bool)
    signs[:, : rows.shape[1]] = rows > 0
    packed: npt.NDArray[np.uint64] = np.packbits(signs, axis=1).view(np.uint64)
    return np.ascontiguousarray(packed.T)


def best_positions(scores: npt.NDArray[np.floating[Any]], top_k: int) -> npt.NDArray[np.intp]:
    """The positions of the `top_k` highest scores, highest first.

    Ties go to the lower position, at the cut too: of several scores equal to the `top_k`-th,
    the first ones are kept (`argpartition` alone would keep any of them).
    """
    if top_k < len(scores):
        cut = len(scores) - top_k
        kth = np.partition(scores, cut)[cut]  # the top_k-th highest
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)[: top_k - len(above)]
        part = np.concatenate([above, tied])
    else:
        part = np.arange(len(scores))
    order = np.lexsort((part, -scores[part]))
    result: npt.NDArray[np.intp] = part[order]
    return result
