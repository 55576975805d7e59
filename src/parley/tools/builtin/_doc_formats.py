"""Readers of each document format, into sections (pages, slides, sheets) of paragraphs.

Standard library only, apart from each format's library (the `tools` extra, imported lazily):
the parser process (`_doc_worker.py`) loads this file by its path, without parley, and runs
the readers there under its limits; parley imports it for `Section` and `Item`.

Each reader reads an open binary file (the bytes the parent sent) into an `Extract`, which
keeps the sections under the request's `ReadLimits`: at most `max_pages` pages, slides or
sheets, `max_chars` characters of text in all, `max_rows` rows per table. A reader stops as
soon as a limit is reached (nothing past it is even read) and the extract says what was cut.
A section's items are paragraphs or tables (rows as `| a | b |` lines), as Qwen-Agent's
parsed documents hold `{"text": ...}` and `{"table": ...}` items.
"""

from __future__ import annotations

import codecs
import csv
import importlib
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, BinaryIO, Literal

__all__ = [
    "FORMATS",
    "MAX_UNPACKED_BYTES",
    "Extract",
    "Extracted",
    "FormatError",
    "Item",
    "MissingLibraryError",
    "ReadLimits",
    "Section",
    "read_document",
]

ItemKind = Literal["text", "table"]

_MIB = 1024 * 1024

MAX_UNPACKED_BYTES = {"docx": 64 * _MIB, "pptx": 64 * _MIB, "xlsx": 128 * _MIB}
"""How much a Word, PowerPoint or Excel file (a zip) may grow as it unpacks, by format.

A few hundred kilobytes of zip can hold gigabytes of XML; python-docx and python-pptx load
every part whole (about fifteen times its size in memory for XML), and openpyxl its shared
strings and a scan of each sheet. What counts is the growth, the unpacked size less the
packed size of each part, so that pictures (stored about as large as they are) do not: a
legit file grows about tenfold, to a few megabytes. The sizes are those the zip declares,
which Python's `zipfile` never reads past. The parent sends these with each request (so a
test may lower them)."""


class FormatError(Exception):
    """The document cannot be read: an unknown format, a broken file, a zip bomb."""


class MissingLibraryError(Exception):
    """A format's library is not installed.

    Args:
        package: The import name that failed.
        extra: The parley extra that installs it.
    """

    def __init__(self, package: str, extra: str = "tools") -> None:
        super().__init__(package)
        self.package = package
        self.extra = extra


