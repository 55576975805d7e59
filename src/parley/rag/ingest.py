"""Reading a document for the index: its bytes (capped), their hash, and its parsed text.

A source is a path, a `file://` URL or an `http(s)://` URL. Paths are resolved (links
followed) so that one file is one document however it is named; with `roots`, a path must lie
under one of them and is opened component by component without following links swapped in
after the check (`doc_parser`'s `Roots` and `open_beneath`). A folder being synced is such a
root for its files (`Reader.beneath`). Only regular files are read: a FIFO, a device or a
socket is refused without being opened for reading (a FIFO would block the read forever).
URLs are downloaded through the fetcher that refuses private addresses
(`tools/builtin/_net.py`). Parsing is `doc_parser`'s (`aparse_bytes`), on the very bytes that
were hashed, in a parser process under the index's `ParseLimits` (killed at the timeout or
when the indexing is cancelled; pages and characters capped).

Every failure is a `DocumentError` naming the source: a missing file, a folder, a FIFO or
device, a file or download over the byte cap, a private address, an unknown format, a
corrupt file, a parse stopped at its time or memory limit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from parley.errors import DocumentError, MissingDependencyError, ToolError
from parley.tools.builtin._net import FetchPolicy, fetch
from parley.tools.builtin._paths import Roots, open_beneath
from parley.tools.builtin.doc_parser import ParsedDocument, ParseLimits, aparse_bytes

__all__ = ["Loaded", "Reader", "is_url", "normalize_source"]

_TOOL = "rag"
# Without blocking: opening a FIFO for reading would wait for a writer. What was opened is
# refused as soon as `fstat` shows it is not a regular file.
_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(source: str) -> bool:
    """Whether `source` is an `http(s)` URL (a `file://` URL is a path)."""
    return bool(_URL.match(source)) and not source.lower().startswith("file:")


def normalize_source(source: str | os.PathLike[str]) -> str:
    """The source as the index names it: a URL as given, a path absolute with links followed.

    Raises:
        DocumentError: A URL of another scheme than http, https or file.
    """
    text = os.fspath(source)
    if is_url(text):
        scheme = urlsplit(text).scheme.lower()
        if scheme not in ("http", "https"):
            raise DocumentError(
                f"cannot index {text}: give a path, a file:// URL or an http(s) URL", source=text
            )
        return text
    if text.lower().startswith("file:"):
        text = unquote(urlsplit(text).path)
    return str(Path(text).expanduser().resolve())


@dataclass(frozen=True)
class Loaded:
    """A document's bytes and where they came from.

    Attributes:
        source: The normalised source.
        name: Its file name (its extension tells the format).
        data: Its bytes.
        media_type: The download's `Content-Type`, if any.
    """

    source: str
    name: str
    data: bytes
    media_type: str | None = None

    @property
    def content_hash(self) -> str:
        """SHA-256 of the bytes, hex."""
        return hashlib.sha256(self.data).hexdigest()

    async def parse(self, max_rows: int, limits: ParseLimits | None = None) -> ParsedDocument:
        """The parsed document (`doc_parser`, in a parser process under `limits`).

        Raises:
            DocumentError: The format is unknown, the file cannot be read as its format, or
                its parse was stopped at a limit.
            MissingDependencyError: The format's library is not installed.
        """
        try:
            return await aparse_bytes(
                self.source,
                self.name,
                self.data,
                media_type=self.media_type,
                max_rows=max_rows,
                limits=limits,
            )
        except MissingDependencyError:
            raise
        except ToolError as exc:
            raise DocumentError(f"cannot index {self.source}: {exc}", source=self.source) from exc


class Reader:
    """Reads sources for the index under one set of limits.

    Args:
        max_bytes: The largest file or download read.
        fetch_policy: What downloads may reach (default: public addresses only); a download
            is capped at `max_bytes` whatever the policy's own cap.
        roots: Folders paths must lie in (None: any path the program gives).
    """

    def __init__(
        self,
        max_bytes: int,
        fetch_policy: FetchPolicy | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        policy = fetch_policy or FetchPolicy(max_bytes=max_bytes)
        self.max_bytes = max_bytes
        self.fetch_policy = dataclasses.replace(policy, max_bytes=min(policy.max_bytes, max_bytes))
        self.roots = Roots(roots, tool_name=_TOOL) if roots else None

    def beneath(self, folder: str | os.PathLike[str]) -> Reader:
        """A reader for the files of a folder being synced.

        Confined to the folder unless already confined (then its roots decide), so that a
        file swapped for a link to elsewhere between the listing and the read is refused
        rather than followed.
        """
        if self.roots is not None:
            return self
        return Reader(self.max_bytes, self.fetch_policy, [folder])

    def read_file(self, source: str) -> Loaded:
        """A local file's bytes (blocking: run it in a worker thread).

        Raises:
            DocumentError: Missing, not a regular file, unreadable, outside the roots, or
                larger than `max_bytes`.
        """
        try:
            if self.roots is not None:
                return self._read_beneath(source)
            return self._read(source)
        except DocumentError:
            raise
        except FileNotFoundError:
            raise DocumentError(f"cannot index {source}: no such file", source=source) from None
        except (OSError, ToolError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise DocumentError(f"cannot index {source}: {reason}", source=source) from exc

    def _read(self, source: str) -> Loaded:
        path = Path(source)
        if path.is_dir():
            raise DocumentError(
                f"cannot index {source}: it is a folder (sync() indexes a folder)", source=source
            )
        descriptor = os.open(path, _OPEN)
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            raise DocumentError(
                f"cannot index {source}: it is a device, FIFO or socket, not a regular file",
                source=source,
            )
        os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb") as stream:
            return self._take(source, path.name, stream)

    def _read_beneath(self, source: str) -> Loaded:
        assert self.roots is not None
        located = self.roots.locate(source)
        descriptor = open_beneath(located, shown=source, tool_name=_TOOL)
        with os.fdopen(descriptor, "rb") as stream:
            return self._take(source, located.parts[-1], stream)

    def _take(self, source: str, name: str, stream: BinaryIO) -> Loaded:
        size = os.fstat(stream.fileno()).st_size
        if size > self.max_bytes:
            raise DocumentError(
                f"cannot index {source}: it has {size} bytes, more than the "
                f"{self.max_bytes} this index reads (max_file_bytes)",
                source=source,
            )
        data = stream.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:  # it grew while being read
            raise DocumentError(
                f"cannot index {source}: it is larger than {self.max_bytes} bytes", source=source
            )
        return Loaded(source, name, data)

    async def download(self, source: str) -> Loaded:
        """A URL's body, fetched under the policy.

        Raises:
            DocumentError: The address is not allowed, the body is too large, or the fetch
                failed.
        """
        try:
            fetched = await fetch(source, self.fetch_policy, tool_name=_TOOL)
        except ToolError as exc:
            raise DocumentError(f"cannot index {source}: {exc}", source=source) from exc
        name = PurePosixPath(unquote(urlsplit(fetched.url).path)).name or "download"
        return Loaded(source, name, fetched.content, fetched.media_type)
