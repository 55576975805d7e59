"""`doc_parser`: a document (PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown, text) into text.

The text keeps the document's structure: pages, slides and sheets are marked, tables are
written as `| a | b |` rows, Word headings as `#`.

The tool reads files only under its roots: by default the conversation's directory of the
workspace (`Workspace.for_context(ctx)`, where the code interpreter of the same thread writes
its files), so the model names files relative to it; `roots` or `root` in the configuration
name fixed folders instead. A path, a `file://` URL or a symbolic link that leads anywhere
else (`../../.env`, `/etc/hostname`, `/proc/self/environ`) is refused with an error naming the
allowed folder ("this conversation's files", or the configured folders by their names: never
where they are on the server), and files are opened without following links swapped in
after the check (`_paths`). `http(s)://` URLs are downloaded only when `allow_http` is set,
and then through `_net.fetch`: no loopback, private or link-local address unless
`allowed_hosts` (or `allow_private`) says so, every redirect checked, at most
`max_download_bytes` read.

Documents are not parsed in the caller's process: each goes to a parser process with
limits (`_doc_pool`, `ParseLimits`): its time (killed past `timeout`, or as soon as the call
is cancelled), its memory, its pages and the characters read. Only text and Markdown files
of at most 256 KiB are split at blank lines in the caller's process (nothing in them can
inflate; a parser's round trip would cost more). A document cut by a limit says
so in its text ("Only pages 1-1000 of 5000 were read").

`parse_document` is for programs rather than models: it reads any path its caller gives
unless given `roots`; `parse_bytes` parses a document its caller already read (retrieval
hashes the bytes it indexes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, TypedDict, Unpack
from urllib.parse import unquote, urlsplit

from parley._sync import run_sync
from parley.errors import ConfigurationError, ToolExecutionError
from parley.tools.base import Tool
from parley.tools.builtin._common import run_context, workspace_from
from parley.tools.builtin._doc_formats import (
    MAX_UNPACKED_BYTES,
    Extracted,
    ReadLimits,
    Section,
)
from parley.tools.builtin._doc_pool import ParseLimitError, ParseRequest, ParserPool, parser_pool
from parley.tools.builtin._doc_process import FilePayload
from parley.tools.builtin._net import FetchNotAllowedError, FetchPolicy, fetch
from parley.tools.builtin._paths import Roots, open_beneath
from parley.tools.context import RunContext
from parley.tools.registry import register_tool

__all__ = [
    "BytesOptions",
    "DocParser",
    "ParseLimitError",
    "ParseLimits",
    "ParseOptions",
    "ParsedDocument",
    "aparse_bytes",
    "aparse_document",
    "detect_format",
    "parse_bytes",
    "parse_document",
]

_TOOL = "doc_parser"
_MAX_BYTES = 50 * 1024 * 1024
_MAX_ROWS = 1000  # rows kept per table, by default
_MIB = 1024 * 1024
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EXTENSIONS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".csv": "csv",
    ".tsv": "csv",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
}
_MEDIA_TYPES = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/csv": "csv",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "markdown",
    "text/plain": "text",
}
_NAMES = {
    "pdf": "PDF",
    "docx": "Word",
    "pptx": "PowerPoint",
    "xlsx": "Excel",
    "csv": "CSV",
    "html": "HTML",
    "markdown": "Markdown",
}


@dataclass(frozen=True)
class ParseLimits:
    """What parsing one document may cost; past a limit, parsing stops.

    Every document is parsed in a parser process (`_doc_pool`: a small pool, reused), not
    in the caller's, so that a document built to inflate cannot pin the process that reads
    it; only text and Markdown files of at most 256 KiB, which nothing can inflate, are split
    in the caller's process.

    Attributes:
        timeout: Seconds a document's parse may take; its parser process is killed past them
            (`ParseLimitError`). A cancelled call kills it at once.
        memory_bytes: The address space of a parser process (`RLIMIT_AS`); a document that
            needs more fails (`ParseLimitError`).
        max_pages: Pages, slides or sheets read; the rest are left out and the text says so
            ("Only pages 1-1000 of 5000 were read").
        max_text_chars: Characters of text read; the rest is left out and the text says so.
    """

    timeout: float = 120.0
    memory_bytes: int = 1024 * _MIB
    max_pages: int = 1000
    max_text_chars: int = 5_000_000

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.max_pages < 1 or self.max_text_chars < 1:
            raise ConfigurationError("parse limits: timeout, max_pages and max_text_chars > 0")
        if self.memory_bytes < 64 * _MIB:
            raise ConfigurationError("parse limits: memory_bytes below 64 MiB cannot run Python")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], **defaults: Any) -> ParseLimits:
        """The limits a tool's configuration sets, else `defaults`, else the class's.

        The keys: `parse_timeout`, `parse_memory_bytes`, `max_pages`, `max_text_chars`.
        """
        keys = {
            "timeout": "parse_timeout",
            "memory_bytes": "parse_memory_bytes",
            "max_pages": "max_pages",
            "max_text_chars": "max_text_chars",
        }
        given = {name: cfg[key] for name, key in keys.items() if cfg.get(key) is not None}
        values = {**defaults, **given}
        return cls(
            timeout=float(values.get("timeout", cls.timeout)),
            memory_bytes=int(values.get("memory_bytes", cls.memory_bytes)),
            max_pages=int(values.get("max_pages", cls.max_pages)),
            max_text_chars=int(values.get("max_text_chars", cls.max_text_chars)),
        )

    def request(self, name: str, kind: str | None, max_rows: int) -> ParseRequest:
        """A parser's request for one document under these limits."""
        limits = ReadLimits(
            max_rows=max_rows,
            max_pages=self.max_pages,
            max_chars=self.max_text_chars,
            unpacked=dict(MAX_UNPACKED_BYTES),
        )
        return ParseRequest(name, kind, limits, self.timeout)


