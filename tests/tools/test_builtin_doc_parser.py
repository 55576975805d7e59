"""The document parser on real files of every format, written here by their own libraries.

The PDF is written byte by byte (`tests.tools._hostile.text_pdf`, Helvetica text); DOCX, PPTX
and XLSX are written by python-docx, python-pptx and openpyxl; the rest are text.
"""

from __future__ import annotations

import functools
import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from parley.errors import MissingDependencyError, ToolExecutionError
from parley.messages import ToolCallBlock
from parley.tools import TOOL_REGISTRY, RunContext, Toolkit, Workspace
from parley.tools.builtin import DocParser, parse_document
from parley.tools.builtin._doc_pool import parser_pool
from parley.tools.builtin._net import FetchNotAllowedError
from parley.tools.builtin._paths import PathNotAllowedError
from parley.tools.builtin.doc_parser import ParseLimits, parse_bytes
from tests._http import serving
from tests._requires import require_module
from tests.tools._hostile import text_pdf

pytestmark = pytest.mark.timeout(60)


# -- fixture files ---------------------------------------------------------------------------


def write_docx(path: Path) -> Path:
    docx = require_module("docx", "tools")
    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    document.add_paragraph("Revenue grew in every region.")
    table = document.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, [("Region", "Revenue"), ("North", "120")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_heading("Outlook", level=2)
    document.add_paragraph("Steady.")
    document.save(str(path))
    return path


def write_pptx(path: Path) -> Path:
    pptx = require_module("pptx", "tools")
    inches = require_module("pptx.util", "tools").Inches
    deck = pptx.Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Launch plan"
    first.placeholders[1].text_frame.text = "Ship in March"
    first.notes_slide.notes_text_frame.text = "Mention the beta."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Budget"
    shape = second.shapes.add_table(2, 2, inches(1), inches(2), inches(4), inches(1))
    for r, values in enumerate([("Item", "Cost"), ("Ads", "300")]):
        for c, value in enumerate(values):
            shape.table.cell(r, c).text = value
    deck.save(str(path))
    return path


def write_xlsx(path: Path) -> Path:
    openpyxl = require_module("openpyxl", "tools")
    workbook = openpyxl.Workbook()
    sales = workbook.active
    sales.title = "Sales"
    sales.append(["Month", "Units"])
    sales.append(["Jan", 10])
    sales.append(["Feb", 12])
    costs = workbook.create_sheet("Costs")
    costs.append(["Rent", 1000])
    workbook.save(str(path))
    return path


# -- each format -----------------------------------------------------------------------------


def test_pdf_pages_are_marked(tmp_path: Path) -> None:
    require_module("pypdf", "tools")
    path = text_pdf(tmp_path / "report.pdf", [["Page one text", "second line"], ["Page two"]])
    document = parse_document(str(path))
    assert document.format == "pdf"
    assert [s.kind for s in document.sections] == ["page", "page"]
    text = document.to_text()
    assert text.startswith("Document: report.pdf (PDF, 2 pages)")
    first, second = text.index("--- page 1 ---"), text.index("--- page 2 ---")
    assert first < text.index("Page one text") < text.index("second line") < second
    assert text.index("Page two") > second


def test_docx_headings_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    text = parse_document(str(write_docx(tmp_path / "report.docx"))).to_text()
    assert text.startswith("Document: report.docx (Word)")
    expected = [
        "# Quarterly report",
        "Revenue grew in every region.",
        "| Region | Revenue |\n| North | 120 |",
        "## Outlook",
        "Steady.",
    ]
    positions = [text.index(part) for part in expected]
    assert positions == sorted(positions)


def test_docx_styles_are_looked_up_once_per_style_not_per_paragraph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # python-docx searches the styles part on each `Paragraph.style` (milliseconds): a file
    # of many short paragraphs took minutes before the lookups were kept.
    docx = require_module("docx", "tools")
    document = docx.Document()
    for number in range(200):
        document.add_paragraph(f"Line {number}.")
        if number % 50 == 0:
            document.add_heading(f"Part {number // 50}", level=2)
    document.save(str(tmp_path / "long.docx"))
    paragraph = docx.text.paragraph.Paragraph
    looked_up: list[object] = []
    real = paragraph.style

    def counting(self: Any) -> Any:
        looked_up.append(self)
        return real.fget(self)

    monkeypatch.setattr(paragraph, "style", property(counting))
    # The reader itself, in this process: the parser process would not see the counting.
    from parley.tools.builtin._doc_formats import read_document  # noqa: PLC0415

    with (tmp_path / "long.docx").open("rb") as stream:
        [section] = read_document(stream, "long.docx", "docx").sections
    text = "\n\n".join(item.text for item in section.items)
    assert len(looked_up) == 2  # the body style and the heading's
    assert text.count("## Part ") == 4
    assert "Line 199." in text


def test_a_long_table_is_not_read_past_its_rows(tmp_path: Path) -> None:
    read: list[int] = []

    def rows() -> Iterator[list[object]]:
        for number in range(1_000_000):  # a sheet unpacked from a small file
            read.append(number)
            yield [f"row{number}", number]

    from parley.tools.builtin._doc_formats import _table  # noqa: PLC0415

    table = _table(rows(), max_rows=10).splitlines()
    assert table[:2] == ["| row0 | 0 |", "| row1 | 1 |"]
    assert table[10:] == ["[... more rows, not read]"]
    assert len(read) == 11
    blank = _table(iter([[None]] * 1_000_000), max_rows=10)
    assert blank == "[... more rows, not read]"


def test_pptx_slides_titles_tables_and_notes(tmp_path: Path) -> None:
    document = parse_document(str(write_pptx(tmp_path / "deck.pptx")))
    text = document.to_text()
    assert text.startswith("Document: deck.pptx (PowerPoint, 2 slides)")
    assert "--- slide 1: Launch plan ---\n\nShip in March\n\nNotes: Mention the beta." in text
    assert "--- slide 2: Budget ---\n\n| Item | Cost |\n| Ads | 300 |" in text


def test_xlsx_sheets_are_marked(tmp_path: Path) -> None:
    text = parse_document(str(write_xlsx(tmp_path / "book.xlsx"))).to_text()
    assert "(Excel, 2 sheets)" in text
    assert "--- sheet 1: Sales ---\n\n| Month | Units |\n| Jan | 10 |\n| Feb | 12 |" in text
    assert "--- sheet 2: Costs ---\n\n| Rent | 1000 |" in text


def test_csv_with_a_sniffed_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text('name;age\n"Doe; Jane";41\nBob;7\n')
    text = parse_document(str(path)).to_text()
    assert "--- sheet 1: people ---" in text
    assert "| name | age |\n| Doe; Jane | 41 |\n| Bob | 7 |" in text


def test_html_visible_text_and_title(tmp_path: Path) -> None:
    require_module("bs4", "tools")
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>Welcome</title><style>p{color:red}</style>"
        "<script>var hidden = 1;</script></head>"
        "<body><h1>Hello</h1><p>First   paragraph.</p><p>Second.</p></body></html>"
    )
    text = parse_document(str(path)).to_text()
    assert "Title: Welcome" in text
    assert "Hello\n\nFirst paragraph.\n\nSecond." in text
    assert "hidden" not in text
    assert "color" not in text


