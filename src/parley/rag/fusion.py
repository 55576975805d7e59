"""Reciprocal rank fusion: one ranking from several, by rank alone (Cormack et al., 2009).

A chunk's fused score is the sum, over the rankings it appears in, of `1 / (k + rank)` with
ranks from 1 and `k = 60`: the scores' own scales (BM25's unbounded, cosine's -1 to 1) never
meet, so neither search drowns the other, and a chunk both find rises above one only one
finds. Qwen-Agent's hybrid search adds the same terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from parley.rag.types import Chunk, SearchHit

__all__ = ["RRF_K", "reciprocal_rank_fusion"]

RRF_K = 60
"""The constant that damps the weight of the first ranks."""


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[SearchHit]], k: int = RRF_K
) -> list[SearchHit]:
    """The rankings fused into one, best first (ties: the better best rank, then id).

    Args:
        rankings: Each a list of hits, best first; a chunk appears at most once in each.
        k: The damping constant.
    """
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    chunks: dict[str, Chunk] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, 1):
            key = hit.chunk_id
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            best_rank[key] = min(best_rank.get(key, rank), rank)
            chunks.setdefault(key, hit.chunk)
    order = sorted(scores, key=lambda key: (-scores[key], best_rank[key], key))
    return [SearchHit(chunks[key], scores[key], "hybrid") for key in order]
