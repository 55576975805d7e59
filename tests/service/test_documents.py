"""`parley serve --docs`: the `documents` assistant, its index built and kept current."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents import Agent
from parley.errors import ConfigurationError
from parley.messages import ToolResultBlock
from parley.models.testing import ScriptedModel
from parley.rag import DocumentIndex
from parley.service import ServiceSettings, create_app
from parley.service.cli import _export
from parley.service.documents import DocumentsService
from parley.tools.builtin import DocParser
from parley.tools.builtin._doc_pool import parser_pool
from tests._requires import require_module
from tests.service._live import running
from tests.tools._hostile import MIB, expanding_xlsx, inflating_pdf, resident_growth

HANDBOOK = """# Refund policy

Customers may return any item within 30 days of delivery. Refunds are paid to the original
payment method within 14 days after the returned item arrives at our warehouse in Lyon.
"""


def handbook_service(tmp_path: Path, **more: Any) -> tuple[Path, Path, ServiceSettings]:
    """`parley serve --docs` on a folder holding the handbook, keyword search only.

    The folder, where its index file goes (made by the service), and the settings.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text(HANDBOOK)
    location = tmp_path / "docs.sqlite"
    settings = ServiceSettings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'service.db'}",
        docs=[str(docs)],
        docs_index=str(location),
        docs_embedding="none",
        **more,
    )
    return docs, location, settings


def indexed(location: Path) -> list[str]:
    """The documents the index file holds now (read by a reader of our own)."""

    async def read() -> list[str]:
        index = await DocumentIndex.open(location, embedding_model=None)
        try:
            return sorted(Path(d.source).name for d in await index.documents())
        finally:
            await index.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, read()).result(timeout=30)


def found(location: Path, word: str) -> list[str]:
    """The documents of the index file whose text has `word`."""

    async def search() -> list[str]:
        index = await DocumentIndex.open(location, embedding_model=None)
        try:
            return sorted(Path(h.source).name for h in await index.search(word, mode="keyword"))
        finally:
            await index.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, search()).result(timeout=30)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_the_documents_agent_answers_and_its_index_follows_the_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_module("llama_cpp", "local")
    require_module("watchfiles", "rag")
    docs, location, settings = handbook_service(tmp_path)
    caplog.set_level(logging.INFO, logger="parley.service")
    with running(create_app(settings)) as url, httpx.Client(base_url=url, timeout=120) as api:
        info = api.get("/info").json()
        assert info["default_agent"] == "documents"
        assert [a["key"] for a in info["agents"]] == ["documents"]
        wait_until(lambda: indexed(location) == ["handbook.md"], "the first update")

        answer = api.post("/invoke", json={"message": "In which city is the warehouse?"})
        assert answer.status_code == 200, answer.text
        assert "Lyon" in answer.json()["content"]

        # A file added is indexed, a file removed dropped; no restart.
        (docs / "faq.md").write_text("# FAQ\n\nRefunds are handled by Maria in Porto.\n")
        wait_until(lambda: indexed(location) == ["faq.md", "handbook.md"], "the new file")
        # A file changed is indexed again: its old text gone, its new text found.
        (docs / "faq.md").write_text("# FAQ\n\nRefunds are handled by Jonas in Bergen.\n")
        wait_until(lambda: found(location, "Bergen") == ["faq.md"], "the changed file")
        assert found(location, "Porto") == []
        (docs / "handbook.md").unlink()
        wait_until(lambda: indexed(location) == ["faq.md"], "the removal")
    logged = caplog.text
    assert "indexed 1/1" in logged  # the start-up update shows its progress
    assert "1 added" in logged
    assert "1 updated" in logged
    assert "1 removed" in logged


def test_documents_built_to_pin_the_parser_fail_alone_and_cost_the_service_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_module("pypdf", "tools")
    require_module("openpyxl", "tools")
    docs, location, settings = handbook_service(
        tmp_path, docs_parse_timeout=3, docs_parse_memory_bytes=256 * MIB
    )
    inflating_pdf(docs / "inflating.pdf", pages=3)  # minutes of parsing, once
    expanding_xlsx(docs / "flood.xlsx", 40 * MIB)  # 2.5 GB in the parsing process, once
    caplog.set_level(logging.INFO, logger="parley.service")
    with running(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as api:
        with resident_growth() as growth:
            assert api.get("/info").status_code == 200  # answering while it parses
            wait_until(lambda: "documents index up to date" in caplog.text, "the update")
        assert indexed(location) == ["handbook.md"]
        assert api.get("/info").status_code == 200
    assert growth.peak < 64 * MIB
    logged = caplog.text
    assert "1 added, 0 updated, 0 unchanged, 0 removed, 2 failed" in logged
    # Each stopped at a limit of its parser. Which limit comes first depends on the machine's
    # speed (a loaded one parses the flood slower than it grows past 256 MiB):
    # tests/rag/test_parse_limits.py pins each reason; here what counts is that they fail
    # alone and cost the service nothing.
    limits = ("parsing it took longer than 3 seconds", "parsing it needed more memory than")
    for name in ("inflating.pdf", "flood.xlsx"):
        assert any(f"cannot read {name}: {reason}" in logged for reason in limits), name
    parser_pool(256 * MIB).close()


def test_a_hostile_pdf_read_over_http_stops_with_the_call_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    # The case: over HTTP the tool timed out while the parse went on in an abandoned
    # thread of the server, which stayed at 990 MB.
    require_module("pypdf", "tools")
    docs = tmp_path / "docs"
    docs.mkdir()
    inflating_pdf(docs / "report.pdf", pages=3)
    parser = DocParser({"root": str(docs)})
    parser.timeout = 2.0  # the toolkit's limit on the call (60 s by default)
    model = ScriptedModel(
        [ScriptedModel.tool_call("doc_parser", {"url": "report.pdf"}), "It could not be read."]
    )
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'service.db'}")
    app = create_app(settings, agents=[Agent("reader", model, tools=[parser])])
    pool = parser_pool(parser.limits.memory_bytes)
    with running(app) as url, httpx.Client(base_url=url, timeout=60) as api:
        with resident_growth() as growth:
            answer = api.post("/invoke", json={"message": "Summarize report.pdf"})
            # Its parser was killed with the call (else it would parse on for minutes).
            wait_until(lambda: pool.busy_pids == [], "the parser to be killed", timeout=20)
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"] == "It could not be read."
        result = model.requests[1].messages[-1].content[0]
        assert isinstance(result, ToolResultBlock)
        assert result.is_error
        assert str(result.output) == "doc_parser did not finish within 2.0 seconds"
        assert growth.peak < 64 * MIB
        assert growth.after < 64 * MIB


def test_docs_need_a_source_and_paths_are_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match="no documents"):
        DocumentsService(ServiceSettings(), lambda spec: None)  # type: ignore[arg-type,return-value]
    monkeypatch.chdir(tmp_path)
    # Set through monkeypatch first, so that what `_export` writes is undone after the test
    # (a `delenv` at its end would record the exported value, and restore it for later tests).
    monkeypatch.setenv("PARLEY_DOCS", "[]")
    import argparse  # noqa: PLC0415

    args = argparse.Namespace(agents=None, docs=["handbook", "https://example.com/faq"])
    _export(args)
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415

    assert json.loads(os.environ["PARLEY_DOCS"]) == [
        str(tmp_path / "handbook"),
        "https://example.com/faq",
    ]