def optional_import(module: str, package: str | None = None) -> Any:
    """Import a format's library (typed `Any`: the checks do not depend on the extras)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingLibraryError(package or module) from None


@dataclass
class Item:
    """A paragraph or a table."""

    kind: ItemKind
    text: str


@dataclass
class Section:
    """One page, slide, sheet or the whole of a document without pages.

    Attributes:
        kind: `page`, `slide`, `sheet` or `document`.
        number: Its position, from 1.
        title: A sheet's name or a slide's title, when it has one.
        items: Its paragraphs and tables, in order.
    """

    kind: str
    number: int
    title: str | None = None
    items: list[Item] = field(default_factory=list)

    def add(self, kind: ItemKind, text: str) -> None:
        """Add a paragraph or table unless it is blank."""
        if text.strip():
            self.items.append(Item(kind, text.rstrip()))


@dataclass(frozen=True)
class ReadLimits:
    """How much of a document is read.

    Attributes:
        max_rows: Rows kept per table.
        max_pages: Pages, slides or sheets read.
        max_chars: Characters of text (paragraphs, tables and titles) read in all.
        unpacked: `MAX_UNPACKED_BYTES` as the parent has it.
    """

    max_rows: int = 1000
    max_pages: int = 1000
    max_chars: int = 5_000_000
    unpacked: Mapping[str, int] = field(default_factory=lambda: dict(MAX_UNPACKED_BYTES))


class _FullError(Exception):
    """The character budget is spent: the reader stops where it is."""


class Extract:
    """The sections a reader has read so far, kept within the limits.

    Attributes:
        limits: The limits.
        sections: The sections read, in order.
        note: What a limit cut, as a sentence for the reader of the text (None: nothing).
    """

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.sections: list[Section] = []
        self.note: str | None = None
        self._chars = 0

    def numbers(self, kind: str, total: int) -> range:
        """The numbers of the pages (slides, sheets) to read of `total`: up to `max_pages`."""
        if total > self.limits.max_pages:
            self.note = (
                f"Only {kind}s 1-{self.limits.max_pages} of {total} were read "
                "(the limit max_pages)."
            )
        return range(1, min(total, self.limits.max_pages) + 1)

    def section(self, kind: str, number: int, title: str | None = None) -> Section:
        """Start a section; its title counts against the characters."""
        if title is not None:
            title = self._take(title, kind, number)
        section = Section(kind, number, title)
        self.sections.append(section)
        if self._chars >= self.limits.max_chars and title is not None:
            self._stop(section)
        return section

    def add(self, section: Section, kind: ItemKind, text: str) -> None:
        """Add a paragraph or table (unless blank); past the characters left, its start only.

        Raises:
            _FullError: The characters are spent: nothing more is read.
        """
        if not text.strip():
            return
        section.add(kind, self._take(text.rstrip(), section.kind, section.number))
        if self._chars >= self.limits.max_chars:
            self._stop(section)

    def _take(self, text: str, kind: str, number: int) -> str:
        left = self.limits.max_chars - self._chars
        if len(text) > left:
            text = text[:left]
            self._chars = self.limits.max_chars + 1  # past: whatever comes next is cut
        else:
            self._chars += len(text)
        return text

    def _stop(self, section: Section) -> None:
        if self._chars <= self.limits.max_chars:
            return  # exactly spent: stop only when something more comes
        where = "" if section.kind == "document" else f", up to {section.kind} {section.number}"
        self.note = (
            f"Only the first {self.limits.max_chars} characters were read{where} "
            "(the limit max_text_chars)."
        )
        raise _FullError

    def cut_bytes(self, read: int) -> None:
        """Say that only the first `read` bytes of the file were read (unless already said)."""
        if self.note is None:
            self.note = f"Only the first {read} bytes were read (the limit max_text_chars)."


def _row(cells: Iterable[Any]) -> str:
    values = ["" if c is None else str(c).replace("\n", " ").strip() for c in cells]
    while values and not values[-1]:
        values.pop()
    return "| " + " | ".join(values) + " |" if values else ""


def _table(rows: Iterable[Iterable[Any]], max_rows: int) -> str:
    """The rows as `| a | b |` lines: at most `max_rows`, and none read past them.

    A small spreadsheet can unpack to millions of rows, so the rest are not even counted;
    blank rows are read up to four times `max_rows`, so that a sheet of them ends as soon.
    """
    lines: list[str] = []
    for read, cells in enumerate(rows, start=1):
        if len(lines) == max_rows or read > 4 * max_rows:
            lines.append("[... more rows, not read]")
            break
        line = _row(cells)
        if line:
            lines.append(line)
    return "\n".join(lines)


def read_text(stream: BinaryIO, max_bytes: int = -1) -> tuple[str, bool]:
    """A text file's content (UTF-8 with or without a BOM, else Latin-1); and whether cut.

    At most `max_bytes` are read (-1: all); a character cut at the end is left out.
    """
    data = stream.read(max_bytes + 1 if max_bytes >= 0 else -1)
    cut = 0 <= max_bytes < len(data)
    if cut:
        data = data[:max_bytes]
    try:
        return codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=not cut), cut
    except UnicodeDecodeError:
        return data.decode("latin-1"), cut


# -- one reader per format ----------------------------------------------------------------------


def read_pdf(stream: BinaryIO, name: str, out: Extract) -> None:
    """Each page's text (pypdf's layout-free extraction)."""
    pypdf = optional_import("pypdf")
    reader = pypdf.PdfReader(stream)
    if reader.is_encrypted:
        reader.decrypt("")
    pages = reader.pages
    for number in out.numbers("page", len(pages)):
        section = out.section("page", number)
        for paragraph in re.split(r"\n\s*\n", pages[number - 1].extract_text() or ""):
            out.add(section, "text", paragraph)


def _docx_paragraph(paragraph: Any, styles: dict[str | None, str]) -> str:
    # python-docx looks a paragraph's style up in the styles part on each `.style` (about two
    # milliseconds): once per style id here, or a file of many short paragraphs takes minutes.
    style_id = paragraph._p.style
    if style_id not in styles:
        styles[style_id] = getattr(paragraph.style, "name", "") or ""
    style = styles[style_id]
    level = re.fullmatch(r"Heading (\d)", style)
    prefix = "#" * int(level.group(1)) + " " if level else ""
    if style == "Title":
        prefix = "# "
    return prefix + str(paragraph.text)


def read_docx(stream: BinaryIO, name: str, out: Extract) -> None:
    """The body's paragraphs (headings marked) and tables, in order; Word has no fixed pages."""
    docx = optional_import("docx", "python-docx")
    document = docx.Document(stream)
    section = out.section("document", 1)
    styles: dict[str | None, str] = {}
    for block in document.iter_inner_content():
        if hasattr(block, "rows"):
            rows = ([cell.text for cell in row.cells] for row in block.rows)
            out.add(section, "table", _table(rows, out.limits.max_rows))
        else:
            out.add(section, "text", _docx_paragraph(block, styles))


