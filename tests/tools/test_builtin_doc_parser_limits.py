"""Documents built to pin the parser stop at its limits, and never cost this process.

Every document here is parsed by real parser processes (`_doc_pool`); this process's
resident memory is read from /proc (its high-water mark reset before each parse), and a
parser's end is seen in /proc too. Parsed in this process, as before, the PDF took 80 s and
420 MB a page, the Word file 1.2 GB and the Excel file 2.5 GB.
"""

from __future__ import annotations

import asyncio
import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from parley.messages import ToolCallBlock
from parley.tools import Toolkit
from parley.tools.builtin import DocParser, ParseLimitError, ParseLimits, _confine, parse_document
from parley.tools.builtin._doc_pool import parser_pool
from parley.tools.builtin._doc_process import WORKER_SCRIPT, config
from parley.tools.builtin.doc_parser import aparse_document
from parley.tools.builtin.sandbox import SANDBOX_USER, drops_root
from tests._requires import require_module
from tests.tools._hostile import (
    GROWTH_BOUND,
    MIB,
    bloated_pdf_page,
    expanding_docx,
    expanding_xlsx,
    inflating_pdf,
    many_pages_pdf,
    process_gone,
    resident_growth,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _libraries() -> None:
    for module in ("pypdf", "docx", "openpyxl"):
        require_module(module, "tools")


def test_a_pdf_whose_pages_inflate_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    path = inflating_pdf(tmp_path / "inflating.pdf", pages=3)
    assert path.stat().st_size < 120 * 1024
    with resident_growth() as growth, pytest.raises(ParseLimitError) as raised:
        parse_document(str(path), limits=ParseLimits(timeout=2))
    assert str(raised.value) == (
        "cannot read inflating.pdf: parsing it took longer than 2 seconds (the parser's "
        "timeout), so it was stopped"
    )
    assert growth.peak < GROWTH_BOUND
    assert parser_pool(ParseLimits().memory_bytes).busy_pids == []


def test_a_page_past_the_memory_limit_fails_naming_the_limit(tmp_path: Path) -> None:
    path = bloated_pdf_page(tmp_path / "bloated.pdf")
    limits = ParseLimits(memory_bytes=192 * MIB)
    with resident_growth() as growth, pytest.raises(ParseLimitError) as raised:
        parse_document(str(path), limits=limits)
    assert str(raised.value).startswith(
        "cannot read bloated.pdf: parsing it needed more memory than the 192 MiB a parser "
        "may use (memory_bytes), so it was stopped"
    )
    assert growth.peak < GROWTH_BOUND
    # The process that ran out is gone; the next document gets a fresh one and parses.
    small = many_pages_pdf(tmp_path / "small.pdf", 1)
    assert parse_document(str(small), limits=limits).to_text().endswith("Page 1")
    parser_pool(limits.memory_bytes).close()


@pytest.mark.parametrize(
    ("name", "build"),
    [("flood.docx", expanding_docx), ("flood.xlsx", expanding_xlsx)],
)
def test_an_office_file_that_expands_is_stopped_at_the_memory_limit(
    tmp_path: Path, name: str, build: object
) -> None:
    # Within the unpacked-size caps (64 MiB for Word, 128 for Excel), but far more in memory.
    path = build(tmp_path / name, 40 * MIB)  # type: ignore[operator]
    assert path.stat().st_size < 400 * 1024
    limits = ParseLimits(memory_bytes=256 * MIB)
    with resident_growth() as growth, pytest.raises(ParseLimitError) as raised:
        parse_document(str(path), limits=limits)
    assert f"cannot read {name}: parsing it needed more memory than the 256 MiB" in str(
        raised.value
    )
    assert growth.peak < GROWTH_BOUND
    parser_pool(limits.memory_bytes).close()


def test_thousands_of_pages_are_read_to_max_pages_and_the_text_says_so(tmp_path: Path) -> None:
    path = many_pages_pdf(tmp_path / "long.pdf", 3000)
    document = parse_document(str(path), limits=ParseLimits(max_pages=40))
    assert [s.number for s in document.sections] == list(range(1, 41))
    assert document.note == "Only pages 1-40 of 3000 were read (the limit max_pages)."
    text = document.to_text()
    assert text.startswith(
        "Document: long.pdf (PDF, 40 pages)\n\n"
        "[Only pages 1-40 of 3000 were read (the limit max_pages).]\n\n"
        "--- page 1 ---\n\nPage 1"
    )
    assert text.endswith("--- page 40 ---\n\nPage 40")


def test_a_text_file_too_big_is_read_to_max_text_chars_and_the_text_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "huge.txt"
    paragraph = "word " * 199 + "word\n\n"  # 1,000 characters and a blank line
    with path.open("w") as out:
        for _ in range(30_000):  # 30 MB
            out.write(paragraph)
    with resident_growth() as growth:
        document = parse_document(str(path), limits=ParseLimits(max_text_chars=1_000_000))
    assert document.note == (
        "Only the first 1000000 characters were read (the limit max_text_chars)."
    )
    assert sum(len(item.text) for item in document.sections[0].items) == 1_000_000
    assert growth.peak < GROWTH_BOUND
    # The tool reads only what it can show (`max_chars`): the same note, sooner.
    parser = DocParser({"root": str(tmp_path), "max_chars": 5000})
    text = parser.call({"url": "huge.txt"})
    assert isinstance(text, str)
    assert "[Only the first 5000 characters were read (the limit max_text_chars).]" in text
    assert text.endswith("more characters not shown]")


def test_ordinary_documents_are_whole_and_say_nothing(tmp_path: Path) -> None:
    path = many_pages_pdf(tmp_path / "short.pdf", 3)
    document = parse_document(str(path))
    assert document.note is None
    assert document.to_text() == (
        "Document: short.pdf (PDF, 3 pages)\n\n--- page 1 ---\n\nPage 1\n\n"
        "--- page 2 ---\n\nPage 2\n\n--- page 3 ---\n\nPage 3"
    )


def test_the_limits_are_the_tools_configuration(tmp_path: Path) -> None:
    parser = DocParser({"root": str(tmp_path), "parse_timeout": 5, "parse_memory_bytes": 300 * MIB})
    assert parser.limits == ParseLimits(
        timeout=5, memory_bytes=300 * MIB, max_pages=1000, max_text_chars=100_000
    )
    structured = DocParser({"root": str(tmp_path), "structured_doc": True, "max_pages": 9})
    assert structured.limits == ParseLimits(max_pages=9)
    assert ParseLimits() == ParseLimits(
        timeout=120, memory_bytes=1024 * MIB, max_pages=1000, max_text_chars=5_000_000
    )


# -- a call that gives up takes its parser with it ----------------------------------------------


async def _busy_parser(pool_pids: object, before: set[int]) -> int:
    found: list[int] = []

    def started() -> bool:
        found[:] = [p for p in pool_pids() if p not in before]  # type: ignore[operator]
        return bool(found)

    await wait_until(started, "a parser process to take the document")
    return found[0]


async def test_a_cancelled_call_kills_its_parser(tmp_path: Path) -> None:
    inflating_pdf(tmp_path / "slow.pdf", pages=3)
    parser = DocParser({"root": str(tmp_path)})
    pool = parser_pool(parser.limits.memory_bytes)
    before = set(pool.busy_pids)
    with resident_growth() as growth:
        task = asyncio.create_task(parser.acall({"url": "slow.pdf"}))
        pid = await _busy_parser(lambda: pool.busy_pids, before)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: process_gone(pid), f"parser {pid} to be gone")
    assert pid not in pool.pids
    assert growth.after < GROWTH_BOUND