@dataclass
class ParsedDocument:
    """A parsed document.

    Attributes:
        source: The path or URL it came from.
        name: Its file name.
        format: One of `pdf`, `docx`, `pptx`, `xlsx`, `csv`, `html`, `markdown`, `text`.
        sections: Its pages, slides or sheets (one `document` section if it has none).
        note: What a limit left out (`ParseLimits`), as a sentence; None if it was read whole.
    """

    source: str
    name: str
    format: str
    sections: list[Section]
    note: str | None = None

    def _header(self) -> str:
        kinds = {s.kind for s in self.sections}
        count = len(self.sections)
        kind = kinds.pop() if len(kinds) == 1 else "section"
        shape = "" if kind == "document" else f", {count} {kind}{'s' if count != 1 else ''}"
        return f"Document: {self.name} ({_NAMES.get(self.format, self.format)}{shape})"

    def to_text(self, max_chars: int | None = None) -> str:
        """The whole text, sections marked, cut at `max_chars` with a note saying so.

        What a parse limit left out is said in brackets under the first line.
        """
        parts = [self._header()]
        if self.note:
            parts.append(f"[{self.note}]")
        for section in self.sections:
            if section.kind != "document":
                title = f": {section.title}" if section.title else ""
                parts.append(f"--- {section.kind} {section.number}{title} ---")
            elif section.title:
                parts.append(f"Title: {section.title}")
            parts.extend(item.text for item in section.items)
        text = "\n\n".join(parts)
        if max_chars is not None and len(text) > max_chars:
            cut = len(text) - max_chars
            text = f"{text[:max_chars]}\n\n[... {cut} more characters not shown]"
        return text

    def to_qwen(self) -> list[dict[str, Any]]:
        """Qwen-Agent's structured form: pages of `{"text": ...}` and `{"table": ...}` items."""
        pages = []
        for section in self.sections:
            page: dict[str, Any] = {
                "page_num": section.number,
                "content": [{item.kind: item.text} for item in section.items],
            }
            if section.title:
                page["title"] = section.title
            pages.append(page)
        return pages


def detect_format(name: str, media_type: str | None = None) -> str | None:
    """The format of a file from its name's extension, else its media type."""
    found = _EXTENSIONS.get(Path(name).suffix.lower())
    if found is None and media_type:
        found = _MEDIA_TYPES.get(media_type.split(";")[0].strip().lower())
    return found


def _document(source: str, name: str, extracted: Extracted) -> ParsedDocument:
    return ParsedDocument(source, name, extracted.kind, extracted.sections, extracted.note)


