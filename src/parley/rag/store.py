"""`IndexStore`: what a retrieval index's storage does, whatever engine holds it.

The embedded store is `SQLiteIndexStore` (one local file: FTS5's postings and float32
vectors, both searched in memory). `PostgresIndexStore` (full-text search and pgvector, shared
by many processes) implements the same protocol. `DocumentIndex` (the facade) does the parsing,
chunking, hashing and embedding above it; a store only keeps and searches.

Rules every store keeps:

- **Documents are the unit of change.** `put_document` replaces every chunk and vector of a
  document in one transaction: a reader sees the old version or the new one, never a mix, and
  a crash midway leaves the old one. `remove_documents` likewise. Nothing else is rewritten.
- **One embedding model per index.** `bind_embedding` records the model and the vector size
  the first time and refuses another afterwards (`IndexMismatchError`); `put_document`
  refuses vectors of another size. Vectors are stored normalised, so cosine is a dot product.
- **Keyword text is analysed once, above the store.** Stores index `keyword_text(chunk.text)`
  and search `keyword_query(query)` terms (`parley.rag.text`): lower-cased words, and CJK
  text as overlapping character pairs, so both engines see the same terms.
- **Ids are the facade's.** `Chunk.doc_id` and `Chunk.chunk_id` are the same in every store.
- **Search filters** (`doc_ids`) restrict a search to some documents (a conversation's files).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from parley.rag.types import Chunk, DocumentRecord, IndexInfo, SearchHit

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["IndexStore"]


@runtime_checkable
class IndexStore(Protocol):
    """The storage of a retrieval index (see the module docstring for the rules)."""

    async def info(self) -> IndexInfo:
        """The index's embedding model, vector size and layout version."""
        ...

    async def bind_embedding(self, model: str, dimensions: int) -> None:
        """Record the embedding model and vector size, or check them against the recorded ones.

        Raises:
            IndexMismatchError: The index holds another model's vectors, or another size.
        """
        ...

    async def documents(self) -> list[DocumentRecord]:
        """Every document held, in source order."""
        ...

    async def put_document(
        self,
        document: DocumentRecord,
        chunks: Sequence[Chunk],
        vectors: npt.NDArray[np.float32] | None,
    ) -> None:
        """Add a document, or replace the one with its `doc_id`, atomically.

        Args:
            document: The record (its `chunk_count` is `len(chunks)`).
            chunks: Its chunks, `index` 0, 1, ... in order.
            vectors: One row per chunk (any length: the store normalises them), or None for
                an index without an embedding model. A document without chunks (no text)
                needs none either way.

        Raises:
            IndexMismatchError: The vectors' size is not the index's, or vectors are missing
                (or given) where the index has (or has no) embedding model.
        """
        ...

    async def remove_documents(self, doc_ids: Sequence[str]) -> int:
        """Drop these documents with their chunks and vectors; how many were held."""
        ...

    async def chunks(self, doc_id: str) -> list[Chunk]:
        """A document's chunks in order (empty if it is not held)."""
        ...

    async def keyword_search(
        self, query: str, top_k: int, doc_ids: Sequence[str] | None = None
    ) -> list[SearchHit]:
        """The `top_k` best chunks by BM25 for `query` (raw text: the store analyses it)."""
        ...

    async def vector_search(
        self,
        vector: npt.NDArray[np.float32],
        top_k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[SearchHit]:
        """The `top_k` chunks most similar to `vector` by cosine similarity.

        Raises:
            IndexMismatchError: The vector's size is not the index's.
        """
        ...

    async def front_chunks(
        self, per_document: int, doc_ids: Sequence[str] | None = None, limit: int | None = None
    ) -> list[Chunk]:
        """The first `per_document` chunks of each document, documents in source order.

        At most `limit` chunks are read (None: every document's).
        """
        ...

    async def close(self) -> None:
        """Release connections and memory; the store is not used afterwards."""
        ...