async def test_a_call_past_the_tools_timeout_kills_its_parser(tmp_path: Path) -> None:
    inflating_pdf(tmp_path / "slow.pdf", pages=3)
    parser = DocParser({"root": str(tmp_path)})
    parser.timeout = 1.0  # the toolkit's limit on the call, well below the parse's own
    pool = parser_pool(parser.limits.memory_bytes)
    before = set(pool.busy_pids)
    call = ToolCallBlock(id="1", name="doc_parser", input={"url": "slow.pdf"})
    task = asyncio.create_task(Toolkit([parser]).run(call))
    pid = await _busy_parser(lambda: pool.busy_pids, before)
    result = await task
    assert result.is_error
    assert str(result.output) == "doc_parser did not finish within 1.0 seconds"
    await wait_until(lambda: process_gone(pid), f"parser {pid} to be gone")
    # The next call gets a parser at once and reads its document.
    (tmp_path / "ok.md").write_text("Fine.")
    again = await Toolkit([parser]).run(
        ToolCallBlock(id="2", name="doc_parser", input={"url": "ok.md"})
    )
    assert str(again.output) == "Document: ok.md (Markdown)\n\nFine."


async def test_calls_beyond_the_pool_wait_and_a_cancelled_wait_starts_nothing(
    tmp_path: Path,
) -> None:
    inflating_pdf(tmp_path / "slow.pdf", pages=3)
    ok = str(many_pages_pdf(tmp_path / "ok.pdf", 1))
    limits = ParseLimits(memory_bytes=1024 * MIB + 8192)  # a pool of its own
    pool = parser_pool(limits.memory_bytes)
    slow = [
        asyncio.create_task(aparse_document(str(tmp_path / "slow.pdf"), limits=limits))
        for _ in range(pool.max_workers)
    ]
    await wait_until(lambda: len(pool.busy_pids) == pool.max_workers, "every parser busy")
    waiting = asyncio.create_task(aparse_document(ok, limits=limits))
    await asyncio.sleep(0.2)
    assert not waiting.done()  # no parser free for it: the slow ones take minutes
    waiting.cancel()
    busy = pool.busy_pids
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, waiting, return_exceptions=True)
    await wait_until(lambda: all(process_gone(p) for p in busy), "the parsers to be gone")
    assert pool.pids == []  # the cancelled wait started none
    document = await aparse_document(ok, limits=limits)
    assert document.to_text().endswith("--- page 1 ---\n\nPage 1")
    pool.close()


