"""`DocumentIndex`: documents in, chunks out; the one entry point of `parley.rag`.

    index = await DocumentIndex.open("docs.index", embedding_model=model)
    # or, shared by many processes: DocumentIndex.open("postgresql://user@host/db", ...)
    await index.add(["report.pdf", "https://example.com/notes.html"])
    await index.sync("handbook/")            # new, changed and removed files
    hits = await index.search("refund policy", top_k=5)

`add` reads each source (capped at `max_file_bytes`; URLs through the fetcher that refuses
private addresses), hashes its bytes, and skips it when the index holds the same bytes made
the same way (`DocumentRecord.pipeline`: chunk settings and embedding model). Otherwise it is
parsed (`doc_parser`, in a parser process under `parse_limits`), cut into chunks
(`Chunker`), embedded, and put in the store in one transaction, replacing its previous
version. One bad source (a parse stopped at its time or memory limit too) never stops the
others: every source is tried, and the failures are raised together at the end (or reported, with
`errors="report"`). `sync(folder)` does the same for every supported file under a folder and
drops the documents of files no longer there.

`search` ranks by BM25 (`keyword`), cosine similarity (`vector`), both fused by reciprocal
rank (`hybrid`, the default when the index has an embedding model), or returns each
document's first chunks (`front_page`, for "summarize this" questions; `top_k` at most). A
query that names nothing to search for ("summarize the document", `*`, `AND`) finds nothing
by keyword (a hybrid one finds what its vector half finds), unless `front_page_fallback`
asks for Qwen-Agent's keyword search, which gives it the front page (the compat layer
does). With `front_page_tokens`, a search over a single document puts that document's
opening first, as Qwen-Agent's `front_page_search` searcher does beside its other searchers
(its default `rag_searchers`).

Every method has a sync twin (`add_sync`, `sync_sync`, `search_sync`, ...).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import os
import stat
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

from parley import tracing
from parley._sync import run_sync
from parley.agents.budget import text_token_counter
from parley.embeddings.base import EmbeddingModel
from parley.errors import DocumentError, ModelError, UserError
from parley.rag._numpy import np, npt
from parley.rag.chunking import Chunker
from parley.rag.fusion import reciprocal_rank_fusion
from parley.rag.ingest import Loaded, Reader, is_url, normalize_source
from parley.rag.postgres_store import PostgresIndexStore, is_postgres_url
from parley.rag.sqlite_store import SQLiteIndexStore
from parley.rag.store import IndexStore
from parley.rag.text import keyword_query
from parley.rag.types import Chunk, DocumentRecord, SearchHit, SearchMode, document_id
from parley.tools.builtin._net import FetchPolicy
from parley.tools.builtin.doc_parser import ParsedDocument, ParseLimits, detect_format

__all__ = [
    "DEFAULT",
    "DocumentIndex",
    "IndexSettings",
    "IngestReport",
    "OpenOptions",
    "Progress",
    "SearchOptions",
]

logger = logging.getLogger("parley.rag")

_MAX_BYTES = 50 * 1024 * 1024
_FUSION_DEPTH = 50  # each search's ranking fused in hybrid mode: at least this deep

Source = str | os.PathLike[str]

Progress = Callable[[int, int, str], None]
"""Told of each source indexed: (sources done, sources in all, the source)."""


class IndexSettings(TypedDict, total=False):
    """How a `DocumentIndex` reads, chunks and searches (the class's docstring tells each)."""

    chunk_size: int
    chunk_overlap: int
    max_file_bytes: int
    fetch_policy: FetchPolicy | None
    roots: Sequence[Source] | None
    front_page_chunks: int
    max_rows: int
    parse_limits: ParseLimits | None


class OpenOptions(IndexSettings, total=False):
    """`DocumentIndex.open`'s keyword arguments: the store and model, and `IndexSettings`."""

    store: IndexStore | None
    embedding_model: EmbeddingModel[Any] | _Default | None


class SearchOptions(TypedDict, total=False):
    """`DocumentIndex.search`'s keyword arguments (its docstring tells each)."""

    mode: SearchMode | None
    top_k: int
    score_threshold: float | None
    sources: Sequence[Source] | None
    front_page_tokens: int | None
    front_page_fallback: bool


# Sources in flight: the one being stored, and two read and parsed meanwhile (the parser
# pool has at least two processes).
_AHEAD = 3
_CHUNK_ON_THE_LOOP = 8_000  # characters: about half a millisecond of chunking


@dataclass
class _Read:
    """A source read ahead: its bytes and chunks, or why it could not be read.

    `chunks` None: the index holds it as it is (it was not parsed).
    """

    shown: str
    loaded: Loaded | None = None
    format: str | None = None
    chunks: list[Chunk] | None = None
    error: DocumentError | None = None


class _Default(enum.Enum):
    MODEL = "the embedded local model"


DEFAULT = _Default.MODEL
"""`embedding_model`'s default: `LocalEmbeddingModel()` (all-MiniLM-L6-v2, on this machine)."""


def _default_model() -> EmbeddingModel[Any]:
    from parley.providers.local.embeddings import LocalEmbeddingModel  # noqa: PLC0415  (onnxruntime)

    return LocalEmbeddingModel()


@dataclass
class IngestReport:
    """What `add` or `sync` did, source by source (normalised sources).

    Attributes:
        added: Indexed for the first time.
        updated: Indexed again: their bytes (or the way chunks are made) changed.
        unchanged: Already indexed as they are; nothing was rewritten.
        removed: Dropped (`sync`: their files are gone).
        failed: The sources that could not be indexed, with why; the index holds what it
            held of them before.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, DocumentError] = field(default_factory=dict)

    def raise_for_failures(self) -> None:
        """Raise the failure (or one `DocumentError` naming every failure), if any."""
        if not self.failed:
            return
        if len(self.failed) == 1:
            raise next(iter(self.failed.values()))
        done = len(self.added) + len(self.updated) + len(self.unchanged)
        lines = "\n".join(f"- {error}" for error in self.failed.values())
        raise DocumentError(
            f"{len(self.failed)} documents could not be indexed ({done} others were):\n{lines}",
            source=next(iter(self.failed)),
        )


class DocumentIndex:
    """A persistent, incrementally updated index of documents (see the module docstring).

    Open one with `DocumentIndex.open` (or `open_sync`); close it with `close` or `async with`.

    Args:
        store: Where the index lives.
        embedding_model: Embeds chunks and queries; None for keyword search only (`open`
            gives the embedded local model by default).
        chunk_size: The most tokens per chunk (Qwen-Agent's default, 500).
        chunk_overlap: The most tokens a chunk repeats of the one before.
        max_file_bytes: The largest file or download read.
        fetch_policy: What URL downloads may reach (default: public addresses only).
        roots: Folders that paths must lie in (None: any path).
        front_page_chunks: How many first chunks of each document the front page gives.
        max_rows: The most rows read of each table.
        parse_limits: What parsing one document may cost (time, memory, pages, characters
            read: `ParseLimits()` by default); each is parsed in a parser process.
    """

    def __init__(
        self,
        store: IndexStore,
        embedding_model: EmbeddingModel[Any] | None = None,
        *,
        chunk_size: int = 500,
        chunk_overlap: int = 50,
        max_file_bytes: int = _MAX_BYTES,
        fetch_policy: FetchPolicy | None = None,
        roots: Sequence[Source] | None = None,
        front_page_chunks: int = 2,
        max_rows: int = 1000,
        parse_limits: ParseLimits | None = None,
    ) -> None:
        self.store = store
        self.embedding_model = embedding_model
        self.chunker = Chunker(chunk_size, chunk_overlap, text_token_counter())
        self.reader = Reader(max_file_bytes, fetch_policy, roots)
        self.front_page_chunks = front_page_chunks
        self.max_rows = max_rows
        self.parse_limits = parse_limits or ParseLimits()
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        path: Source | None = None,
        *,
        store: IndexStore | None = None,
        embedding_model: EmbeddingModel[Any] | _Default | None = DEFAULT,
        **settings: Unpack[IndexSettings],
    ) -> DocumentIndex:
        """Open the index at `path`, or in `store`, with the class's settings.

        `path` is an SQLite file (made if missing), or a PostgreSQL URL (`postgresql://`,
        `postgres://` or `postgresql+asyncpg://`) for a `PostgresIndexStore` with its default
        schema and table prefix (give `store=` for others).

        `embedding_model` embeds chunks and queries: by default the embedded local model
        (`parley.providers.local.embeddings`, extra `embeddings`); None for keyword search only. An
        index keeps the vectors of one model: open it again with that model.

        Raises:
            IndexMismatchError: The index holds vectors of another embedding model.
            RetrievalError: The file is not an index, or the server cannot be reached.
            UserError: Neither or both of `path` and `store`, or bad chunk settings.
        """
        if (path is None) == (store is None):
            raise UserError("give DocumentIndex.open either a path or a store")
        model = _default_model() if embedding_model is DEFAULT else embedding_model
        opened = store if store is not None else await _open_store(path or "")
        try:
            index = cls(opened, model, **settings)
            await index._check_model()
        except BaseException:
            if store is None:
                await opened.close()
            raise
        return index

    @classmethod
    def open_sync(cls, path: Source | None = None, **options: Unpack[OpenOptions]) -> DocumentIndex:
        """The sync twin of `open` (same arguments)."""
        return run_sync(cls.open(path, **options))

    async def __aenter__(self) -> DocumentIndex:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the store (the embedding model is the caller's)."""
        await self.store.close()

    def close_sync(self) -> None:
        """The sync twin of `close`."""
        run_sync(self.close())

    # -- identity -----------------------------------------------------------------------------

    @property
    def model_id(self) -> str | None:
        """The embedding model as the index records it (`provider/model`), or None."""
        model = self.embedding_model
        return None if model is None else f"{model.provider}/{model.model}"

    @property
    def pipeline(self) -> str:
        """How this index makes chunks and vectors; documents made otherwise are redone."""
        chunker = self.chunker
        return (
            f"chunk_size={chunker.chunk_size};chunk_overlap={chunker.chunk_overlap};"
            f"embedding={self.model_id or '-'}"
        )

    async def _check_model(self) -> None:
        """Refuse at once a model other than the one whose vectors the index holds."""
        model_id = self.model_id
        info = await self.store.info()
        if model_id is None or info.embedding_model is None:
            return
        dimensions = self.embedding_model.dimensions if self.embedding_model else None
        await self.store.bind_embedding(model_id, dimensions or info.dimensions or 0)

    # -- adding -------------------------------------------------------------------------------

    async def add(
        self,
        sources: Source | Sequence[Source],
        *,
        errors: Literal["raise", "report"] = "raise",
        progress: Progress | None = None,
    ) -> IngestReport:
        """Index files and URLs: new ones added, changed ones replaced, the same ones skipped.

        Args:
            sources: Paths, `file://` URLs or `http(s)://` URLs.
            errors: `raise`: after trying every source, raise the failures (one
                `DocumentError` naming all); `report`: return them in the report.
            progress: Called after each source with (sources done, sources in all, the
                source): for a progress bar.

        Raises:
            DocumentError: A source could not be indexed (with `errors="raise"`).
        """
        listed = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
        report = await self._add_all(listed, self.reader, progress)
        if errors == "raise":
            report.raise_for_failures()
        return report

    async def _add_all(
        self, listed: Sequence[Source], reader: Reader, progress: Progress | None
    ) -> IngestReport:
        """Read and parse up to `_AHEAD` sources ahead while the one before them is stored.

        Each document is parsed in a parser process: reading ahead keeps the pool's processes
        busy, so that their round trips overlap the store's writes (and two PDFs parse at
        once). Sources are committed, reported and told to `progress` in their order.
        """
        report = IngestReport()
        async with self._write_lock:
            held = {d.doc_id: d for d in await self.store.documents()}
            waiting = iter(listed)
            ahead: deque[tuple[Source, asyncio.Task[_Read]]] = deque()
            try:
                for done in range(1, len(listed) + 1):
                    for source in itertools.islice(waiting, _AHEAD - len(ahead)):
                        ahead.append(
                            (source, asyncio.create_task(self._read(source, held, reader)))
                        )
                    source, task = ahead.popleft()
                    await self._commit(await task, held, report)
                    if progress is not None:
                        progress(done, len(listed), os.fspath(source))
            finally:  # stopped (cancelled, a store failing): what was read ahead is dropped
                for _, task in ahead:
                    task.cancel()
                await asyncio.gather(*(task for _, task in ahead), return_exceptions=True)
        return report

    def add_sync(
        self, sources: Source | Sequence[Source], *, errors: Literal["raise", "report"] = "raise"
    ) -> IngestReport:
        """The sync twin of `add`."""
        return run_sync(self.add(sources, errors=errors))

    async def _read(
        self, source: Source, held: Mapping[str, DocumentRecord], reader: Reader
    ) -> _Read:
        """Read a source, and parse and chunk it unless the index holds it as it is."""
        shown = os.fspath(source)
        try:
            name = normalize_source(source)
            shown = name
            loaded = await _load(reader, name)
            if self._unchanged(held.get(document_id(name)), loaded):
                return _Read(shown, loaded)
            parsed = await self._parse(loaded)
            chunks = await self._chunks(parsed, name)
        except DocumentError as exc:
            return _Read(shown, error=exc)
        return _Read(shown, loaded, parsed.format, chunks)

    async def _chunks(self, parsed: ParsedDocument, source: str) -> list[Chunk]:
        """The document's chunks: on the loop when it is short, else in a thread."""
        size = sum(len(item.text) for section in parsed.sections for item in section.items)
        if size <= _CHUNK_ON_THE_LOOP:  # a thread's round trip would cost more than this
            return self.chunker.chunks(parsed, document_id(source), source)
        return await asyncio.to_thread(self.chunker.chunks, parsed, document_id(source), source)

    async def _commit(
        self, read: _Read, held: dict[str, DocumentRecord], report: IngestReport
    ) -> None:
        """Embed and store a source read (unless unchanged), and report it."""
        if read.error is not None:
            report.failed[read.shown] = read.error
            return
        loaded = read.loaded
        assert loaded is not None
        previous = held.get(document_id(loaded.source))
        # Checked again: the same source named twice was read ahead twice, stored once.
        if read.chunks is None or self._unchanged(previous, loaded):
            report.unchanged.append(loaded.source)
            return
        try:
            record = await self._store(loaded, read.format or "text", read.chunks)
        except DocumentError as exc:
            report.failed[read.shown] = exc
            return
        held[record.doc_id] = record
        (report.updated if previous else report.added).append(loaded.source)

    def _unchanged(self, previous: DocumentRecord | None, loaded: Loaded) -> bool:
        return (
            previous is not None
            and previous.content_hash == loaded.content_hash
            and previous.pipeline == self.pipeline
        )

    async def _store(self, loaded: Loaded, document: str, chunks: list[Chunk]) -> DocumentRecord:
        """Embed and store one parsed document; DocumentError on any failure."""
        vectors = await self._embed_chunks(loaded.source, chunks)
        record = DocumentRecord(
            doc_id=document_id(loaded.source),
            source=loaded.source,
            content_hash=loaded.content_hash,
            pipeline=self.pipeline,
            format=document,
            title=chunks[0].title if chunks else None,
            size=len(loaded.data),
            chunk_count=len(chunks),
            indexed_at=time.time(),
        )
        if not chunks:
            logger.warning("%s has no text to index (a scanned PDF?)", loaded.source)
        await self.store.put_document(record, chunks, vectors)
        return record

    async def _parse(self, loaded: Loaded) -> ParsedDocument:
        try:
            parsed = await loaded.parse(self.max_rows, self.parse_limits)
        except DocumentError:
            raise
        except UserError as exc:  # a parser library missing: this document fails, not all
            raise DocumentError(
                f"cannot index {loaded.source}: {exc}", source=loaded.source
            ) from exc
        if parsed.note:
            logger.warning("only part of %s is indexed: %s", loaded.source, parsed.note)
        return parsed

    async def _embed_chunks(
        self, source: str, chunks: list[Chunk]
    ) -> npt.NDArray[np.float32] | None:
        model, model_id = self.embedding_model, self.model_id
        if model is None or model_id is None:
            return None
        if not chunks:
            return np.empty((0, 0), dtype=np.float32)
        try:
            vectors = (await model([c.text for c in chunks])).array()
        except ModelError as exc:
            raise DocumentError(
                f"cannot index {source}: embedding its chunks failed: {exc}", source=source
            ) from exc
        await self.store.bind_embedding(model_id, int(vectors.shape[1]))
        return vectors

    # -- folders and removal ------------------------------------------------------------------

    async def sync(
        self,
        folder: Source,
        *,
        errors: Literal["raise", "report"] = "raise",
        progress: Progress | None = None,
    ) -> IngestReport:
        """Make the index hold exactly the supported files under `folder`, as they are now.

        New files are added, changed ones indexed again, unchanged ones left alone, and the
        documents of files gone from the folder dropped. Hidden files and folders (`.git`),
        symbolic links, and what is not a regular file (a FIFO, a socket) are skipped; files
        of unsupported formats are not indexed. Files are read beneath the folder, never
        through a link that appeared after the listing. `progress` is called after each file,
        as by `add`.

        Raises:
            DocumentError: `folder` is not a folder, or a file could not be indexed (with
                `errors="raise"`, after the others were).
        """
        root = normalize_source(folder)
        if not Path(root).is_dir():
            raise DocumentError(f"cannot sync {folder}: it is not a folder", source=root)
        present = await asyncio.to_thread(_supported_files, Path(root))
        held = await self.store.documents()
        inside = [d for d in held if d.source.startswith(root.rstrip(os.sep) + os.sep)]
        gone = [d for d in inside if d.source not in set(present)]
        report = await self._add_all(present, self.reader.beneath(root), progress)
        if gone:
            async with self._write_lock:
                await self.store.remove_documents([d.doc_id for d in gone])
            report.removed.extend(d.source for d in gone)
        if errors == "raise":
            report.raise_for_failures()
        return report

    def sync_sync(
        self, folder: Source, *, errors: Literal["raise", "report"] = "raise"
    ) -> IngestReport:
        """The sync twin of `sync`."""
        return run_sync(self.sync(folder, errors=errors))

    async def remove(self, sources: Source | Sequence[Source]) -> int:
        """Drop documents by their paths or URLs; how many the index held."""
        listed = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
        ids = [document_id(normalize_source(s)) for s in listed]
        async with self._write_lock:
            return await self.store.remove_documents(ids)

    def remove_sync(self, sources: Source | Sequence[Source]) -> int:
        """The sync twin of `remove`."""
        return run_sync(self.remove(sources))

    async def documents(self) -> list[DocumentRecord]:
        """The documents held, in source order."""
        return await self.store.documents()

    def documents_sync(self) -> list[DocumentRecord]:
        """The sync twin of `documents`."""
        return run_sync(self.documents())

    # -- searching ----------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        mode: SearchMode | None = None,
        top_k: int = 5,
        score_threshold: float | None = None,
        sources: Sequence[Source] | None = None,
        front_page_tokens: int | None = None,
        front_page_fallback: bool = False,
    ) -> list[SearchHit]:
        """The chunks that best answer `query`, best first.

        Args:
            query: The question or keywords.
            mode: `keyword`, `vector`, `hybrid` or `front_page`; default `hybrid` when the
                index has an embedding model, else `keyword`.
            top_k: The most hits returned (besides the front page's lead), and read: the
                front page reads at most this many chunks.
            score_threshold: Drop hits scoring below it (on the mode's scale: see
                `SearchHit.score`).
            sources: Search only these documents: paths or URLs, a folder standing for the
                documents under it.
            front_page_tokens: Qwen-Agent's `front_page_search` beside the mode's search, for
                a reference budget of this many tokens: when the search covers a single
                document, its first `front_page_chunks` chunks lead the hits (scored 1.0,
                mode `front_page`), stopping at one longer than a quarter of the budget, as
                Qwen-Agent keeps its front pages to half of its `max_ref_token`. With more
                documents it adds nothing, as in Qwen-Agent. None: no lead.
            front_page_fallback: Qwen-Agent's keyword search: a keyword or hybrid query that
                names nothing to search for (only stop words or signs: `What is it?`, `*`)
                gets the documents' first chunks (mode `front_page`, at most `top_k`) instead
                of no keyword hits.

        Raises:
            UserError: A vector or hybrid search on an index without an embedding model, or
                an unknown mode.
        """
        chosen = mode or ("hybrid" if self.embedding_model else "keyword")
        if front_page_fallback and chosen in ("keyword", "hybrid") and not keyword_query(query):
            chosen = "front_page"
        doc_ids = await self._doc_ids(sources)
        with tracing.retrieval(self.store, query, chosen, top_k) as span:
            hits = await self._search(query, chosen, top_k, doc_ids)
            if score_threshold is not None:
                hits = [hit for hit in hits if hit.score >= score_threshold]
            hits = hits[:top_k]
            if front_page_tokens is not None:
                hits = await self._lead_with_front_page(hits, doc_ids, front_page_tokens)
            span.hits(hits)
        return hits

    def search_sync(self, query: str, **options: Unpack[SearchOptions]) -> list[SearchHit]:
        """The sync twin of `search`."""
        return run_sync(self.search(query, **options))

    async def _doc_ids(self, sources: Sequence[Source] | None) -> list[str] | None:
        """The ids of the documents `sources` name; a folder names those under it."""
        if sources is None:
            return None
        names = list(dict.fromkeys(normalize_source(s) for s in sources))
        folders = [name for name in names if _is_folder(name)]
        ids = [document_id(name) for name in names if name not in folders]
        if folders:
            inside = tuple(folder.rstrip(os.sep) + os.sep for folder in folders)
            ids += [d.doc_id for d in await self.store.documents() if d.source.startswith(inside)]
        return ids

    async def _lead_with_front_page(
        self, hits: list[SearchHit], doc_ids: list[str] | None, budget: int
    ) -> list[SearchHit]:
        if doc_ids is None:
            if len({hit.chunk.doc_id for hit in hits}) > 1:
                return hits  # hits from two documents: the index holds more than one
            doc_ids = [d.doc_id for d in await self.store.documents()]
        if len(set(doc_ids)) != 1:
            return hits
        lead: list[SearchHit] = []
        for chunk in await self.store.front_chunks(self.front_page_chunks, doc_ids):
            if chunk.tokens * 4 > budget:
                break
            lead.append(SearchHit(chunk, 1.0, "front_page"))
        leading = {hit.chunk_id for hit in lead}
        return [*lead, *(hit for hit in hits if hit.chunk_id not in leading)]

    async def _search(
        self, query: str, mode: str, top_k: int, doc_ids: list[str] | None
    ) -> list[SearchHit]:
        if mode == "front_page":
            return await self._front_page(doc_ids, top_k)
        if mode == "keyword":
            return await self.store.keyword_search(query, top_k, doc_ids)
        if mode == "vector":
            return await self.store.vector_search(await self._embed_query(query), top_k, doc_ids)
        if mode == "hybrid":
            depth = max(top_k, _FUSION_DEPTH)

            async def similar() -> list[SearchHit]:
                vector = await self._embed_query(query)
                return await self.store.vector_search(vector, depth, doc_ids)

            # The keyword half runs while the query is embedded and searched.
            keyword, close = await asyncio.gather(
                self.store.keyword_search(query, depth, doc_ids), similar()
            )
            return reciprocal_rank_fusion([keyword, close])
        raise UserError(f"unknown search mode {mode!r}: use keyword, vector, hybrid or front_page")

    async def _front_page(self, doc_ids: list[str] | None, top_k: int) -> list[SearchHit]:
        chunks = await self.store.front_chunks(self.front_page_chunks, doc_ids, limit=top_k)
        return [SearchHit(chunk, 1.0, "front_page") for chunk in chunks]

    async def _embed_query(self, query: str) -> npt.NDArray[np.float32]:
        if self.embedding_model is None:
            raise UserError(
                "this index has no embedding model: search with mode='keyword', or open it "
                "with the embedding_model its vectors were made with"
            )
        vectors = (await self.embedding_model([query])).array()
        query_vector: npt.NDArray[np.float32] = vectors[0]
        return query_vector


async def _load(reader: Reader, source: str) -> Loaded:
    if is_url(source):
        return await reader.download(source)
    return await asyncio.to_thread(reader.read_file, source)


async def _open_store(location: Source) -> IndexStore:
    if is_postgres_url(location):
        return await PostgresIndexStore.open(str(location))
    return await SQLiteIndexStore.open(Path(location))


def _is_folder(source: str) -> bool:
    return not is_url(source) and Path(source).is_dir()


def _supported_files(root: Path) -> list[str]:
    """The regular files under `root` that the parser reads, as resolved paths.

    Not hidden ones, not links, not FIFOs or sockets (reading a FIFO waits for a writer).
    """
    found: list[str] = []
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(files):
            path = Path(folder, name)
            if name.startswith(".") or detect_format(name) is None or not _regular(path):
                continue
            found.append(str(path))
    return found


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:  # gone since the listing
        return False
