"""`SQLiteIndexStore`: the embedded index, one local SQLite file.

The file holds the documents, their chunks, each chunk's vector (normalised float32, a blob,
in a table of its own so that reading chunks never reads vectors) and an FTS5 table for the
keywords. FTS5 is contentless (`content=''`): it keeps only the inverted index, not a second
copy of the text; deleting a chunk's terms hands FTS5 the text it was indexed with,
`keyword_text(chunk.text)`, recomputed, so the analyser's version is recorded
(`meta.keyword_analyzer`) and the FTS table is rebuilt from the chunks when it changes.

Both searches run in memory, over structures read from the file when first needed and
brought up to date after any commit, by this process or another (`PRAGMA data_version`),
reading only the chunks added since (ids only grow: `AUTOINCREMENT`) and dropping those
removed:

- Keyword search is BM25 with FTS5's formula and scores (`_bm25.KeywordIndex`), over the FTS
  table's postings read through `fts5vocab`: FTS5's `bm25()` scores every chunk matching any
  query term (a quarter of 100,000 for a typical question: 19 ms), where numpy over the
  postings takes under 2 ms. Chunks added later are analysed by FTS5's own tokenizer, on a
  private in-memory table (`_fts5.Analyzer`); FTS5 itself still ranks a query word that its
  tokenizer splits in two (a phrase needs positions, which only it holds).
- Vector search (`_vectors.VectorMatrix`) rather than `sqlite-vec`: this Python's `sqlite3`
  may not load extensions (pyenv and some distributions build it without), and where it
  loads it measured 25 times slower at 100,000 chunks than numpy over an in-memory matrix
  with a sign-bit first pass (docs/architecture.md, Retrieval). Vector searches read on a
  connection of their own, so that a hybrid search's keyword half runs beside them.

`memory()` says how much each holds.

Concurrency: WAL mode, so readers in any number of processes go on while one writer writes;
writers queue on SQLite's lock (`busy_timeout`). Each write is one transaction (`BEGIN
IMMEDIATE`), so a crash or an error midway leaves the file as it was before it. Reads run in a
transaction too, so a search sees one version of the index.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from parley._sqlite import use_wal
from parley.errors import RetrievalError
from parley.rag._bm25 import KeywordIndex
from parley.rag._fts5 import TOKENIZE, Analyzer, fts5_ranked, read_postings
from parley.rag._numpy import np, npt
from parley.rag._store_base import StoreBase
from parley.rag._vectors import VectorMatrix
from parley.rag.text import keyword_text
from parley.rag.types import Chunk, DocumentRecord, IndexInfo, SearchHit

__all__ = ["KEYWORD_ANALYZER", "SCHEMA_VERSION", "MemoryUse", "SQLiteIndexStore"]

SCHEMA_VERSION = 1
"""The layout of the file; a file of a later one is refused."""

KEYWORD_ANALYZER = "words+cjk-pairs/1"
"""The version of `parley.rag.text`'s analysis the FTS table was built with."""

