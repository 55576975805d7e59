"""Embedding caches: vectors computed once, reused by later calls.

`EmbeddingCache` is the interface (seed 003's `EmbeddingCacheBase`): four async methods on a
request's identifier (a JSON-able dict: provider, model, parameters and inputs, see
`EmbeddingModel.cache_identifier`). A cache that sets `per_item` is asked input by input
(`retrieve_items`, `store_items`), so a batch whose inputs are partly cached sends only the
others.

Two are built in:

- `FileEmbeddingCache(cache_dir, max_file_number=None, max_cache_size=None)`: seed 003's,
  one `.npy` file per request, the oldest evicted first past either limit;
- `SQLiteEmbeddingCache(path)`: one SQLite file, one row per input (`per_item`), shared
  safely by threads and processes.
"""

from __future__ import annotations

import array
import asyncio
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from parley._sqlite import use_wal
from parley.embeddings.vectors import Embedding
from parley.errors import ConfigurationError, MissingDependencyError, UserError

__all__ = ["EmbeddingCache", "FileEmbeddingCache", "SQLiteEmbeddingCache"]

T = TypeVar("T")


class EmbeddingCache(ABC):
    """Where an embedding model keeps vectors it computed."""

    per_item: ClassVar[bool] = False
    """Whether the model asks this cache input by input rather than request by request."""

    @staticmethod
    def key(identifier: Mapping[str, Any]) -> str:
        """The SHA-256 (hex) of an identifier's canonical JSON: its name in the cache."""
        text = json.dumps(identifier, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @abstractmethod
    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        """Keep `embeddings` under `identifier` (an existing entry stays unless `overwrite`)."""

    @abstractmethod
    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        """The vectors kept under `identifier`, or None."""

    @abstractmethod
    async def remove(self, identifier: Mapping[str, Any]) -> None:
        """Forget the entry under `identifier`, if any."""

    @abstractmethod
    async def clear(self) -> None:
        """Forget every entry."""

    async def retrieve_items(
        self, identifiers: Sequence[Mapping[str, Any]]
    ) -> list[Embedding | None]:
        """One vector or None per single-input identifier (a per-item cache does it at once)."""
        found: list[Embedding | None] = []
        for identifier in identifiers:
            vectors = await self.retrieve(identifier)
            found.append(vectors[0] if vectors else None)
        return found

    async def store_items(
        self, embeddings: Sequence[Embedding], identifiers: Sequence[Mapping[str, Any]]
    ) -> None:
        """Keep one vector per single-input identifier."""
        for vector, identifier in zip(embeddings, identifiers, strict=True):
            await self.store([vector], identifier, overwrite=True)


def _megabytes(size: int) -> float:
    return size / 2**20


class FileEmbeddingCache(EmbeddingCache):
    """One `.npy` file per request in a folder, named by the SHA-256 of its identifier.

    Seed 003's cache. Vectors are kept as float32 (what the models compute; half float64's
    size). Past either limit the oldest files (by the time they were written) go first; a
    request whose file alone is over `max_cache_size` is not kept (it would empty the cache and
    still not fit). A file is written beside its final name and renamed into place, so a
    crash leaves either the old entry or the new one, never a torn file; a file that cannot be
    read all the same (cut short by a full disk, edited by hand) is a miss and is removed.
    Several processes may share the folder.

    Args:
        cache_dir: The folder (created when missing; a file there is refused).
        max_file_number: The most files kept; None: no limit.
        max_cache_size: The most megabytes (MiB) the files take together; None: no limit.
    """

    def __init__(
        self,
        cache_dir: str | Path,
        max_file_number: int | None = None,
        max_cache_size: float | None = None,
    ) -> None:
        if max_file_number is not None and max_file_number < 0:
            raise UserError(f"max_file_number must be 0 or more, got {max_file_number}")
        if max_cache_size is not None and max_cache_size < 0:
            raise UserError(f"max_cache_size must be 0 or more (MiB), got {max_cache_size}")
        self.cache_dir = Path(cache_dir)
        if self.cache_dir.exists() and not self.cache_dir.is_dir():
            raise UserError(f"cache_dir {self.cache_dir} is a file, not a folder")
        self.max_file_number = max_file_number
        self.max_cache_size = max_cache_size

    def path(self, identifier: Mapping[str, Any]) -> Path:
        """The file that holds (or would hold) the entry under `identifier`."""
        return self.cache_dir / f"{self.key(identifier)}.npy"

    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        """Write the entry (unless one exists and not `overwrite`), then apply the limits."""
        await asyncio.to_thread(self._store, embeddings, self.path(identifier), overwrite)

    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        """The vectors under `identifier`, or None (an unreadable file is removed)."""
        return await asyncio.to_thread(self._read, self.path(identifier))

    async def remove(self, identifier: Mapping[str, Any]) -> None:
        """Delete the entry's file, if any."""
        await asyncio.to_thread(self.path(identifier).unlink, missing_ok=True)

    async def clear(self) -> None:
        """Delete every entry (and any file a crashed write left behind)."""
        await asyncio.to_thread(self._clear)

    # -- the blocking parts, run in worker threads ------------------------------------------

    def _store(self, embeddings: Sequence[Embedding], target: Path, overwrite: bool) -> None:
        np = _numpy()
        if target.exists() and not overwrite:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        array = np.asarray(embeddings, dtype=np.float32)
        handle, temporary = tempfile.mkstemp(dir=self.cache_dir, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                np.save(file, array, allow_pickle=False)
                file.flush()
                os.fsync(file.fileno())
            if (
                self.max_cache_size is not None
                and _megabytes(os.path.getsize(temporary)) > self.max_cache_size
            ):
                return  # alone over the limit: keeping it would evict everything else
            # The time of writing orders eviction; the file system's own is too coarse
            # (a few milliseconds) to order writes that follow each other closely.
            now = time.time_ns()
            os.utime(temporary, ns=(now, now))
            os.replace(temporary, target)
        except FileNotFoundError:
            return  # `clear()` in another process removed the file being written: not kept
        finally:
            Path(temporary).unlink(missing_ok=True)
        self._evict()

    def _read(self, path: Path) -> list[Embedding] | None:
        np = _numpy()
        try:
            array = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError):
            path.unlink(missing_ok=True)  # unreadable: a miss, and gone so it is rewritten
            return None
        if array.ndim != 2 or array.dtype.kind != "f":
            path.unlink(missing_ok=True)
            return None
        vectors: list[Embedding] = array.tolist()
        return vectors

    def _entries(self) -> list[tuple[int, str, int]]:
        """(written, name, bytes) of every entry, oldest first."""
        entries = []
        try:
            scan = list(os.scandir(self.cache_dir))
        except FileNotFoundError:
            return []
        for entry in scan:
            if not entry.name.endswith(".npy"):
                continue
            try:
                info = entry.stat()
            except FileNotFoundError:  # removed by another process meanwhile
                continue
            entries.append((info.st_mtime_ns, entry.name, info.st_size))
        return sorted(entries)

    def _evict(self) -> None:
        if self.max_file_number is None and self.max_cache_size is None:
            return
        entries = self._entries()
        count, size = len(entries), sum(e[2] for e in entries)
        for _, name, file_size in entries:
            over_count = self.max_file_number is not None and count > self.max_file_number
            over_size = self.max_cache_size is not None and _megabytes(size) > self.max_cache_size
            if not (over_count or over_size):
                break
            (self.cache_dir / name).unlink(missing_ok=True)
            count, size = count - 1, size - file_size

    def _clear(self) -> None:
        if not self.cache_dir.is_dir():
            return
        for path in self.cache_dir.iterdir():
            if path.suffix == ".npy" or (path.name.startswith(".") and path.suffix == ".tmp"):
                path.unlink(missing_ok=True)


def _numpy() -> Any:
    try:
        import numpy  # noqa: PLC0415  (comes with the embeddings extra)
    except ImportError:
        raise MissingDependencyError("numpy", "embeddings") from None
    return numpy


_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    dimensions INTEGER NOT NULL,
    vectors BLOB NOT NULL
) WITHOUT ROWID
"""
_CHUNK = 500
"""Keys per `IN (...)` query: under SQLite's oldest limit on bound parameters (999)."""


