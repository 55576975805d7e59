"""Documents built to pin whoever parses them, and this process's memory as /proc shows it.

Each document is small on disk and costs its parser far more: content streams that inflate
to millions of PDF operators, thousands of pages, Word and Excel parts that unpack to tens of
megabytes of XML. They are built a block at a time, so that building one never costs this
process (the one whose memory the tests watch) what parsing it would.

The PDF writer here (`write_pdf`, and `text_pdf` for pages of plain lines) is the one the
document tests and benchmarks/documents_limits.py write every PDF with, hostile or not.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
GROWTH_BOUND = 48 * MIB
"""What this process may grow by while a parser process works on a hostile document."""
# Ten PDF tokens: a page of 190,000 of them is just under pypdf's 2,000,000 tokens a stream.
_OPERATORS = b"BT /F1 12 Tf 72 720 Td (Lorem ipsum dolor sit amet) Tj ET\n"


def _deflated(chunk: bytes, total: int) -> bytes:
    """`chunk` repeated to about `total` bytes, deflated a megabyte at a time."""
    packer = zlib.compressobj(9)
    block = chunk * max(1, MIB // len(chunk))
    parts, sent = [], 0
    while sent < total:
        parts.append(packer.compress(block))
        sent += len(block)
    parts.append(packer.flush())
    return b"".join(parts)


def write_pdf(path: Path, streams: list[bytes], *, deflated: bool = False) -> Path:
    """A PDF with one page per content stream (Helvetica as F1) and an xref table."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(streams)))
    bodies = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(streams)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    flate = b" /Filter /FlateDecode" if deflated else b""
    for index, stream in enumerate(streams):
        bodies.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (5 + 2 * index)
        )
        bodies.append(b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(stream), flate, stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(bodies) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def text_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF whose pages show these lines of text, one under the other."""
    streams = []
    for lines in pages:
        shown = " T* ".join(f"({line}) Tj" for line in lines)
        streams.append(f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET".encode())
    return write_pdf(path, streams)


def inflating_pdf(path: Path, pages: int = 3) -> Path:
    """Pages of about 34 KiB whose streams inflate to 11 MB of text operators each.

    pypdf spends seconds and hundreds of megabytes on each such page (80 s and 420 MB for
    each of five pages on the test machine), and the text it finds is megabytes per page.
    """
    stream = _deflated(_OPERATORS, 190_000 * len(_OPERATORS))
    return write_pdf(path, [stream] * pages, deflated=True)


def bloated_pdf_page(path: Path) -> Path:
    """One page of 200 KiB whose stream inflates to 70 MB: pypdf holds 400 MB reading it."""
    return write_pdf(path, [_deflated(_OPERATORS, 70_000_000)], deflated=True)


def many_pages_pdf(path: Path, count: int) -> Path:
    """`count` pages, each saying its number."""
    pages = [b"BT /F1 12 Tf 72 720 Td (Page %d) Tj ET" % n for n in range(1, count + 1)]
    return write_pdf(path, pages)


def _zip_with(template: bytes, replace: str, grow: bytes, size: int, into: bytes) -> bytes:
    """`template` (a zip) with part `replace` holding `grow` repeated to `size` after `into`."""
    out = io.BytesIO()
    original = zipfile.ZipFile(io.BytesIO(template))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in original.infolist():
            data = original.read(info.filename)
            if info.filename != replace:
                bomb.writestr(info.filename, data)
                continue
            head, mark, tail = data.partition(into)
            with bomb.open(info.filename, "w", force_zip64=True) as part:
                part.write(head + mark)
                block = grow * max(1, MIB // len(grow))
                for _ in range(size // len(block)):
                    part.write(block)
                part.write(tail)
    return out.getvalue()


def expanding_docx(path: Path, size: int) -> Path:
    """A Word file whose body unpacks to `size` bytes of one-word paragraphs."""
    import docx  # noqa: PLC0415

    template = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("The one real paragraph.")
    document.save(template)
    paragraph = b"<w:p><w:r><w:t>flood</w:t></w:r></w:p>"
    path.write_bytes(
        _zip_with(template.getvalue(), "word/document.xml", paragraph, size, b"<w:body>")
    )
    return path


def expanding_xlsx(path: Path, size: int) -> Path:
    """An Excel file whose first row unpacks to `size` bytes of one-letter cells."""
    import openpyxl  # noqa: PLC0415

    template = io.BytesIO()
    book = openpyxl.Workbook()
    book.active.append(["first", "row"])
    book.save(template)
    cell = b'<c t="inlineStr"><is><t>x</t></is></c>'
    into = b'<row r="1">'
    path.write_bytes(_zip_with(template.getvalue(), "xl/worksheets/sheet1.xml", cell, size, into))
    return path


# -- this process -----------------------------------------------------------------------------


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        found = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    assert found is not None, field
    return int(found.group(1)) * 1024


@dataclass
class Growth:
    """How far this process's resident memory rose above where it was (bytes)."""

    peak: int = 0
    after: int = 0


@contextmanager
def resident_growth() -> Iterator[Growth]:
    """Measure the rise of this process's resident memory over the block, from /proc.

    The kernel's high-water mark (VmHWM) is reset first (`clear_refs` 5), so the peak is the
    block's own, however briefly it was reached.
    """
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    before = _status("VmRSS")
    growth = Growth()
    yield growth
    growth.peak = _status("VmHWM") - before
    growth.after = _status("VmRSS") - before


def process_gone(pid: int) -> bool:
    """Whether no process (not even a zombie) has this id."""
    return not os.path.exists(f"/proc/{pid}")


async def wait_until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll `check()` every 20 ms until true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
