"""`doc_parser`: a document (PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown, text) into text.

The text keeps the document's structure: pages, slides and sheets are marked, tables are
written as `| a | b |` rows, Word headings as `#`. Sources are local paths, `file://` URLs,
and `http(s)://` URLs when downloading is allowed (`allow_http`, off by default: a model
should not make the machine fetch whatever URL it writes).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from parley.errors import MissingDependencyError, ToolExecutionError
from parley.models.base import ChatModel
from parley.tools.base import Tool
from parley.tools.builtin._common import optional_import
from parley.tools.builtin._doc_formats import FORMATS, Section, read_document
from parley.tools.registry import register_tool

__all__ = ["DocParser", "ParsedDocument", "detect_format", "parse_document"]

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


@dataclass
class ParsedDocument:
    """A parsed document.

    Attributes:
        source: The path or URL it came from.
        name: Its file name.
        format: One of `pdf`, `docx`, `pptx`, `xlsx`, `csv`, `html`, `markdown`, `text`.
        sections: Its pages, slides or sheets (one `document` section if it has none).
    """

    source: str
    name: str
    format: str
    sections: list[Section]

    def _header(self) -> str:
        kinds = {s.kind for s in self.sections}
        count = len(self.sections)
        kind = kinds.pop() if len(kinds) == 1 else "section"
        shape = "" if kind == "document" else f", {count} {kind}{'s' if count != 1 else ''}"
        return f"Document: {self.name} ({_NAMES.get(self.format, self.format)}{shape})"

    def to_text(self, max_chars: int | None = None) -> str:
        """The whole text, sections marked, cut at `max_chars` with a note saying so."""
        parts = [self._header()]
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


def _looks_like_text(path: Path) -> bool:
    head = path.read_bytes()[:8192]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a character cut at the end of the sample
    return True


def _local_path(source: str) -> Path:
    parts = urlsplit(source)
    path = Path(unquote(parts.path)) if parts.scheme == "file" else Path(source).expanduser()
    if not path.is_file():
        raise ToolExecutionError(f"no such file: {source}", tool_name="doc_parser")
    return path


def _download(url: str, folder: Path, timeout: float, max_bytes: int) -> tuple[Path, str | None]:
    """Fetch a URL into `folder` with httpx; returns the file and its media type."""
    ChatModel.check_allowed(url)
    httpx = optional_import("httpx")
    name = Path(unquote(urlsplit(url).path)).name or "download"
    target = folder / name
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
            response.raise_for_status()
            size = 0
            with target.open("wb") as out:
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise ToolExecutionError(
                            f"{url} is larger than {max_bytes} bytes", tool_name="doc_parser"
                        )
                    out.write(chunk)
            media_type = response.headers.get("content-type")
    except httpx.HTTPError as exc:
        raise ToolExecutionError(
            f"downloading {url} failed: {exc}", tool_name="doc_parser"
        ) from exc
    return target, media_type


def _parse_file(source: str, path: Path, media_type: str | None, max_rows: int) -> ParsedDocument:
    kind = detect_format(path.name, media_type)
    if kind is None:
        if not _looks_like_text(path):
            supported = ", ".join(sorted(FORMATS))
            raise ToolExecutionError(
                f"cannot read {path.name}: its format is not one of {supported}",
                tool_name="doc_parser",
            )
        kind = "text"
    try:
        sections = read_document(path, kind, max_rows)
    except (ToolExecutionError, MissingDependencyError):
        raise
    except Exception as exc:  # each library has its own errors for a broken file
        raise ToolExecutionError(
            f"cannot read {path.name} as {kind}: {type(exc).__name__}: {exc}",
            tool_name="doc_parser",
        ) from exc
    return ParsedDocument(source, path.name, kind, sections)


def parse_document(
    source: str,
    *,
    allow_http: bool = False,
    timeout: float = 30.0,
    max_download_bytes: int = 50 * 1024 * 1024,
    max_rows: int = 1000,
) -> ParsedDocument:
    """Parse a local path, a `file://` URL, or (if `allow_http`) an `http(s)://` URL.

    Raises:
        ToolExecutionError: The file is missing, unreadable or of an unknown format, the
            download failed, or downloading is not allowed.
        MissingDependencyError: The format's library (the `tools` extra) is not installed.
    """
    scheme = urlsplit(source).scheme.lower()
    if scheme not in ("http", "https"):
        return _parse_file(source, _local_path(source), None, max_rows)
    if not allow_http:
        raise ToolExecutionError(
            f"downloading URLs is not allowed here ({source}); give a local file, or enable "
            "it with DocParser({'allow_http': True})",
            tool_name="doc_parser",
        )
    with tempfile.TemporaryDirectory(prefix="parley-doc-") as folder:
        path, media_type = _download(source, Path(folder), timeout, max_download_bytes)
        return _parse_file(source, path, media_type, max_rows)


@register_tool("doc_parser")
class DocParser(Tool):
    """Reads a document into text with its pages, slides or sheets marked.

    Args:
        cfg: `allow_http` (download http(s) URLs; default False), `structured_doc` (return
            Qwen-Agent's list of pages instead of text), `max_chars` (default 100,000),
            `max_rows` per table (default 1,000), `max_download_bytes` (default 50 MiB),
            `download_timeout` (seconds, default 30).
    """

    description = (
        "Reads a document and returns its text, with pages, slides and sheets marked and "
        "tables as rows. Supports PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown and plain text."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "The document's local path or file:// URL (or http(s) URL).",
            }
        },
        "required": ["url"],
    }

    @property
    def file_access(self) -> bool:
        """It reads the files of the conversation (Qwen-Agent's flag)."""
        return True

    def parse(self, source: str) -> ParsedDocument:
        """Parse a document with this tool's settings."""
        return parse_document(
            source,
            allow_http=bool(self.cfg.get("allow_http", False)),
            timeout=float(self.cfg.get("download_timeout", 30.0)),
            max_download_bytes=int(self.cfg.get("max_download_bytes", 50 * 1024 * 1024)),
            max_rows=int(self.cfg.get("max_rows", 1000)),
        )

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str | list[dict[str, Any]]:
        """Parse the document at `url`; text, or Qwen-Agent's pages with `structured_doc`."""
        arguments = self._verify_json_format_args(params)
        document = self.parse(str(arguments["url"]))
        if self.cfg.get("structured_doc"):
            return document.to_qwen()
        return document.to_text(int(self.cfg.get("max_chars", 100_000)))