class SQLiteEmbeddingCache(EmbeddingCache):
    """Vectors in one SQLite file, one row per input: a partly cached batch sends the rest.

    A row's key is the SHA-256 of one input's identifier (provider, model, parameters and
    the input), so the model asks for every input of a call at once and embeds only the
    misses. Vectors are float32 blobs (little-endian). The file is in WAL mode with a busy
    timeout: any number of threads and processes may read and write it at once. A whole
    request (`store` / `retrieve` with several inputs) is one row too.

    Args:
        path: The database file (created, with its folder, when missing).
        timeout: Seconds a write waits for another process's write to finish.
    """

    per_item: ClassVar[bool] = True

    def __init__(self, path: str | Path, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._ready = False
        self._ready_lock = threading.Lock()

    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        """Keep the vectors under `identifier` (an existing row stays unless `overwrite`)."""
        row = (self.key(identifier), *_pack(embeddings))
        await self._in_thread(self._write, [row], overwrite)

    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        """The vectors under `identifier`, or None."""
        (found,) = await self._in_thread(self._read, [self.key(identifier)])
        return found

    async def remove(self, identifier: Mapping[str, Any]) -> None:
        """Delete the row under `identifier`, if any."""
        key = self.key(identifier)
        await self._in_thread(self._execute, "DELETE FROM embeddings WHERE key = ?", (key,))

    async def clear(self) -> None:
        """Delete every row."""
        await self._in_thread(self._execute, "DELETE FROM embeddings", ())

    async def retrieve_items(
        self, identifiers: Sequence[Mapping[str, Any]]
    ) -> list[Embedding | None]:
        """One vector or None per single-input identifier, in one read."""
        keys = [self.key(identifier) for identifier in identifiers]
        rows = await self._in_thread(self._read, keys)
        return [found[0] if found else None for found in rows]

    async def store_items(
        self, embeddings: Sequence[Embedding], identifiers: Sequence[Mapping[str, Any]]
    ) -> None:
        """Keep one vector per single-input identifier, in one transaction."""
        rows = [
            (self.key(identifier), *_pack([vector]))
            for vector, identifier in zip(embeddings, identifiers, strict=True)
        ]
        await self._in_thread(self._write, rows, True)

    # -- the blocking parts, run in worker threads ------------------------------------------

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """Run a blocking part in a worker thread; a file that is no database is named.

        Such a file is not removed: the path may name another program's data by mistake.
        """
        try:
            return await asyncio.to_thread(function, *args)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # locked, busy, disk I/O: as they are
                raise
            raise ConfigurationError(
                f"{self.path} is not a usable embedding cache ({exc}): delete it, or give "
                "SQLiteEmbeddingCache another path"
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            with self._ready_lock:
                if not self._ready:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    connection = self._open()
                    self._set_up(connection)
                    self._ready = True
                    return connection
        return self._open()

    def _set_up(self, connection: sqlite3.Connection) -> None:
        try:
            # NORMAL sync (set in _open) is safe with WAL: a crash tears no page.
            use_wal(connection, self.timeout)
            connection.execute(_SCHEMA)
        except BaseException:
            connection.close()
            raise

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    def _write(self, rows: list[tuple[str, int, int, bytes]], overwrite: bool) -> None:
        verb = "INSERT OR REPLACE" if overwrite else "INSERT OR IGNORE"
        connection = self._connect()
        try:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(f"{verb} INTO embeddings VALUES (?, ?, ?, ?)", rows)
        finally:
            connection.close()

    def _read(self, keys: list[str]) -> list[list[Embedding] | None]:
        found: dict[str, list[Embedding]] = {}
        broken: list[str] = []
        connection = self._connect()
        try:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                query = (
                    f"SELECT key, count, dimensions, vectors FROM embeddings WHERE key IN ({marks})"
                )
                for key, count, dimensions, blob in connection.execute(query, chunk):
                    vectors = _unpack(count, dimensions, blob)
                    if vectors is None:
                        broken.append(key)
                    else:
                        found[key] = vectors
        finally:
            connection.close()
        if broken:  # a row that does not decode is a miss, and goes
            for key in broken:
                self._execute("DELETE FROM embeddings WHERE key = ?", (key,))
        return [found.get(key) for key in keys]

    def _execute(self, statement: str, parameters: tuple[Any, ...]) -> None:
        connection = self._connect()
        try:
            with connection:
                connection.execute(statement, parameters)
        finally:
            connection.close()


def _pack(embeddings: Sequence[Embedding]) -> tuple[int, int, bytes]:
    """(count, dimensions, little-endian float32 bytes) of equally long vectors."""
    dimensions = len(embeddings[0]) if embeddings else 0
    if any(len(vector) != dimensions for vector in embeddings):
        raise UserError("vectors to cache must all have the same length")
    values = array.array("f", (x for vector in embeddings for x in vector))
    if sys.byteorder == "big":
        values.byteswap()
    return len(embeddings), dimensions, values.tobytes()


def _unpack(count: int, dimensions: int, blob: bytes) -> list[Embedding] | None:
    values = array.array("f")
    if len(blob) != count * dimensions * values.itemsize:
        return None
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    flat = values.tolist()
    return [flat[i * dimensions : (i + 1) * dimensions] for i in range(count)]
