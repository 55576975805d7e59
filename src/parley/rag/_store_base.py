"""What parley's index stores share above their engines: each call's checks, then the engine.

`SQLiteIndexStore` and `PostgresIndexStore` implement `IndexStore` on this base: it checks a
call's arguments (an empty filter or `top_k` of 0 finds nothing, vectors must match the
chunks and the bound model) and words the refusals once; each store does the engine's part
in the hooks (`_write_document`, `_keyword_hits`, ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from parley.errors import IndexMismatchError
from parley.rag._numpy import np, npt
from parley.rag._vectors import normalized
from parley.rag.text import keyword_query
from parley.rag.types import Chunk, DocumentRecord, IndexInfo, SearchHit

__all__ = ["StoreBase"]


class StoreBase(ABC):
    """The checks and messages every parley store shares (see the module docstring)."""

    _elsewhere: ClassVar[str]
    """Where an index of another embedding model goes: `another file`, ..."""

    @property
    @abstractmethod
    def location(self) -> str:
        """The index as shown in messages."""

    async def put_document(
        self,
        document: DocumentRecord,
        chunks: Sequence[Chunk],
        vectors: npt.NDArray[np.float32] | None,
    ) -> None:
        """Add a document, or replace the one with its id, in one transaction.

        Raises:
            IndexMismatchError: Vectors of another size, or vectors missing (or given)
                where the index has (or has no) embedding model.
            RetrievalError: A database server refused the write (nothing of it was kept).
        """
        chunks = list(chunks)
        if vectors is not None and len(vectors) != len(chunks):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        await self._write_document(document, chunks, vectors)

    async def remove_documents(self, doc_ids: Sequence[str]) -> int:
        """Drop these documents with their chunks and vectors; how many were held."""
        if not doc_ids:
            return 0
        return await self._drop_documents(list(doc_ids))

    async def keyword_search(
        self, query: str, top_k: int, doc_ids: Sequence[str] | None = None
    ) -> list[SearchHit]:
        """The `top_k` best chunks by BM25 for `query` (each engine's: see its module)."""
        terms = keyword_query(query)
        if not terms or top_k <= 0 or (doc_ids is not None and not doc_ids):
            return []
        return await self._keyword_hits(terms, top_k, doc_ids)

    async def vector_search(
        self,
        vector: npt.NDArray[np.float32],
        top_k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[SearchHit]:
        """The `top_k` chunks most similar to `vector` (cosine).

        Raises:
            IndexMismatchError: The vector's size is not the index's, or the index has no
                embedding model.
        """
        if top_k <= 0 or (doc_ids is not None and not doc_ids):
            return []
        return await self._vector_hits(vector, top_k, doc_ids)

    async def front_chunks(
        self, per_document: int, doc_ids: Sequence[str] | None = None, limit: int | None = None
    ) -> list[Chunk]:
        """The first `per_document` chunks of each document, documents in source order.

        At most `limit` chunks are read (None: every document's).
        """
        if per_document <= 0 or (doc_ids is not None and not doc_ids) or limit == 0:
            return []
        return await self._front_rows(per_document, doc_ids, limit)

    # -- what a store does -------------------------------------------------------------------

    @abstractmethod
    async def _write_document(
        self, document: DocumentRecord, chunks: list[Chunk], vectors: npt.NDArray[np.float32] | None
    ) -> None:
        """Replace the document with these chunks and vectors (as many), in one transaction."""

    @abstractmethod
    async def _drop_documents(self, doc_ids: list[str]) -> int:
        """Drop these documents (some); how many were held."""

    @abstractmethod
    async def _keyword_hits(
        self, terms: list[str], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        """The keyword search of `terms` (some), `top_k` above 0, a filter of some ids or none."""

    @abstractmethod
    async def _vector_hits(
        self, vector: npt.NDArray[np.float32], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        """The vector search, `top_k` above 0, a filter of some ids or none."""

    @abstractmethod
    async def _front_rows(
        self, per_document: int, doc_ids: Sequence[str] | None, limit: int | None
    ) -> list[Chunk]:
        """The front chunks, `per_document` and `limit` above 0, a filter of some ids or none."""

    # -- shared checks ------------------------------------------------------------------------

    def _check_binding(self, held: IndexInfo, model: str, dimensions: int) -> bool:
        """Whether the index is bound to this model (False: to none); refuses another."""
        if held.embedding_model is None:
            return False
        if (held.embedding_model, held.dimensions) != (model, dimensions):
            raise IndexMismatchError(
                f"the index {self.location} holds vectors of {held.embedding_model} "
                f"({held.dimensions} dimensions), not of {model} ({dimensions}): open it "
                f"with that model, or index into {self._elsewhere}"
            )
        return True

    def _vector_rows(
        self,
        document: DocumentRecord,
        held: IndexInfo,
        vectors: npt.NDArray[np.float32] | None,
        count: int,
    ) -> npt.NDArray[np.float32] | None:
        """A document's vectors normalised, checked against the index's model; None: none."""
        if not count:
            return None  # a document without text: nothing to embed, whatever the model
        if vectors is None:
            if held.embedding_model is not None:
                raise IndexMismatchError(
                    f"the index {self.location} embeds with {held.embedding_model}: "
                    f"{document.source} needs its vectors (open the index with that model)"
                )
            return None
        if held.dimensions is None:
            raise IndexMismatchError(
                f"the index {self.location} has no embedding model: bind_embedding() first"
            )
        return normalized(vectors, held.dimensions)

    def _dimensions(self, held: IndexInfo) -> int:
        """The vectors' size, for a search.

        Raises:
            IndexMismatchError: The index has no embedding model.
        """
        if held.dimensions is None:
            raise IndexMismatchError(
                f"the index {self.location} has no vectors (no embedding model)"
            )
        return held.dimensions
