"""What an index holds and answers: chunks, documents, search hits, the index's identity."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Chunk",
    "DocumentRecord",
    "IndexInfo",
    "SearchHit",
    "SearchMode",
    "document_id",
]

SearchMode = Literal["keyword", "vector", "hybrid", "front_page"]
"""How a search ranks: BM25, cosine, reciprocal rank fusion of both, or documents' openings."""


def document_id(source: str) -> str:
    """The stable id of the document at `source` (a resolved path or a URL).

    Every store uses the same ids, so a chunk's id means the same in SQLite and PostgreSQL.
    """
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document, about `chunk_size` tokens, with where it came from.

    Attributes:
        doc_id: Its document's id (`document_id(source)`).
        index: Its position in the document, from 0.
        text: The text.
        tokens: Its length in tokens (the project's counter).
        source: The document's path (resolved) or URL.
        title: The document's title (an HTML title, else the first heading, else the name).
        page: The PDF page it starts on, from 1.
        slide: The PowerPoint slide it is on, from 1.
        sheet: The spreadsheet's sheet (its name) it is on.
        heading: The nearest heading above it (a slide's title, a Markdown or Word heading).
    """

    doc_id: str
    index: int
    text: str
    tokens: int
    source: str
    title: str | None = None
    page: int | None = None
    slide: int | None = None
    sheet: str | None = None
    heading: str | None = None

    @property
    def chunk_id(self) -> str:
        """`<doc_id>:<index>`: the same in every store, stable while the document is."""
        return f"{self.doc_id}:{self.index}"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A chunk a search found, with its score.

    Attributes:
        chunk: The chunk.
        score: Higher is better; its scale is the mode's: BM25 (keyword, unbounded), cosine
            similarity (vector, -1 to 1), the reciprocal rank fusion sum (hybrid, at most
            2/61) or 1.0 (front page).
        mode: The search that scored it.
    """

    chunk: Chunk
    score: float
    mode: SearchMode

    @property
    def text(self) -> str:
        """The chunk's text."""
        return self.chunk.text

    @property
    def source(self) -> str:
        """The document's path or URL."""
        return self.chunk.source

    @property
    def chunk_id(self) -> str:
        """The chunk's id."""
        return self.chunk.chunk_id

    @property
    def page(self) -> int | None:
        """The PDF page, if any."""
        return self.chunk.page

    @property
    def slide(self) -> int | None:
        """The slide, if any."""
        return self.chunk.slide

    @property
    def sheet(self) -> str | None:
        """The sheet's name, if any."""
        return self.chunk.sheet


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """A document as the index holds it.

    Attributes:
        doc_id: `document_id(source)`.
        source: The resolved path or the URL.
        content_hash: SHA-256 of its bytes, hex; an equal hash means unchanged.
        pipeline: How its chunks were made (chunking settings, embedding model); a document
            made another way is indexed again even if its bytes are equal.
        format: The parser's format (`pdf`, `docx`, ..., `text`).
        title: Its title, when known.
        size: Its size in bytes.
        chunk_count: How many chunks it has.
        indexed_at: When it was indexed (seconds since the epoch).
    """

    doc_id: str
    source: str
    content_hash: str
    pipeline: str
    format: str
    title: str | None
    size: int
    chunk_count: int
    indexed_at: float = field(default=0.0, compare=False)


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """What an index is: which embedding model made its vectors, and their size.

    Attributes:
        embedding_model: The model's identity (`provider/model`), or None for an index of
            keywords only (no vectors yet).
        dimensions: The vectors' size, or None with no model.
        schema_version: The store's layout version.
    """

    embedding_model: str | None
    dimensions: int | None
    schema_version: int