T = TypeVar("T")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT NOT NULL UNIQUE,
    content_hash TEXT NOT NULL,
    pipeline TEXT NOT NULL,
    format TEXT NOT NULL,
    title TEXT,
    size INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    indexed_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id TEXT NOT NULL REFERENCES documents (doc_id),
    idx INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    page INTEGER,
    slide INTEGER,
    sheet TEXT,
    heading TEXT,
    UNIQUE (doc_id, idx)
);
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks (id),
    vector BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    body, content = '', tokenize = '{TOKENIZE}'
);
"""

_CHUNK_COLUMNS = (
    "c.id, c.doc_id, c.idx, c.text, c.tokens, d.source, d.title, c.page, c.slide, c.sheet, "
    "c.heading"
)
_BUSY_MS = 30_000
# More chunks added than a fifth of those held: reading every posting again costs less than
# analysing the added chunks' text (FTS5 tokenizes a chunk in about five times the time its
# postings take to read: 160 and 31 microseconds for the benchmark's chunks).
_REREAD_SHARE = 5


@dataclass(frozen=True)
class MemoryUse:
    """What a `SQLiteIndexStore` holds in memory beside its file, in bytes.

    Attributes:
        keyword: The BM25 postings (`_bm25.KeywordIndex`): every (term, chunk) pair the
            chunks hold, about 5 bytes each, and the terms; 0 until a keyword search.
        vector: The vectors (`_vectors.VectorMatrix`), 4 bytes a dimension per chunk and
            their sign bits; 0 until a vector search.
    """

    keyword: int
    vector: int

    @property
    def total(self) -> int:
        """Both together."""
        return self.keyword + self.vector


def _chunk(row: Sequence[Any]) -> Chunk:
    return Chunk(
        doc_id=row[1],
        index=row[2],
        text=row[3],
        tokens=row[4],
        source=row[5],
        title=row[6],
        page=row[7],
        slide=row[8],
        sheet=row[9],
        heading=row[10],
    )


def _in(values: Sequence[str]) -> str:
    return ", ".join("?" * len(values))


class SQLiteIndexStore(StoreBase):
    """The embedded `IndexStore`: one SQLite file (see the module docstring).

    Open it with `await SQLiteIndexStore.open(path)`.

    Args:
        path: The index's file (made, with its folder, if missing).
    """

    _elsewhere = "another file"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer = self._connect()
        self._reader = self._connect()
        # Vector searches read on a connection of their own, so that a hybrid search's two
        # halves run at once (SQLite and numpy both let go of the GIL).
        self._vector_lock = threading.Lock()
        self._vector_reader = self._connect()
        self._matrix: VectorMatrix | None = None
        self._seen_version: int | None = None
        # BM25 runs over postings held in memory (`_bm25`), read from the FTS table.
        self._analyzer = Analyzer()
        self._keywords: KeywordIndex | None = None
        self._keywords_version: int | None = None

    @classmethod
    async def open(cls, path: str | Path) -> SQLiteIndexStore:
        """Open (or make) the index at `path`.

        Raises:
            RetrievalError: The file is not an index (or a damaged one), or a later
                parley's.
        """
        return await asyncio.to_thread(cls._open_sync, Path(path))

    @classmethod
    def _open_sync(cls, path: Path) -> SQLiteIndexStore:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            store = cls(path)
        except sqlite3.DatabaseError as exc:
            raise RetrievalError(f"{path} is not a usable index: {exc}") from exc
        try:
            store._prepare()
        except BaseException:
            store._close_sync()
            raise
        return store

    @property
    def location(self) -> str:
        """The index's file, as shown in messages."""
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        connection.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        connection.execute("PRAGMA synchronous = NORMAL")  # WAL: a crash loses no commit
        return connection

    def _prepare(self) -> None:
        try:
            if self._ready():
                return  # opening an index that is there takes no write lock
            use_wal(self._writer, _BUSY_MS / 1000)
            with self._write() as db:
                for statement in _SCHEMA.split(";\n"):  # executescript() would COMMIT
                    if statement.strip():
                        db.execute(statement)
                self._check_schema(db)
        except sqlite3.DatabaseError as exc:
            raise RetrievalError(f"{self.path} is not a usable index: {exc}") from exc

    def _ready(self) -> bool:
        """Whether the file already holds this layout and keyword analysis (a read only)."""
        with self._read() as db:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                return False
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        return meta.get("schema_version") == str(SCHEMA_VERSION) and (
            meta.get("keyword_analyzer") == KEYWORD_ANALYZER
        )

    def _check_schema(self, db: sqlite3.Connection) -> None:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        version = int(meta.get("schema_version", SCHEMA_VERSION))
        if version > SCHEMA_VERSION:
            raise RetrievalError(
                f"{self.path} was made by a later parley (index layout {version}; this one "
                f"reads {SCHEMA_VERSION}): upgrade parley to use it"
            )
        db.execute(
            "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        if meta.get("keyword_analyzer", KEYWORD_ANALYZER) != KEYWORD_ANALYZER:
            self._rebuild_keywords(db)
        db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('keyword_analyzer', ?)", (KEYWORD_ANALYZER,)
        )

    def _rebuild_keywords(self, db: sqlite3.Connection) -> None:
        """The FTS table again from the chunks, after the keyword analysis changed."""
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
        rows = db.execute("SELECT id, text FROM chunks").fetchall()
        db.executemany(
            "INSERT INTO chunks_fts (rowid, body) VALUES (?, ?)",
            ((i, keyword_text(t)) for i, t in rows),
        )

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed whole, or rolled back on any error."""
        with self._write_lock:
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _read(
        self, connection: sqlite3.Connection | None = None, lock: threading.Lock | None = None
    ) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query in it sees the same version of the index."""
        with lock or self._read_lock:
            db = connection or self._reader
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(function, *args)

    # -- the protocol -------------------------------------------------------------------------

    async def info(self) -> IndexInfo:
        """The index's embedding model, vector size and layout version."""
        return await self._run(self._info)

    def _info(self) -> IndexInfo:
        with self._read() as db:
            return _info(db)

    async def bind_embedding(self, model: str, dimensions: int) -> None:
        """Record the embedding model and vector size, or check them.

        Raises:
            IndexMismatchError: The index holds another model's vectors, or another size.
        """
        await self._run(self._bind, model, dimensions)

    def _bind(self, model: str, dimensions: int) -> None:
        if self._check_binding(self._info(), model, dimensions):
            return  # bound already: checking takes no write lock
        with self._write() as db:
            if not self._check_binding(_info(db), model, dimensions):
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [("embedding_model", model), ("dimensions", str(dimensions))],
                )

    async def documents(self) -> list[DocumentRecord]:
        """Every document held, in source order."""
        return await self._run(self._documents)

    def _documents(self) -> list[DocumentRecord]:
        with self._read() as db:
            rows = db.execute(
                "SELECT doc_id, source, content_hash, pipeline, format, title, size, "
                "chunk_count, indexed_at FROM documents ORDER BY source"
            ).fetchall()
        return [DocumentRecord(*row) for row in rows]

    async def _write_document(
        self, document: DocumentRecord, chunks: list[Chunk], vectors: npt.NDArray[np.float32] | None
    ) -> None:
        await self._run(self._put, document, chunks, vectors)

    def _put(
        self,
        document: DocumentRecord,
        chunks: list[Chunk],
        vectors: npt.NDArray[np.float32] | None,
    ) -> None:
        with self._write() as db:
            normal = self._vector_rows(document, _info(db), vectors, len(chunks))
            blobs = None if normal is None else [row.tobytes() for row in normal]
            self._delete(db, [document.doc_id])
            db.execute(
                "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    document.doc_id,
                    document.source,
                    document.content_hash,
                    document.pipeline,
                    document.format,
                    document.title,
                    document.size,
                    len(chunks),
                    document.indexed_at or time.time(),
                ),
            )
            db.executemany(
                "INSERT INTO chunks (doc_id, idx, text, tokens, page, slide, sheet, heading) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (c.doc_id, c.index, c.text, c.tokens, c.page, c.slide, c.sheet, c.heading)
                    for c in chunks
                ),
            )
            rows = db.execute(
                "SELECT id, text FROM chunks WHERE doc_id = ? ORDER BY idx", (document.doc_id,)
            ).fetchall()
            db.executemany(
                "INSERT INTO chunks_fts (rowid, body) VALUES (?, ?)",
                ((i, keyword_text(t)) for i, t in rows),
            )
            if blobs is not None:
                db.executemany(
                    "INSERT INTO vectors VALUES (?, ?)",
                    ((row[0], blob) for row, blob in zip(rows, blobs, strict=True)),
                )

    def _delete(self, db: sqlite3.Connection, doc_ids: Sequence[str]) -> int:
        marks = _in(doc_ids)
        old = db.execute(f"SELECT id, text FROM chunks WHERE doc_id IN ({marks})", doc_ids)
        db.executemany(
            "INSERT INTO chunks_fts (chunks_fts, rowid, body) VALUES ('delete', ?, ?)",
            ((i, keyword_text(t)) for i, t in old.fetchall()),
        )
        db.execute(
            f"DELETE FROM vectors WHERE chunk_id IN "
            f"(SELECT id FROM chunks WHERE doc_id IN ({marks}))",
            doc_ids,
        )
        db.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", doc_ids)
        gone = db.execute(f"DELETE FROM documents WHERE doc_id IN ({marks})", doc_ids)
        return gone.rowcount

    async def _drop_documents(self, doc_ids: list[str]) -> int:
        return await self._run(self._remove, doc_ids)

    def _remove(self, doc_ids: list[str]) -> int:
        with self._write() as db:
            return self._delete(db, doc_ids)

    async def chunks(self, doc_id: str) -> list[Chunk]:
        """A document's chunks in order."""
        return await self._run(self._chunks, doc_id)

    def _chunks(self, doc_id: str) -> list[Chunk]:
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d USING (doc_id) "
                "WHERE c.doc_id = ? ORDER BY c.idx",
                (doc_id,),
            ).fetchall()
        return [_chunk(row) for row in rows]

    async def _keyword_hits(
        self, terms: list[str], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        return await self._run(self._keyword, terms, top_k, doc_ids)

    def _keyword(
        self, words: list[str], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        with self._read() as db:
            phrases = self._analyzer.terms(words)
            if all(len(terms) == 1 for terms in phrases):
                index = self._fresh_keywords(db)
                ranked = index.search([terms[0] for terms in phrases], top_k, doc_ids)
            else:
                ranked = fts5_ranked(db, words, top_k, doc_ids)
            chunks = self._rows(db, [i for i, _ in ranked])
        return [SearchHit(chunks[i], score, "keyword") for i, score in ranked]

    def _fresh_keywords(self, db: sqlite3.Connection) -> KeywordIndex:
        """The in-memory postings, brought up to date with the file (inside a read).

        The first search reads every posting from the FTS table; after a commit, by this
        process or another, only the chunks added are read (and analysed by FTS5's tokenizer
        in memory), and the chunks removed are dropped. Where more were added than a full
        read would cost (`_REREAD_SHARE`), everything is read again.
        """
        version = _data_version(db)
        index = self._keywords
        if index is not None and version == self._keywords_version:
            return index
        self._keywords = None  # until brought up to date: an error midway reads all again
        added = held = 0
        if index is not None:
            query = "SELECT count(*) FROM chunks WHERE id > ?"
            added = db.execute(query, (index.newest,)).fetchone()[0]
            held = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        if index is None or added * _REREAD_SHARE > held:
            index = self._read_keywords(db)
        else:
            self._add_keywords(db, index)
        self._keywords, self._keywords_version = index, version
        return index

    def _read_keywords(self, db: sqlite3.Connection) -> KeywordIndex:
        """Every chunk's postings, from the FTS table."""
        db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_terms "
            "USING fts5vocab(main, chunks_fts, instance)"
        )
        rows = db.execute("SELECT id, doc_id FROM chunks ORDER BY id").fetchall()
        ids = np.fromiter((row[0] for row in rows), np.int64, len(rows))
        index = KeywordIndex()
        index.apply(ids, ids.tolist(), [row[1] for row in rows], read_postings(db, "chunks_terms"))
        return index

    def _add_keywords(self, db: sqlite3.Connection, index: KeywordIndex) -> None:
        """The chunks added since `index` was brought up to date, and those removed."""
        kept = np.fromiter((row[0] for row in db.execute("SELECT id FROM chunks")), np.int64)
        added = db.execute(
            "SELECT id, doc_id, text FROM chunks WHERE id > ? ORDER BY id", (index.newest,)
        ).fetchall()
        postings = self._analyzer.postings((i, keyword_text(text)) for i, _, text in added)
        index.apply(kept, [row[0] for row in added], [row[1] for row in added], postings)

    def _rows(self, db: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Chunk]:
        """The chunks with these ids, by id."""
        if not ids:
            return {}
        rows = db.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d USING (doc_id) "
            f"WHERE c.id IN ({', '.join('?' * len(ids))})",
            list(ids),
        ).fetchall()
        return {row[0]: _chunk(row) for row in rows}

    async def _vector_hits(
        self, vector: npt.NDArray[np.float32], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        return await self._run(self._vector, vector, top_k, doc_ids)

    def _vector(
        self, vector: npt.NDArray[np.float32], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        with self._read(self._vector_reader, self._vector_lock) as db:
            matrix = self._fresh_matrix(db)
            found = matrix.search(vector, top_k, doc_ids)
            chunks = self._rows(db, [i for i, _ in found])
        return [SearchHit(chunks[i], score, "vector") for i, score in found]

    def _fresh_matrix(self, db: sqlite3.Connection) -> VectorMatrix:
        """The in-memory matrix, brought up to date with the file (inside a read)."""
        dimensions = self._dimensions(_info(db))
        version = _data_version(db)
        matrix = self._matrix
        if matrix is None or matrix.dimensions != dimensions:
            matrix = self._matrix = VectorMatrix(dimensions)
        elif version == self._seen_version:
            return matrix
        # The chunks' ids come from the (doc_id, idx) index, which holds them: no blob is read.
        kept = np.fromiter((row[0] for row in db.execute("SELECT id FROM chunks")), np.int64)
        newest = int(matrix.ids.max()) if len(matrix) else 0
        added = db.execute(
            "SELECT v.chunk_id, c.doc_id, v.vector FROM vectors v JOIN chunks c "
            "ON c.id = v.chunk_id WHERE v.chunk_id > ? ORDER BY v.chunk_id",
            (newest,),
        ).fetchall()
        vectors = np.frombuffer(b"".join(r[2] for r in added), dtype=np.float32)
        matrix.apply(kept, [r[0] for r in added], [r[1] for r in added], vectors)
        self._seen_version = version
        return matrix

    async def _front_rows(
        self, per_document: int, doc_ids: Sequence[str] | None, limit: int | None
    ) -> list[Chunk]:
        return await self._run(self._front, per_document, doc_ids, limit)

    def _front(
        self, per_document: int, doc_ids: Sequence[str] | None, limit: int | None
    ) -> list[Chunk]:
        where, parameters = "", list[object]([per_document])
        if doc_ids is not None:
            where = f"AND c.doc_id IN ({_in(doc_ids)})"
            parameters += list(doc_ids)
        parameters.append(-1 if limit is None else limit)  # SQLite: a negative LIMIT is none
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d USING (doc_id) "
                f"WHERE c.idx < ? {where} ORDER BY d.source, c.idx LIMIT ?",
                parameters,
            ).fetchall()
        return [_chunk(row) for row in rows]

    async def close(self) -> None:
        """Close the file's connections and drop the in-memory vectors."""
        await self._run(self._close_sync)

    def _close_sync(self) -> None:
        with self._write_lock, self._read_lock, self._vector_lock:
            self._writer.close()
            self._reader.close()
            self._vector_reader.close()
            self._analyzer.close()
            self._matrix = None
            self._keywords = None

    def memory(self) -> MemoryUse:
        """The memory the store holds beside the file, in bytes (see `MemoryUse`)."""
        keywords, matrix = self._keywords, self._matrix
        return MemoryUse(
            keyword=keywords.nbytes if keywords is not None else 0,
            vector=matrix.nbytes if matrix is not None else 0,
        )


def _data_version(db: sqlite3.Connection) -> int:
    """The file's version as this read transaction sees it: it changes with every commit."""
    db.execute("SELECT 1 FROM meta").fetchone()  # a read first: it fixes the snapshot
    return int(db.execute("PRAGMA data_version").fetchone()[0])


def _info(db: sqlite3.Connection) -> IndexInfo:
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    dimensions = meta.get("dimensions")
    return IndexInfo(
        embedding_model=meta.get("embedding_model"),
        dimensions=int(dimensions) if dimensions else None,
        schema_version=int(meta.get("schema_version", SCHEMA_VERSION)),
    )