def test_a_parser_started_by_a_large_process_is_kept_for_the_next_document(
    tmp_path: Path,
) -> None:
    # Linux carries a process's peak memory (ru_maxrss) across execve: a parser started by
    # a server that once held 300 MB looked that large and was closed after each document.
    held = b"x" * (300 * MIB)
    del held
    limits = ParseLimits(memory_bytes=1024 * MIB + 16384)  # a pool of its own, started now
    pool = parser_pool(limits.memory_bytes)
    path = str(many_pages_pdf(tmp_path / "a.pdf", 1))
    try:
        parse_document(path, limits=limits)
        first = pool.pids
        parse_document(path, limits=limits)
        assert pool.pids == first
        assert len(first) == 1
    finally:
        pool.close()


# -- what a parser process may do ---------------------------------------------------------------


def _proc(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text(errors="replace")


def test_a_parser_runs_with_limits_a_bare_environment_and_the_machines_confinement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_TEST_SECRET", "SECRET-123")  # what a parser must not see
    limits = ParseLimits(memory_bytes=1024 * MIB + 12288)  # a pool of its own, started now
    pool = parser_pool(limits.memory_bytes)
    try:
        parse_document(str(many_pages_pdf(tmp_path / "a.pdf", 1)), limits=limits)
        [pid] = pool.pids
        rlimits = _proc(pid, "limits")
        assert f"Max address space         {limits.memory_bytes}" in rlimits
        assert "Max file size             0" in rlimits
        assert "Max core file size        0" in rlimits
        environment = _proc(pid, "environ").split("\0")
        assert sorted(filter(None, environment)) == ["LANG=C.UTF-8", "LC_ALL=C.UTF-8"]
        status = _proc(pid, "status")
        if drops_root():
            assert pool.layers["uid"] == SANDBOX_USER
            assert f"Uid:\t{SANDBOX_USER}\t{SANDBOX_USER}\t{SANDBOX_USER}" in status
        if _confine.seccomp_supported():
            assert pool.layers["seccomp"] is True
            assert "Seccomp:\t2" in status
            assert "NoNewPrivs:\t1" in status
        if _confine.landlock_abi() >= 1:
            assert pool.layers["landlock"] is True
    finally:
        pool.close()


_ATTEMPTS = """
import json, os, signal, socket, sys
import importlib.util
script, config, secret, scratch = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
spec = importlib.util.spec_from_file_location("doc_worker", script)
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
worker.apply_limits(config["memory_bytes"])
worker.confine(config)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE: EFBIG, not death
def attempt(action):
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0
def fork():
    if os.fork() == 0:
        os._exit(0)
print(json.dumps({
    "read": attempt(lambda: open(secret).read()),
    "write": attempt(lambda: open(os.path.join(scratch, "planted"), "w").write("x")),
    "socket": attempt(lambda: socket.socket()),
    "fork": attempt(fork),
    "signal": attempt(lambda: os.kill(os.getppid(), 0)),
}))
"""


def test_a_parser_taken_over_by_a_document_reaches_nothing(tmp_path: Path) -> None:
    # What the kernel lets a parser do if a document took it over: run the worker's own
    # limits and confinement, then try what an exploit would.
    secret = tmp_path / "secret.env"
    secret.write_text("API_KEY=SECRET-123\n")
    secret.chmod(0o600)
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o777)
    scratch.chmod(0o777)
    settings = json.dumps(config(512 * MIB, 60.0))
    argv = [sys.executable, "-I", "-c", _ATTEMPTS, str(WORKER_SCRIPT), settings, str(secret)]
    done = subprocess.run(
        [*argv, str(scratch)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = json.loads(done.stdout)
    denied = {errno.EACCES, errno.EPERM}
    if _confine.landlock_abi() >= 1:
        assert results["read"] in denied
    assert results["write"] in {errno.EFBIG, *denied}  # no file may grow past 0 bytes
    if _confine.seccomp_supported():
        assert results["socket"] == errno.EPERM
        assert results["fork"] == errno.EPERM
        assert results["signal"] == errno.EPERM


def test_short_text_is_read_here_and_anything_else_by_a_parser(tmp_path: Path) -> None:
    # A text or Markdown file is decoded and split at blank lines: nothing in it can inflate,
    # so up to 256 KiB it is read in this process (a round trip costs more than the reading).
    limits = ParseLimits(memory_bytes=1024 * MIB + 20480)  # a pool of its own
    pool = parser_pool(limits.memory_bytes)
    short = tmp_path / "short.md"
    short.write_text("# Notes\n\nShort.")
    longer = tmp_path / "longer.txt"
    longer.write_text("word " * 60_000)  # 300 KB
    page = many_pages_pdf(tmp_path / "page.pdf", 1)
    try:
        assert parse_document(str(short), limits=limits).to_text() == (
            "Document: short.md (Markdown)\n\n# Notes\n\nShort."
        )
        assert pool.pids == []
        assert (
            parse_document(str(longer), limits=limits)
            .sections[0]
            .items[0]
            .text.startswith("word word")
        )
        assert len(pool.pids) == 1
        assert parse_document(str(page), limits=limits).to_text().endswith("Page 1")
    finally:
        pool.close()
