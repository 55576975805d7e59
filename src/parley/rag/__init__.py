"""Retrieval: documents into chunks, one persistent index, keyword, vector and hybrid search.

    from parley.rag import DocumentIndex

    index = await DocumentIndex.open("docs.index", embedding_model=model)
    await index.add(["report.pdf", "slides.pptx", "https://example.com/faq.html"])
    await index.sync("handbook/")
    for hit in await index.search("how are refunds handled?", top_k=5):
        print(hit.score, hit.source, hit.page, hit.text)

- `DocumentIndex` (`index.py`): the facade; adds files and URLs, syncs folders, searches.
- `Chunker` (`chunking.py`): parsed documents (`doc_parser`) into overlapping chunks of
  about `chunk_size` tokens, with page, slide, sheet and heading.
- `IndexStore` (`store.py`): the storage protocol; `SQLiteIndexStore` (`sqlite_store.py`) is
  the embedded one, one local file; `PostgresIndexStore` (`postgres_store.py`) keeps an index
  in PostgreSQL (full-text search and pgvector), shared by many processes
  (`DocumentIndex.open("postgresql://...")`).
- `reciprocal_rank_fusion` (`fusion.py`); `keyword_text`, `keyword_terms` and
  `keyword_query` (`text.py`).

Needs the `rag` extra (`pip install 'parley[rag]'`: numpy and the document parsers); on
PostgreSQL, the `rag-postgres` extra (asyncpg).
"""

from parley.rag.chunking import Chunker
from parley.rag.fusion import RRF_K, reciprocal_rank_fusion
from parley.rag.index import (
    DEFAULT,
    DocumentIndex,
    IndexSettings,
    IngestReport,
    OpenOptions,
    SearchOptions,
)
from parley.rag.postgres_store import PostgresIndexStore
from parley.rag.sqlite_store import SQLiteIndexStore
from parley.rag.store import IndexStore
from parley.rag.text import keyword_query, keyword_terms, keyword_text
from parley.rag.types import (
    Chunk,
    DocumentRecord,
    IndexInfo,
    SearchHit,
    SearchMode,
    document_id,
)

__all__ = [
    "DEFAULT",
    "RRF_K",
    "Chunk",
    "Chunker",
    "DocumentIndex",
    "DocumentRecord",
    "IndexInfo",
    "IndexSettings",
    "IndexStore",
    "IngestReport",
    "OpenOptions",
    "PostgresIndexStore",
    "SQLiteIndexStore",
    "SearchHit",
    "SearchMode",
    "SearchOptions",
    "document_id",
    "keyword_query",
    "keyword_terms",
    "keyword_text",
    "reciprocal_rank_fusion",
]