def _request(
    name: str, media_type: str | None, max_rows: int, limits: ParseLimits | None
) -> ParseRequest:
    return (limits or ParseLimits()).request(name, detect_format(name, media_type), max_rows)


def _pool(limits: ParseLimits | None) -> ParserPool:
    return parser_pool((limits or ParseLimits()).memory_bytes)


class BytesOptions(TypedDict, total=False):
    """`parse_bytes`'s keyword arguments, which `aparse_bytes` takes too."""

    media_type: str | None
    max_rows: int
    limits: ParseLimits | None


def parse_bytes(
    source: str,
    name: str,
    data: bytes,
    *,
    media_type: str | None = None,
    max_rows: int = _MAX_ROWS,
    limits: ParseLimits | None = None,
) -> ParsedDocument:
    """Parse a document already in memory; its format from `name`, else `media_type`.

    It is parsed in a parser process under `limits` (default `ParseLimits()`).

    Raises:
        ToolExecutionError: The format is unknown or the document cannot be read as its format.
        ParseLimitError: Parsing took longer than the limits' timeout, needed more memory
            than they allow, or its process died.
        MissingDependencyError: The format's library (the `tools` extra) is not installed.
    """
    request = _request(name, media_type, max_rows, limits)
    return _document(source, name, _pool(limits).parse(request, data))


async def aparse_bytes(
    source: str, name: str, data: bytes, **options: Unpack[BytesOptions]
) -> ParsedDocument:
    """The async twin of `parse_bytes` (same arguments and errors).

    Cancelling it kills the parser process at once.
    """
    media_type, limits = options.get("media_type"), options.get("limits")
    request = _request(name, media_type, options.get("max_rows", _MAX_ROWS), limits)
    return _document(source, name, await _pool(limits).aparse(request, data))


def _open_local(source: str, roots: Roots, max_bytes: int) -> tuple[str, FilePayload]:
    """The file under `roots`, opened by `open_beneath` (never by its path), and its name.

    The caller closes `payload.fd`.
    """
    located = roots.locate(source)
    descriptor = open_beneath(located, shown=source, tool_name=_TOOL)
    size = os.fstat(descriptor).st_size
    if size > max_bytes:
        os.close(descriptor)
        raise ToolExecutionError(f"{source} is larger than {max_bytes} bytes", tool_name=_TOOL)
    # The real file's name: a link's target has the telling extension.
    return located.parts[-1], FilePayload(descriptor, size)


def _parse_local(
    source: str, roots: Roots, max_bytes: int, max_rows: int, limits: ParseLimits | None
) -> ParsedDocument:
    name, payload = _open_local(source, roots, max_bytes)
    try:
        request = _request(name, None, max_rows, limits)
        return _document(source, name, _pool(limits).parse(request, payload))
    finally:
        os.close(payload.fd)


async def _aparse_local(
    source: str, roots: Roots, max_bytes: int, max_rows: int, limits: ParseLimits | None
) -> ParsedDocument:
    # Opened here, not in a thread: a few system calls, and a cancelled thread would leak it.
    name, payload = _open_local(source, roots, max_bytes)
    try:
        request = _request(name, None, max_rows, limits)
        return _document(source, name, await _pool(limits).aparse(request, payload))
    finally:
        os.close(payload.fd)


def _is_download(source: str) -> bool:
    """Whether `source` is a URL to fetch (`file:` ones are local); refuses other schemes."""
    if source.lower().startswith("file:") or not _URL.match(source):
        return False
    scheme = urlsplit(source).scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchNotAllowedError(
            f"cannot read {source}: give a file, a file:// URL or an http(s) URL",
            tool_name=_TOOL,
        )
    return True


def _refuse_download(source: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"downloading URLs is not allowed here ({source}); give a local file, or enable "
        "it with DocParser({'allow_http': True})",
        tool_name=_TOOL,
    )


async def _download(
    source: str, policy: FetchPolicy, max_rows: int, limits: ParseLimits | None
) -> ParsedDocument:
    fetched = await fetch(source, policy, tool_name=_TOOL)
    name = PurePosixPath(unquote(urlsplit(fetched.url).path)).name or "download"
    return await aparse_bytes(
        source,
        name,
        fetched.content,
        media_type=fetched.media_type,
        max_rows=max_rows,
        limits=limits,
    )