def test_markdown_and_text_keep_their_paragraphs(tmp_path: Path) -> None:
    markdown = tmp_path / "notes.md"
    markdown.write_text("# Title\n\nSome *text*.\n\n- a\n- b\n")
    assert parse_document(str(markdown)).to_text() == (
        "Document: notes.md (Markdown)\n\n# Title\n\nSome *text*.\n\n- a\n- b"
    )
    plain = tmp_path / "plain.txt"
    plain.write_bytes("caf\xe9 au lait".encode("latin-1"))  # not UTF-8: read as Latin-1
    assert parse_document(str(plain)).sections[0].items[0].text == "café au lait"


def test_an_unknown_extension_is_read_as_text_when_it_is_text(tmp_path: Path) -> None:
    source = tmp_path / "script.py"
    source.write_text("print('hi')\n")
    assert parse_document(str(source)).format == "text"
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ToolExecutionError, match="format is not one of"):
        parse_document(str(binary))


def test_a_program_reads_any_path_and_relative_ones_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "here.md").write_text("here")
    (tmp_path / "there.md").write_text("there")
    monkeypatch.chdir(folder)
    assert parse_document("here.md").sections[0].items[0].text == "here"
    assert parse_document("../there.md").sections[0].items[0].text == "there"
    # Given roots, the same function keeps to them (as the tool does).
    with pytest.raises(PathNotAllowedError, match="outside the allowed folders"):
        parse_document("../there.md", roots=[folder])


def test_file_urls_missing_files_and_broken_files(tmp_path: Path) -> None:
    path = tmp_path / "with space.md"
    path.write_text("hello")
    assert parse_document(path.as_uri()).sections[0].items[0].text == "hello"
    with pytest.raises(ToolExecutionError, match="no such file"):
        parse_document(str(tmp_path / "missing.pdf"))
    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"not a zip")
    with pytest.raises(ToolExecutionError, match=r"cannot read broken\.docx as docx"):
        parse_document(str(broken))