def _slide_title(slide: Any) -> str | None:
    title = slide.shapes.title
    if title is None:
        return None
    return str(title.text_frame.text).strip() or None


def _slide(slide: Any, section: Section, out: Extract) -> None:
    for shape in slide.shapes:
        if shape.has_text_frame and shape != slide.shapes.title:
            for paragraph in shape.text_frame.paragraphs:
                out.add(section, "text", "".join(run.text for run in paragraph.runs))
        if getattr(shape, "has_table", False):
            rows = ([cell.text for cell in row.cells] for row in shape.table.rows)
            out.add(section, "table", _table(rows, out.limits.max_rows))
    if slide.has_notes_slide:
        out.add(section, "text", "Notes: " + str(slide.notes_slide.notes_text_frame.text))


def read_pptx(stream: BinaryIO, name: str, out: Extract) -> None:
    """Each slide's title, text frames, tables and speaker notes."""
    pptx = optional_import("pptx", "python-pptx")
    slides = pptx.Presentation(stream).slides
    for number in out.numbers("slide", len(slides)):
        slide = slides[number - 1]
        _slide(slide, out.section("slide", number, _slide_title(slide)), out)


def read_xlsx(stream: BinaryIO, name: str, out: Extract) -> None:
    """Each sheet as a table of its values (formulas as last computed)."""
    openpyxl = optional_import("openpyxl")
    workbook = openpyxl.load_workbook(stream, read_only=True, data_only=True)
    try:
        sheets = workbook.worksheets
        for number in out.numbers("sheet", len(sheets)):
            sheet = sheets[number - 1]
            section = out.section("sheet", number, str(sheet.title))
            rows = sheet.iter_rows(values_only=True)
            out.add(section, "table", _table(rows, out.limits.max_rows))
    finally:
        workbook.close()


def read_csv(stream: BinaryIO, name: str, out: Extract) -> None:
    """The rows as one table; the delimiter is sniffed (comma, semicolon, tab, ...)."""
    text, _cut = read_text(stream)
    path = PurePath(name)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
    section = out.section("sheet", 1, path.stem)
    rows = csv.reader(text.splitlines(), dialect)
    out.add(section, "table", _table(rows, out.limits.max_rows))


