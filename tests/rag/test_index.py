"""`DocumentIndex` with keyword search: every format in, incremental updates, bad input."""

from __future__ import annotations

import io
import os
import sqlite3
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from parley.errors import DocumentError, UserError
from parley.rag import DocumentIndex, SQLiteIndexStore, document_id
from parley.rag import index as index_module
from parley.tools.builtin import _doc_formats
from parley.tools.builtin._net import FetchPolicy
from tests._requires import require_module
from tests.tools._hostile import text_pdf
from tests.tools._web import Body, Redirect, Site, serve
from tests.tools.test_builtin_doc_parser import write_docx, write_pptx, write_xlsx

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with a document of every format."""
    docs = tmp_path / "docs"
    docs.mkdir()
    require_module("pypdf", "tools")
    text_pdf(
        docs / "manual.pdf",
        [
            ["Installing the pump", "Bolt it to the floor."],
            ["Servicing", "Replace the impeller yearly."],
        ],
    )
    write_docx(docs / "report.docx")
    write_pptx(docs / "deck.pptx")
    write_xlsx(docs / "book.xlsx")
    (docs / "prices.csv").write_text("item,price\nwidget,4\ngadget,9\n")
    (docs / "page.html").write_text(
        "<html><head><title>Holiday notice</title></head><body><p>The office closes on "
        "Friday.</p><script>var hidden = 'scriptword';</script></body></html>"
    )
    (docs / "guide.md").write_text("# Guide\n\nThe refund window is thirty days.\n")
    (docs / "notes.txt").write_text("Remember the milk.\n")
    return docs


@pytest.fixture(autouse=True)
def _local_model() -> None:
    require_module("onnxruntime", "embeddings")  # the default embedding model's runtime


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[DocumentIndex]:
    opened = await DocumentIndex.open(tmp_path / "index.db")
    yield opened
    await opened.close()


async def first(index: DocumentIndex, query: str) -> Any:
    hits = await index.search(query, top_k=1, mode="keyword")
    assert hits, f"nothing found for {query!r}"
    return hits[0]


async def test_every_format_is_indexed_with_where_its_text_is(
    index: DocumentIndex, folder: Path
) -> None:
    report = await index.sync(folder)
    assert len(report.added) == 8
    assert not report.failed

    pdf = await first(index, "impeller")
    assert (Path(pdf.source).name, pdf.page, pdf.mode) == ("manual.pdf", 2, "keyword")
    slide = await first(index, "budget ads")
    assert (Path(slide.source).name, slide.slide, slide.chunk.heading) == ("deck.pptx", 2, "Budget")
    sheet = await first(index, "rent")
    assert (Path(sheet.source).name, sheet.sheet) == ("book.xlsx", "Costs")
    word = await first(index, "revenue region")
    assert (Path(word.source).name, word.chunk.title) == ("report.docx", "Quarterly report")
    html = await first(index, "office closes")
    assert html.chunk.title == "Holiday notice"
    assert await index.search("scriptword", mode="keyword") == []  # a script is not the page's text
    assert Path((await first(index, "gadget")).source).name == "prices.csv"
    assert Path((await first(index, "refund window")).source).name == "guide.md"
    assert Path((await first(index, "milk")).source).name == "notes.txt"
    assert pdf.chunk_id == f"{document_id(pdf.source)}:{pdf.chunk.index}"


async def test_the_index_persists_and_answers_without_the_files(
    tmp_path: Path, folder: Path
) -> None:
    async with await DocumentIndex.open(tmp_path / "kept.db") as index:
        await index.sync(folder)
    for path in folder.iterdir():
        path.unlink()  # a search reads the index only: nothing is parsed again
    async with await DocumentIndex.open(tmp_path / "kept.db") as index:
        assert Path((await first(index, "impeller")).source).name == "manual.pdf"


def _rows(path: Path, source: str) -> list[tuple[Any, ...]]:
    """Every stored row of a document: its record and its chunks, ids included."""
    with sqlite3.connect(path) as db:
        doc = db.execute("SELECT * FROM documents WHERE source = ?", (source,)).fetchall()
        chunks = db.execute(
            "SELECT * FROM chunks WHERE doc_id = ? ORDER BY id", (document_id(source),)
        ).fetchall()
    return doc + chunks


async def test_sync_updates_changed_files_drops_removed_ones_and_leaves_the_rest(
    tmp_path: Path, folder: Path
) -> None:
    path = tmp_path / "index.db"
    index = await DocumentIndex.open(path)
    try:
        await index.sync(folder)
        guide, notes, report = (str(folder / n) for n in ("guide.md", "notes.txt", "report.docx"))
        before = {s: _rows(path, s) for s in (notes, report)}

        (folder / "guide.md").write_text("# Guide\n\nThe refund window is now sixty days.\n")
        (folder / "manual.pdf").unlink()
        (folder / "new.md").write_text("A brand new page about kayaks.\n")
        (folder / "notes.txt").touch()  # touched, same bytes: still unchanged
        result = await index.sync(folder)

        assert result.updated == [guide]
        assert result.removed == [str(folder / "manual.pdf")]
        assert result.added == [str(folder / "new.md")]
        assert sorted(result.unchanged) == sorted(
            str(p) for p in folder.iterdir() if p.name not in ("guide.md", "new.md")
        )
        assert (await first(index, "refund window")).text.endswith("sixty days.")
        assert await index.search("thirty", mode="keyword") == []
        assert await index.search("impeller", mode="keyword") == []
        assert Path((await first(index, "kayaks")).source).name == "new.md"
        # Unchanged documents were not rewritten: the same rows, the same ids, the same times.
        assert {s: _rows(path, s) for s in (notes, report)} == before
    finally:
        await index.close()


async def test_add_skips_the_same_bytes_and_redoes_documents_chunked_otherwise(
    tmp_path: Path, folder: Path
) -> None:
    path = tmp_path / "index.db"
    guide = folder / "guide.md"
    async with await DocumentIndex.open(path) as index:
        assert (await index.add(guide)).added == [str(guide)]
        assert (await index.add(str(guide))).unchanged == [str(guide)]
        assert (await index.add(f"file://{guide}")).unchanged == [str(guide)]  # one document
    async with await DocumentIndex.open(path, chunk_size=200) as index:
        assert (await index.add(guide)).updated == [str(guide)]
        assert [d.pipeline for d in await index.documents()] == [index.pipeline]


async def test_a_document_without_text_is_held_and_not_redone(
    index: DocumentIndex, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert (await index.add(empty)).added == [str(empty)]  # the first document, no vectors
    assert [d.chunk_count for d in await index.documents()] == [0]
    assert (await index.add(empty)).unchanged == [str(empty)]


async def test_remove_drops_documents_by_path(index: DocumentIndex, folder: Path) -> None:
    await index.sync(folder)
    assert await index.remove([folder / "notes.txt", folder / "absent.txt"]) == 1
    assert await index.search("milk", mode="keyword") == []
    assert len(await index.documents()) == 7


async def test_summary_questions_get_each_documents_opening_when_asked(
    index: DocumentIndex, folder: Path
) -> None:
    await index.add([folder / "guide.md", folder / "notes.txt"])
    question = "Please summarize the document"
    assert await index.search(question, mode="keyword") == []
    hits = await index.search(question, mode="keyword", front_page_fallback=True)
    assert [(Path(h.source).name, h.mode) for h in hits] == [
        ("guide.md", "front_page"),
        ("notes.txt", "front_page"),
    ]
    only = await index.search(
        "总结一下", sources=[folder / "notes.txt"], mode="keyword", front_page_fallback=True
    )
    assert [Path(h.source).name for h in only] == ["notes.txt"]


async def test_front_page_tokens_lead_with_a_lone_documents_opening(
    tmp_path: Path, folder: Path
) -> None:
    # Qwen-Agent's front_page_search beside keyword search (its default rag_searchers).
    manual = folder / "manual.md"
    manual.write_text(
        "# Manual\n\nThis manual covers the pump from delivery to its yearly service.\n\n"
        "Unpack the pump with care and keep every bolt that came in its box.\n\n"
        "Bolt the pump to a level concrete floor, away from walls and heat.\n\n"
        "The impeller is worn by sand and grit, so it is replaced every year."
    )
    async with await DocumentIndex.open(tmp_path / "i.db", chunk_size=16, chunk_overlap=0) as index:
        await index.add([manual, folder / "notes.txt"])
        chunks = await index.store.chunks(document_id(str(manual)))
        last = next(c.index for c in chunks if "impeller" in c.text)
        assert last >= 2  # past the two chunks of the front page

        async def found(**options: Any) -> list[tuple[int, str]]:
            hits = await index.search("impeller", mode="keyword", top_k=1, **options)
            return [(h.chunk.index, h.mode) for h in hits]

        impeller = (last, "keyword")
        lead = [(0, "front_page"), (1, "front_page")]
        assert await found(sources=[manual]) == [impeller]
        assert await found(sources=[manual], front_page_tokens=4000) == [*lead, impeller]
        # Beside another document it adds nothing, as in Qwen-Agent.
        both = [manual, folder / "notes.txt"]
        assert await found(sources=both, front_page_tokens=4000) == [impeller]
        # A first chunk longer than a quarter of the budget is left out, and what follows it.
        assert await found(sources=[manual], front_page_tokens=4 * chunks[0].tokens - 1) == [
            impeller
        ]
        # A hit that is also in the lead comes once.
        hits = await index.search(
            "manual pump", mode="keyword", sources=[manual], front_page_tokens=4000
        )
        assert [h.chunk.index for h in hits][:2] == [0, 1]
        assert len({h.chunk_id for h in hits}) == len(hits)
        # Without sources, the index's own documents count: one once notes.txt is gone.
        assert await found(front_page_tokens=4000) == [impeller]
        await index.remove(folder / "notes.txt")
        assert await found(front_page_tokens=4000) == [*lead, impeller]


async def test_a_folder_among_the_sources_stands_for_its_documents(
    index: DocumentIndex, folder: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "milk.txt").write_text("Buy milk on Monday.\n")
    await index.sync(folder)
    await index.sync(other)
    hits = await index.search("milk", mode="keyword", top_k=5, sources=[folder])
    assert [Path(h.source).name for h in hits] == ["notes.txt"]
    everywhere = await index.search("milk", mode="keyword", sources=[folder, other])
    assert {Path(h.source).name for h in everywhere} == {"notes.txt", "milk.txt"}
    # A folder's name is not a prefix of its neighbour's: docs does not hold docs2's files.
    (tmp_path / "docs2").mkdir()
    (tmp_path / "docs2" / "milk.md").write_text("Milk, again.\n")
    await index.sync(tmp_path / "docs2")
    hits = await index.search("milk", mode="keyword", top_k=5, sources=[folder])
    assert [Path(h.source).name for h in hits] == ["notes.txt"]


async def test_top_k_score_threshold_and_sources_narrow_the_hits(
    index: DocumentIndex, folder: Path
) -> None:
    for n in range(6):
        (folder / f"pump{n}.txt").write_text("pump " * (n + 1) + "filler words here")
    await index.sync(folder)
    hits = await index.search("pump", top_k=3, mode="keyword")
    assert [Path(h.source).name for h in hits] == ["pump5.txt", "pump4.txt", "pump3.txt"]
    cut = hits[1].score
    kept = await index.search("pump", top_k=10, score_threshold=cut, mode="keyword")
    assert [h.chunk_id for h in kept] == [h.chunk_id for h in hits[:2]]
    assert all(h.score >= cut for h in kept)
    narrowed = await index.search("pump", top_k=10, sources=[folder / "pump0.txt"], mode="keyword")
    assert [Path(h.source).name for h in narrowed] == ["pump0.txt"]


async def test_an_index_without_a_model_searches_keywords_only(
    tmp_path: Path, folder: Path
) -> None:
    async with await DocumentIndex.open(tmp_path / "kw.db", embedding_model=None) as index:
        await index.add(folder / "guide.md")
        assert (await index.search("refund"))[0].mode == "keyword"  # the default mode
        with pytest.raises(UserError, match="no embedding model"):
            await index.search("anything", mode="vector")
        with pytest.raises(UserError, match="no embedding model"):
            await index.search("anything", mode="hybrid")
        with pytest.raises(UserError, match="unknown search mode"):
            await index.search("anything", mode="fuzzy")  # type: ignore[arg-type]


def test_the_sync_twins_work_from_plain_code(tmp_path: Path, folder: Path) -> None:
    index = DocumentIndex.open_sync(tmp_path / "sync.db")
    try:
        assert len(index.sync_sync(folder).added) == 8
        assert index.add_sync(folder / "notes.txt").unchanged == [str(folder / "notes.txt")]
        assert (
            Path(index.search_sync("impeller", top_k=1, mode="keyword")[0].source).name
            == "manual.pdf"
        )
        assert index.remove_sync(folder / "notes.txt") == 1
        assert len(index.documents_sync()) == 7
    finally:
        index.close_sync()


def test_open_needs_a_path_or_a_store() -> None:
    with pytest.raises(UserError, match="either a path or a store"):
        DocumentIndex.open_sync()


# -- bad input ---------------------------------------------------------------------------------


@pytest.fixture
def site() -> Iterator[Site]:
    with serve() as running:
        yield running


async def test_bad_sources_fail_by_name_and_the_good_ones_are_indexed(
    tmp_path: Path, folder: Path, site: Site
) -> None:
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf")
    (folder / "broken.xlsx").write_bytes(b"PK\x03\x04 this is not really a workbook")
    (folder / "blob.bin").write_bytes(b"\x00\x01\x02binary\x00" * 10)
    (folder / "huge.txt").write_text("big " * 5000)
    site.routes["/doc.txt"] = Body(b"served text")
    index = await DocumentIndex.open(tmp_path / "index.db", max_file_bytes=10_000)
    try:
        await index.add(folder / "notes.txt")
        sources = [
            folder / "guide.md",
            folder / "missing.txt",
            folder / "broken.pdf",
            folder / "broken.xlsx",
            folder / "blob.bin",
            folder / "huge.txt",
            f"{site.base}/doc.txt",
            "ftp://example.com/file.txt",
            folder,
        ]
        with pytest.raises(DocumentError) as raised:
            await index.add(sources)

        message = str(raised.value)
        assert message.startswith("8 documents could not be indexed (1 others were):")
        expected = {
            folder / "missing.txt": "no such file",
            folder / "broken.pdf": "as pdf",
            folder / "broken.xlsx": "as xlsx",
            folder / "blob.bin": "its format is not one of",
            folder / "huge.txt": "more than the 10000 this index reads",
            f"{site.base}/doc.txt": "a loopback address",
            "ftp://example.com/file.txt": "give a path, a file:// URL or an http(s) URL",
            folder: "it is a folder",
        }
        for source, reason in expected.items():
            line = next(line for line in message.splitlines() if f" {source}: " in line)
            assert reason in line, line
        assert raised.value.source == str(folder / "missing.txt")
        # What was indexed before, and the good one of this call, are there.
        assert {Path(d.source).name for d in await index.documents()} == {"notes.txt", "guide.md"}
        assert site.seen == []  # the private address was refused before any connection
    finally:
        await index.close()


async def test_a_single_failure_is_raised_as_itself_and_report_mode_returns_it(
    index: DocumentIndex, folder: Path
) -> None:
    with pytest.raises(DocumentError, match=r"missing\.txt: no such file") as raised:
        await index.add(folder / "missing.txt")
    assert raised.value.source == str(folder / "missing.txt")
    report = await index.add([folder / "missing.txt", folder / "notes.txt"], errors="report")
    assert list(report.failed) == [str(folder / "missing.txt")]
    assert report.added == [str(folder / "notes.txt")]


async def test_a_corrupt_new_version_keeps_the_old_one(index: DocumentIndex, folder: Path) -> None:
    await index.add(folder / "manual.pdf")
    (folder / "manual.pdf").write_bytes(b"%PDF-1.4\ngarbage")
    with pytest.raises(DocumentError, match=r"manual\.pdf"):
        await index.add(folder / "manual.pdf")
    assert Path((await first(index, "impeller")).source).name == "manual.pdf"


async def test_urls_are_indexed_when_the_policy_allows_their_host(
    tmp_path: Path, site: Site
) -> None:
    site.routes["/faq"] = Body(
        b"<html><title>FAQ</title><p>Parcels ship daily.</p></html>", "text/html"
    )
    policy = FetchPolicy(allowed_hosts=("127.0.0.1",), max_bytes=10_000)
    async with await DocumentIndex.open(tmp_path / "i.db", fetch_policy=policy) as index:
        url = f"{site.base}/faq"
        assert (await index.add(url)).added == [url]
        hit = await first(index, "parcels")
        assert (hit.source, hit.chunk.title) == (url, "FAQ")
        assert (await index.add(url)).unchanged == [url]


async def test_a_url_redirecting_to_a_private_address_or_too_large_is_refused(
    tmp_path: Path, site: Site
) -> None:
    site.routes["/moved"] = Redirect("http://169.254.169.254/latest/meta-data/")
    site.routes["/big"] = Body(b"word " * 1000)
    # The policy's own cap is larger: the index's max_file_bytes still holds.
    policy = FetchPolicy(allowed_hosts=("127.0.0.1",), max_bytes=1_000_000)
    async with await DocumentIndex.open(
        tmp_path / "i.db", fetch_policy=policy, max_file_bytes=1000, embedding_model=None
    ) as index:
        report = await index.add([f"{site.base}/moved", f"{site.base}/big"], errors="report")
        moved, big = (str(report.failed[f"{site.base}/{p}"]) for p in ("moved", "big"))
        assert "169.254.169.254 is a link-local address" in moved
        assert "redirected there from" in moved
        assert "larger than 1000 bytes" in big
        assert await index.documents() == []


async def test_roots_confine_the_paths_an_index_reads(tmp_path: Path, folder: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("password")
    async with await DocumentIndex.open(tmp_path / "i.db", roots=[folder]) as index:
        await index.add(folder / "notes.txt")
        with pytest.raises(DocumentError, match=r"secret\.txt"):
            await index.add(outside)
        assert await index.search("password", mode="keyword") == []


async def test_sync_reads_regular_files_only_and_never_leaves_the_folder(
    tmp_path: Path, folder: Path
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "key.txt").write_text("password hunter2")
    (folder / "key.txt").symlink_to(secrets / "key.txt")
    (folder / "linked").symlink_to(secrets, target_is_directory=True)
    os.mkfifo(folder / "pipe.txt")  # reading a FIFO would wait for a writer forever
    (folder / ".hidden.md").write_text("password in a hidden file")
    (folder / ".git").mkdir()
    (folder / ".git" / "notes.md").write_text("password in git")
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        report = await index.sync(folder)
        assert len(report.added) == 8
        assert not report.failed
        assert await index.search("password", mode="keyword") == []
        # Named directly, a FIFO is refused at once, not waited on.
        with pytest.raises(DocumentError, match=r"pipe\.txt: it is a device, FIFO or socket"):
            await index.add(folder / "pipe.txt")


async def test_a_file_swapped_for_a_link_after_the_listing_is_not_followed(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password hunter2")
    listed = index_module._supported_files

    def list_then_swap(root: Path) -> list[str]:
        found = listed(root)
        (folder / "notes.txt").unlink()  # between the listing and the read
        (folder / "notes.txt").symlink_to(secret)
        return found

    monkeypatch.setattr(index_module, "_supported_files", list_then_swap)
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        report = await index.sync(folder, errors="report")
        [(_, refusal)] = report.failed.items()  # named by where the link leads
        assert "outside the allowed folders" in str(refusal)
        assert len(report.added) == 7
        assert await index.search("password", mode="keyword") == []


def _zip_bomb(path: Path, grown: int) -> Path:
    """A copy of the Word file at `path` whose text part holds `grown` more bytes of XML."""
    packed = path.read_bytes()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb:
        original = zipfile.ZipFile(io.BytesIO(packed))
        for info in original.infolist():
            data = original.read(info.filename)
            if info.filename == "word/document.xml":
                head, body, tail = data.partition(b"<w:body>")
                para = b"<w:p><w:r><w:t>flood</w:t></w:r></w:p>"
                data = head + body + para * (grown // len(para)) + tail
            bomb.writestr(info.filename, data)
    return path


async def test_a_zip_bomb_is_refused_before_it_is_unpacked(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(_doc_formats.MAX_UNPACKED_BYTES, "docx", 1024 * 1024)
    bomb = _zip_bomb(folder / "report.docx", 2 * 1024 * 1024)
    assert bomb.stat().st_size < 100_000
    # Pictures are stored about as large as they are: they do not count as growth.
    pictures = write_docx(folder / "pictures.docx")
    with zipfile.ZipFile(pictures, "a") as archive:
        archive.writestr("word/media/photo.jpeg", os.urandom(2 * 1024 * 1024))
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        report = await index.add([bomb, pictures], errors="report")
        assert list(report.failed) == [str(bomb)]
        assert "unpacks to" in str(report.failed[str(bomb)])
        assert report.added == [str(pictures)]


async def test_a_spreadsheet_of_many_rows_is_read_to_max_rows_only(
    tmp_path: Path, folder: Path
) -> None:
    openpyxl = require_module("openpyxl", "tools")
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Log")
    for row in range(3000):
        sheet.append([f"entry{row}", row])
    book.save(folder / "log.xlsx")
    async with await DocumentIndex.open(
        tmp_path / "i.db", embedding_model=None, max_rows=100
    ) as index:
        await index.add(folder / "log.xlsx")
        assert await index.search("entry99", mode="keyword")
        assert await index.search("entry100", mode="keyword") == []
        last = (await index.store.chunks(document_id(str(folder / "log.xlsx"))))[-1]
        assert last.text.endswith("[... more rows, not read]")


async def test_an_index_store_can_be_given(tmp_path: Path, folder: Path) -> None:
    store = await SQLiteIndexStore.open(tmp_path / "own.db")
    index = await DocumentIndex.open(store=store)
    await index.add(folder / "notes.txt")
    await index.close()
    reopened = await DocumentIndex.open(tmp_path / "own.db")
    try:
        assert len(await reopened.documents()) == 1
    finally:
        await reopened.close()