def test_a_missing_library_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = text_pdf(tmp_path / "a.pdf", [["x"]])
    # The parser process takes this process's path: a `pypdf` first on it that cannot load.
    blocked = tmp_path / "blocked" / "pypdf"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed, for the test')\n")
    monkeypatch.syspath_prepend(str(blocked.parent))
    limits = ParseLimits(memory_bytes=ParseLimits().memory_bytes + 4096)  # a pool of its own
    try:
        with pytest.raises(MissingDependencyError, match=r"parley\[tools\]"):
            parse_document(str(path), limits=limits)
    finally:
        parser_pool(limits.memory_bytes).close()


# -- http(s) ---------------------------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    folder = tmp_path / "site"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url, folder


def test_http_urls_are_refused_unless_allowed(served: tuple[str, Path]) -> None:
    base, folder = served
    text_pdf(folder / "remote.pdf", [["Fetched over HTTP"]])
    with pytest.raises(ToolExecutionError, match="not allowed"):
        DocParser().call({"url": f"{base}/remote.pdf"})
    # Downloads on, but the server is on a loopback address: refused unless allowed too.
    with pytest.raises(FetchNotAllowedError, match="loopback address"):
        DocParser({"allow_http": True}).call({"url": f"{base}/remote.pdf"})
    text = DocParser({"allow_http": True, "allowed_hosts": ["127.0.0.1"]}).call(
        {"url": f"{base}/remote.pdf"}
    )
    assert isinstance(text, str)
    assert "Fetched over HTTP" in text
    assert "(PDF, 1 page)" in text


def test_http_errors_and_size_limits(served: tuple[str, Path]) -> None:
    require_module("httpx", "tools")
    base, folder = served
    parser = DocParser({"allow_http": True, "allow_private": True, "max_download_bytes": 100})
    with pytest.raises(ToolExecutionError, match="404"):
        parser.call({"url": f"{base}/missing.txt"})
    (folder / "big.txt").write_text("x" * 1000)
    with pytest.raises(ToolExecutionError, match="larger than 100 bytes"):
        parser.call({"url": f"{base}/big.txt"})


# -- as a tool -------------------------------------------------------------------------------


def test_structured_output_and_the_character_limit(tmp_path: Path) -> None:
    path = write_xlsx(tmp_path / "book.xlsx")
    pages = DocParser({"structured_doc": True, "root": str(tmp_path)}).call({"url": "book.xlsx"})
    assert pages == [
        {
            "page_num": 1,
            "title": "Sales",
            "content": [{"table": "| Month | Units |\n| Jan | 10 |\n| Feb | 12 |"}],
        },
        {"page_num": 2, "title": "Costs", "content": [{"table": "| Rent | 1000 |"}]},
    ]
    cut = DocParser({"max_chars": 40, "roots": [tmp_path]}).call({"url": str(path)})
    assert isinstance(cut, str)
    assert cut.endswith("more characters not shown]")


async def test_it_runs_as_a_tool_and_failures_come_back_as_errors(tmp_path: Path) -> None:
    assert TOOL_REGISTRY["doc_parser"] is DocParser
    ctx = RunContext.detached(thread_id="t1", user_id="ann")
    folder = Workspace(tmp_path).for_context(ctx)
    (folder / "a.md").write_text("# Heading\n\nBody.")
    toolkit = Toolkit([{"name": "doc_parser", "work_dir": str(tmp_path)}])
    call = ToolCallBlock(id="1", name="doc_parser", input={"url": "a.md"})
    ok = await toolkit.run(call, ctx=ctx)
    assert not ok.is_error
    assert "Body." in str(ok.output)
    missing = await toolkit.run(
        ToolCallBlock(id="2", name="doc_parser", input={"url": "none.pdf"}), ctx=ctx
    )
    assert missing.is_error
    assert "no such file" in str(missing.output)


def test_bytes_already_read_parse_as_the_file_would(tmp_path: Path) -> None:
    require_module("pypdf", "tools")
    path = text_pdf(tmp_path / "report.pdf", [["Page one text"], ["Page two"]])
    from_bytes = parse_bytes(str(path), "report.pdf", path.read_bytes())
    assert from_bytes.to_text() == parse_document(str(path)).to_text()
    # Without a telling name, the media type decides.
    html = parse_bytes("u", "download", b"<title>T</title><p>Hi</p>", media_type="text/html")
    assert (html.format, html.sections[0].title) == ("html", "T")
    with pytest.raises(ToolExecutionError, match=r"cannot read broken\.pdf as pdf"):
        parse_bytes("x", "broken.pdf", b"%PDF-1.4 nothing else")