def read_html(stream: BinaryIO, name: str, out: Extract) -> None:
    """The visible text, one paragraph per block element; the page's title kept."""
    bs4 = optional_import("bs4", "beautifulsoup4")
    soup = bs4.BeautifulSoup(read_text(stream)[0], "html.parser")
    for hidden in soup(["script", "style", "noscript", "template"]):
        hidden.decompose()
    title = soup.title.get_text(strip=True) if soup.title else None
    if soup.title:
        soup.title.decompose()
    section = out.section("document", 1, title or None)
    for line in soup.get_text("\n").splitlines():
        out.add(section, "text", " ".join(line.split()))


def read_plain(stream: BinaryIO, name: str, out: Extract) -> None:
    """Text and Markdown: paragraphs split on blank lines, Markdown kept as written.

    Only as many bytes are read as could hold `max_chars` characters (four per character).
    """
    most = 4 * out.limits.max_chars + 3  # and a byte-order mark
    text, cut = read_text(stream, most)
    section = out.section("document", 1)
    for paragraph in re.split(r"\n\s*\n", text):
        out.add(section, "text", paragraph.strip("\n"))
    if cut:
        out.cut_bytes(most)


Reader = Callable[[BinaryIO, str, Extract], None]
"""A reader: the open file, its name (for its extension and title), and where it puts them."""

FORMATS: dict[str, Reader] = {
    "pdf": read_pdf,
    "docx": read_docx,
    "pptx": read_pptx,
    "xlsx": read_xlsx,
    "csv": read_csv,
    "html": read_html,
    "markdown": read_plain,
    "text": read_plain,
}
"""The reader of each format."""


def _check_unpacked(stream: BinaryIO, name: str, kind: str, limit: int) -> None:
    """Refuse a zipped format that declares more growth than `limit` allows."""
    try:
        with zipfile.ZipFile(stream) as archive:
            growth = sum(max(0, i.file_size - i.compress_size) for i in archive.infolist())
    except zipfile.BadZipFile:
        return  # not a zip: the format's reader says what is wrong with it
    finally:
        stream.seek(0)
    if growth > limit:
        raise FormatError(
            f"cannot read {name}: it unpacks to {growth} bytes more than it holds, past the "
            f"{limit} a {kind} file may (a zip bomb, or a document too large to read)"
        )


def looks_like_text(stream: BinaryIO) -> bool:
    """Whether a file of no known format starts as text (UTF-8, no NUL bytes)."""
    head = stream.read(8192)
    stream.seek(0)
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a character cut at the end of the sample
    return True


def _kind(stream: BinaryIO, name: str, kind: str | None) -> str:
    if kind is not None:
        return kind
    if not looks_like_text(stream):
        supported = ", ".join(sorted(FORMATS))
        raise FormatError(f"cannot read {name}: its format is not one of {supported}")
    return "text"


@dataclass
class Extracted:
    """A document read: its format, its sections, and what a limit cut (None: nothing)."""

    kind: str
    sections: list[Section]
    note: str | None


def read_document(
    stream: BinaryIO, name: str, kind: str | None, limits: ReadLimits | None = None
) -> Extracted:
    """Read a document from an open binary file into sections, within `limits`.

    `kind` None: a file of no known format, read as text if it looks like text.

    Raises:
        FormatError: The format is unknown, a zipped format (docx, pptx, xlsx) unpacks to
            more than `limits.unpacked` allows, or the file cannot be read as its format.
        MissingLibraryError: The format's library is not installed.
    """
    limits = limits or ReadLimits()
    kind = _kind(stream, name, kind)
    if kind in limits.unpacked:
        _check_unpacked(stream, name, kind, limits.unpacked[kind])
    out = Extract(limits)
    try:
        FORMATS[kind](stream, name, out)
    except _FullError:
        pass
    except (MissingLibraryError, MemoryError):
        raise
    except Exception as exc:  # each library has its own errors for a broken file
        raise FormatError(f"cannot read {name} as {kind}: {type(exc).__name__}: {exc}") from exc
    return Extracted(kind, out.sections, out.note)
