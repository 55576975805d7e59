"""Indexing documents built to pin the parser: one fails at its limit, the rest are indexed.

Parsing runs in real parser processes (`_doc_pool`); this process's resident memory is read
from /proc. Before, the index parsed in a thread of this process, where an inflating PDF
ran on for minutes and an expanding Excel file took 2.5 GB.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from parley.errors import DocumentError
from parley.rag import DocumentIndex, document_id
from parley.tools.builtin import ParseLimits
from parley.tools.builtin._doc_pool import parser_pool
from tests._requires import require_module
from tests.tools import _hostile as hostile

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _libraries() -> None:
    for module in ("pypdf", "openpyxl"):
        require_module(module, "tools")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    hostile.many_pages_pdf(docs / "report.pdf", 2)
    (docs / "guide.md").write_text("# Guide\n\nThe refund window is thirty days.\n")
    return docs


async def test_a_parse_stopped_at_its_limit_fails_its_document_only_and_loses_nothing(
    tmp_path: Path, folder: Path
) -> None:
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        assert len((await index.sync(folder)).added) == 2
    # The report is replaced by a hostile one, a spreadsheet that expands arrives, and a
    # note that reads fine.
    hostile.inflating_pdf(folder / "report.pdf", pages=3)
    hostile.expanding_xlsx(folder / "flood.xlsx", 40 * hostile.MIB)
    (folder / "notes.md").write_text("Call the supplier on Monday.\n")
    limits = ParseLimits(timeout=3, memory_bytes=256 * hostile.MIB)
    async with await DocumentIndex.open(
        tmp_path / "i.db", embedding_model=None, parse_limits=limits
    ) as index:
        with hostile.resident_growth() as growth:
            report = await index.sync(folder, errors="report")
        assert growth.peak < hostile.GROWTH_BOUND
        assert sorted(Path(s).name for s in report.failed) == ["flood.xlsx", "report.pdf"]
        pdf = report.failed[str(folder / "report.pdf")]
        assert isinstance(pdf, DocumentError)
        assert str(pdf) == (
            f"cannot index {folder / 'report.pdf'}: cannot read report.pdf: parsing it took "
            "longer than 3 seconds (the parser's timeout), so it was stopped"
        )
        assert "needed more memory than the 256 MiB a parser may use" in str(
            report.failed[str(folder / "flood.xlsx")]
        )
        assert [Path(s).name for s in report.added] == ["notes.md"]
        assert [Path(s).name for s in report.unchanged] == ["guide.md"]
        # What the index held of the report before is still there, whole.
        hits = await index.search("Page", mode="keyword", sources=[folder / "report.pdf"])
        assert sorted(h.text.splitlines()[-1] for h in hits) == ["Page 1", "Page 2"]
        assert await index.search("supplier", mode="keyword")
    parser_pool(limits.memory_bytes).close()


async def test_a_document_past_max_pages_is_indexed_in_part_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = hostile.many_pages_pdf(tmp_path / "long.pdf", 60)
    caplog.set_level(logging.WARNING, logger="parley.rag")
    async with await DocumentIndex.open(
        tmp_path / "i.db", embedding_model=None, parse_limits=ParseLimits(max_pages=10)
    ) as index:
        report = await index.add(path)
        assert report.added == [str(path)]
        pages = {h.page for h in await index.search("Page", mode="keyword", top_k=100)}
        assert pages == set(range(1, 11))
    assert (
        f"only part of {path} is indexed: Only pages 1-10 of 60 were read "
        "(the limit max_pages)." in caplog.text
    )


async def test_cancelling_an_update_kills_its_parser(tmp_path: Path) -> None:
    path = hostile.inflating_pdf(tmp_path / "slow.pdf", pages=3)
    pool = parser_pool(ParseLimits().memory_bytes)
    before = set(pool.busy_pids)
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        task = asyncio.create_task(index.add(path))
        found: list[int] = []

        def started() -> bool:
            found[:] = [p for p in pool.busy_pids if p not in before]
            return bool(found)

        await hostile.wait_until(started, "a parser to take the PDF")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await hostile.wait_until(lambda: hostile.process_gone(found[0]), "the parser to be gone")
        assert await index.documents() == []


async def test_sources_read_ahead_are_reported_in_their_order_and_a_repeat_stored_once(
    tmp_path: Path, folder: Path
) -> None:
    # Up to three sources are read and parsed at once, while the one before is stored.
    names = [f"n{number}.md" for number in range(7)]
    for number, name in enumerate(names):
        (folder / name).write_text(f"Note {number} about topic{number}.\n")
    sources = [folder / name for name in names]
    told: list[str] = []
    async with await DocumentIndex.open(tmp_path / "i.db", embedding_model=None) as index:
        report = await index.add(
            [*sources, sources[2], folder / "missing.md"],
            errors="report",
            progress=lambda done, total, source: told.append(f"{done}/{total} {Path(source).name}"),
        )
        assert report.added == [str(s) for s in sources]
        assert report.unchanged == [str(sources[2])]
        assert list(report.failed) == [str(folder / "missing.md")]
        assert len(await index.store.chunks(document_id(str(sources[2])))) == 1
    assert told == [f"{n}/9 {name}" for n, name in enumerate([*names, "n2.md", "missing.md"], 1)]