def _roots(roots: Roots | Sequence[str | os.PathLike[str]] | None) -> Roots:
    if isinstance(roots, Roots):
        return roots
    # None: anywhere, relative paths from the current folder (the caller's own path).
    return Roots(roots if roots is not None else [Path.cwd(), Path("/")], tool_name=_TOOL)


class ParseOptions(TypedDict, total=False):
    """The keyword arguments of `aparse_document` and `parse_document` (the first tells each)."""

    roots: Roots | Sequence[str | os.PathLike[str]] | None
    allow_http: bool
    fetch_policy: FetchPolicy | None
    timeout: float
    max_download_bytes: int
    max_file_bytes: int
    max_rows: int
    limits: ParseLimits | None


async def aparse_document(
    source: str,
    *,
    roots: Roots | Sequence[str | os.PathLike[str]] | None = None,
    allow_http: bool = False,
    fetch_policy: FetchPolicy | None = None,
    timeout: float = 30.0,
    max_download_bytes: int = _MAX_BYTES,
    max_file_bytes: int = _MAX_BYTES,
    max_rows: int = _MAX_ROWS,
    limits: ParseLimits | None = None,
) -> ParsedDocument:
    """Parse a path, a `file://` URL, or (if `allow_http`) an `http(s)://` URL.

    The document is parsed in a parser process under `limits`; cancelling the call kills it.

    Args:
        source: The path (relative ones start at the first root), or the URL.
        roots: The folders `source` must lie in (links followed); None: any path, relative
            ones from the current folder.
        allow_http: Download `http(s)` URLs.
        fetch_policy: What a download may reach and read (default: public addresses only,
            `timeout` and `max_download_bytes`).
        timeout: Seconds a download may take (without `fetch_policy`).
        max_download_bytes: The largest download read (without `fetch_policy`).
        max_file_bytes: The largest local file read.
        max_rows: The most rows kept per table.
        limits: What parsing may cost and how much is read (default `ParseLimits()`).

    Raises:
        PathNotAllowedError: The file lies outside `roots`.
        FetchNotAllowedError: The URL (or a redirect) reaches an address not allowed.
        ToolExecutionError: The file is missing, unreadable, too large or of an unknown format,
            the download failed, or downloading is not allowed.
        ParseLimitError: Parsing took longer than the limits' timeout, needed more memory
            than they allow, or its process died.
        MissingDependencyError: The format's library (the `tools` extra) is not installed.
    """
    if not _is_download(source):
        return await _aparse_local(source, _roots(roots), max_file_bytes, max_rows, limits)
    if not allow_http:
        raise _refuse_download(source)
    policy = fetch_policy or FetchPolicy(max_bytes=max_download_bytes, timeout=timeout)
    return await _download(source, policy, max_rows, limits)


def parse_document(source: str, **options: Unpack[ParseOptions]) -> ParsedDocument:
    """The sync twin of `aparse_document` (same arguments and errors)."""
    if _is_download(source):
        return run_sync(aparse_document(source, **options))
    roots, max_bytes = _roots(options.get("roots")), options.get("max_file_bytes", _MAX_BYTES)
    max_rows, limits = options.get("max_rows", _MAX_ROWS), options.get("limits")
    return _parse_local(source, roots, max_bytes, max_rows, limits)


def _configured(folders: Sequence[str | os.PathLike[str]]) -> str:
    """Configured roots as errors name them: by their folders' names, not where they are."""
    names = [Path(f).name or os.fspath(f) for f in folders]
    return f"files in its folder{'s' if len(names) > 1 else ''} {' or '.join(names)}"


