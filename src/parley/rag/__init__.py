"""Retrieval: documents into chunks, a persistent index, keyword, vector and hybrid search.

Work in progress: `IndexStore` (the storage protocol) and the types it speaks.
"""

from parley.rag.store import IndexStore
from parley.rag.text import keyword_query, keyword_text
from parley.rag.types import (
    Chunk,
    DocumentRecord,
    IndexInfo,
    SearchHit,
    SearchMode,
    document_id,
)

__all__ = [
    "Chunk",
    "DocumentRecord",
    "IndexInfo",
    "IndexStore",
    "SearchHit",
    "SearchMode",
    "document_id",
    "keyword_query",
    "keyword_text",
]
