"""Readers of each document format, into sections (pages, slides, sheets) of paragraphs.

Each reader imports its library lazily (the `tools` extra), reads an open binary file (a
file opened inside the tool's roots, or a download held in memory) and returns `Section`s in
order; readers never open a path themselves.
A section's items are paragraphs or tables (rows as `| a | b |` lines), as Qwen-Agent's
parsed documents hold `{"text": ...}` and `{"table": ...}` items.
"""

from __future__ import annotations

import csv
import re
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, BinaryIO, Literal

from parley.errors import ToolExecutionError
from parley.tools.builtin._common import optional_import

__all__ = ["FORMATS", "MAX_UNPACKED_BYTES", "Item", "Section", "read_document"]

ItemKind = Literal["text", "table"]


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


def read_text(stream: BinaryIO) -> str:
    """A text file's content: UTF-8 (with or without a BOM), else Latin-1."""
    data = stream.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# -- one reader per format ----------------------------------------------------------------------


def read_pdf(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """Each page's text (pypdf's layout-free extraction)."""
    pypdf = optional_import("pypdf")
    reader = pypdf.PdfReader(stream)
    if reader.is_encrypted:
        reader.decrypt("")
    sections = []
    for number, page in enumerate(reader.pages, 1):
        section = Section("page", number)
        for paragraph in re.split(r"\n\s*\n", page.extract_text() or ""):
            section.add("text", paragraph)
        sections.append(section)
    return sections


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


def read_docx(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """The body's paragraphs (headings marked) and tables, in order; Word has no fixed pages."""
    docx = optional_import("docx", "python-docx")
    document = docx.Document(stream)
    section = Section("document", 1)
    styles: dict[str | None, str] = {}
    for block in document.iter_inner_content():
        if hasattr(block, "rows"):
            rows = ([cell.text for cell in row.cells] for row in block.rows)
            section.add("table", _table(rows, max_rows))
        else:
            section.add("text", _docx_paragraph(block, styles))
    return [section]


def _slide_title(slide: Any) -> str | None:
    title = slide.shapes.title
    if title is None:
        return None
    return str(title.text_frame.text).strip() or None


def read_pptx(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """Each slide's title, text frames, tables and speaker notes."""
    pptx = optional_import("pptx", "python-pptx")
    sections = []
    for number, slide in enumerate(pptx.Presentation(stream).slides, 1):
        section = Section("slide", number, _slide_title(slide))
        for shape in slide.shapes:
            if shape.has_text_frame and shape != slide.shapes.title:
                for paragraph in shape.text_frame.paragraphs:
                    section.add("text", "".join(run.text for run in paragraph.runs))
            if getattr(shape, "has_table", False):
                rows = ([cell.text for cell in row.cells] for row in shape.table.rows)
                section.add("table", _table(rows, max_rows))
        if slide.has_notes_slide:
            section.add("text", "Notes: " + str(slide.notes_slide.notes_text_frame.text))
        sections.append(section)
    return sections


def read_xlsx(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """Each sheet as a table of its values (formulas as last computed)."""
    openpyxl = optional_import("openpyxl")
    workbook = openpyxl.load_workbook(stream, read_only=True, data_only=True)
    try:
        sections = []
        for number, sheet in enumerate(workbook.worksheets, 1):
            section = Section("sheet", number, str(sheet.title))
            section.add("table", _table(sheet.iter_rows(values_only=True), max_rows))
            sections.append(section)
        return sections
    finally:
        workbook.close()


def read_csv(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """The rows as one table; the delimiter is sniffed (comma, semicolon, tab, ...)."""
    text = read_text(stream)
    path = PurePath(name)
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
    section = Section("sheet", 1, path.stem)
    section.add("table", _table(csv.reader(text.splitlines(), dialect), max_rows))
    return [section]


def read_html(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """The visible text, one paragraph per block element; the page's title kept."""
    bs4 = optional_import("bs4", "beautifulsoup4")
    soup = bs4.BeautifulSoup(read_text(stream), "html.parser")
    for hidden in soup(["script", "style", "noscript", "template"]):
        hidden.decompose()
    title = soup.title.get_text(strip=True) if soup.title else None
    if soup.title:
        soup.title.decompose()
    section = Section("document", 1, title or None)
    for line in soup.get_text("\n").splitlines():
        section.add("text", " ".join(line.split()))
    return [section]


def read_plain(stream: BinaryIO, name: str, max_rows: int) -> list[Section]:
    """Text and Markdown: paragraphs split on blank lines, Markdown kept as written."""
    section = Section("document", 1)
    for paragraph in re.split(r"\n\s*\n", read_text(stream)):
        section.add("text", paragraph.strip("\n"))
    return [section]


Reader = Callable[[BinaryIO, str, int], list[Section]]
"""A reader: the open file, its name (for its extension and title) and the rows per table."""

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


_MIB = 1024 * 1024

MAX_UNPACKED_BYTES = {"docx": 64 * _MIB, "pptx": 64 * _MIB, "xlsx": 128 * _MIB}
"""How much a Word, PowerPoint or Excel file (a zip) may grow as it unpacks, by format.

A few hundred kilobytes of zip can hold gigabytes of XML; python-docx and python-pptx load
every part whole (about fifteen times its size in memory for XML), and openpyxl its shared
strings and a scan of each sheet. What counts is the growth, the unpacked size less the
packed size of each part, so that pictures (stored about as large as they are) do not: a
legit file grows about tenfold, to a few megabytes. The sizes are those the zip declares,
which Python's `zipfile` never reads past."""


def _check_unpacked(stream: BinaryIO, name: str, kind: str) -> None:
    """Refuse a zipped format that declares more growth than `MAX_UNPACKED_BYTES` allows."""
    try:
        with zipfile.ZipFile(stream) as archive:
            growth = sum(max(0, i.file_size - i.compress_size) for i in archive.infolist())
    except zipfile.BadZipFile:
        return  # not a zip: the format's reader says what is wrong with it
    finally:
        stream.seek(0)
    limit = MAX_UNPACKED_BYTES[kind]
    if growth > limit:
        raise ToolExecutionError(
            f"cannot read {name}: it unpacks to {growth} bytes more than it holds, past the "
            f"{limit} a {kind} file may (a zip bomb, or a document too large to read)",
            tool_name="doc_parser",
        )


def read_document(stream: BinaryIO, name: str, kind: str, max_rows: int = 1000) -> list[Section]:
    """Read a document of a known format, from an open binary file, into sections.

    Raises:
        ToolExecutionError: A zipped format (docx, pptx, xlsx) unpacks to more than
            `MAX_UNPACKED_BYTES` allows.
    """
    if kind in MAX_UNPACKED_BYTES:
        _check_unpacked(stream, name, kind)
    return FORMATS[kind](stream, name, max_rows)