@register_tool("doc_parser")
class DocParser(Tool):
    """Reads a document into text with its pages, slides or sheets marked.

    Files are read only under the tool's roots and downloads reach only public addresses
    unless allowed (see the module docstring). Each document is parsed in a parser process
    with limits (`ParseLimits`), killed when the call times out or is cancelled.

    Args:
        cfg: `roots` (folders the model's paths must lie in; relative paths start at the
            first) or `root` (one folder); without them, the conversation's folder of the
            workspace at `work_dir` (default: the process's workspace). `allow_http`
            (download http(s) URLs; default False), `allowed_hosts` (host names, addresses
            or networks a download may reach although not public), `allow_private` (any
            address), `max_download_bytes` (default 50 MiB), `download_timeout` (seconds for
            a whole download, default 30), `max_redirects` (default 5), `max_file_bytes`
            (default 50 MiB), `structured_doc` (return Qwen-Agent's list of pages instead of
            text), `max_chars` (characters returned, default 100,000), `max_rows` per table
            (default 1,000). The parse's limits: `parse_timeout` (seconds, default 120),
            `parse_memory_bytes` (default 1 GiB), `max_pages` (default 1,000) and
            `max_text_chars` (characters read; default `max_chars`, or 5,000,000 with
            `structured_doc`).
    """

    description = (
        "Reads a document and returns its text, with pages, slides and sheets marked and "
        "tables as rows. Supports PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown and plain text. "
        "It reads files in this conversation's folder (where the code interpreter's files "
        "are too): give a path relative to it, such as report.pdf."
    )
    idempotent: ClassVar[bool] = True  # it only reads (and downloads): safe to run again
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": (
                    "The document: a path in the conversation's folder (or a file:// URL), "
                    "or an http(s) URL if downloads are allowed."
                ),
            }
        },
        "required": ["url"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        fixed = self.cfg.get("roots") or ([self.cfg["root"]] if self.cfg.get("root") else None)
        self._fixed_roots = (
            Roots(fixed, tool_name=self.name, shown=_configured(fixed)) if fixed else None
        )
        self.fetch_policy = FetchPolicy.from_config(
            self.cfg,
            max_bytes=int(self.cfg.get("max_download_bytes", _MAX_BYTES)),
            timeout=float(self.cfg.get("download_timeout", 30.0)),
            max_redirects=int(self.cfg.get("max_redirects", 5)),
        )
        # Text past what is returned (`max_chars`) is not worth reading.
        shown = {} if self.cfg.get("structured_doc") else {"max_text_chars": self.max_chars}
        self.limits = ParseLimits.from_config(self.cfg, **shown)

    @property
    def max_chars(self) -> int:
        """The most characters a call returns."""
        return int(self.cfg.get("max_chars", 100_000))

    @property
    def file_access(self) -> bool:
        """It reads the files of the conversation (Qwen-Agent's flag)."""
        return True

    def roots(self, ctx: RunContext[Any] | None = None) -> Roots:
        """The folders a call in `ctx`'s conversation may read (made if missing).

        Errors name the conversation's folder as "this conversation's files", never by its
        place on the server.
        """
        if self._fixed_roots is not None:
            return self._fixed_roots
        try:
            folder = workspace_from(self.cfg).for_context(ctx)
        except OSError as exc:
            raise ToolExecutionError(
                f"cannot open this conversation's files: {exc.strerror}", tool_name=self.name
            ) from None
        return Roots([folder], tool_name=self.name, shown="this conversation's files")

    async def aparse(self, source: str, ctx: RunContext[Any] | None = None) -> ParsedDocument:
        """Parse a document with this tool's settings, for `ctx`'s conversation."""
        return await aparse_document(
            source,
            roots=self.roots(ctx),
            allow_http=bool(self.cfg.get("allow_http", False)),
            fetch_policy=self.fetch_policy,
            max_file_bytes=int(self.cfg.get("max_file_bytes", _MAX_BYTES)),
            max_rows=int(self.cfg.get("max_rows", 1000)),
            limits=self.limits,
        )

    def parse(self, source: str, ctx: RunContext[Any] | None = None) -> ParsedDocument:
        """The sync twin of `aparse`."""
        return run_sync(self.aparse(source, ctx))

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> str | list[dict[str, Any]]:
        """Parse the document at `url`; text, or Qwen-Agent's pages with `structured_doc`.

        The conversation is the agent's `ctx` (or a Qwen-Agent style `session` keyword).
        """
        arguments = self._verify_json_format_args(params)
        document = await self.aparse(str(arguments["url"]), run_context(kwargs))
        if self.cfg.get("structured_doc"):
            return document.to_qwen()
        return document.to_text(self.max_chars)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[dict[str, Any]]:
        """The sync twin of `acall` (Qwen-Agent style)."""
        return run_sync(self.acall(self._verify_json_format_args(params), **kwargs))
