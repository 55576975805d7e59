"""Reading one document a model named (a path or URL) into text, within a tool's limits."""

from __future__ import annotations

from typing import Any

from parley._sync import run_sync
from parley.tools.builtin._doc_formats import Section
from parley.tools.builtin.doc_parser import ParsedDocument, aparse_document

__all__ = ["pages", "parse_copy", "plain_text"]

_KEYS = {"table": "table"}  # Qwen-Agent keys a page item as `text` or `table`


def parse_copy(path: str, work_dir: str, max_rows: int = 1000) -> ParsedDocument:
    """Parse a file already copied into `work_dir` (opened beneath it, links refused)."""
    return run_sync(aparse_document(path, roots=[work_dir], max_rows=max_rows))


def plain_text(document: ParsedDocument) -> str:
    """The document's text, its sections apart by a blank line (Qwen-Agent's plain doc)."""
    return "\n\n".join(_section_text(section) for section in document.sections if section.items)


def pages(document: ParsedDocument) -> list[dict[str, Any]]:
    """The document as Qwen-Agent's structured doc: `[{"page_num", "content"}]`."""
    return [
        {
            "page_num": section.number,
            "content": [{_KEYS.get(item.kind, "text"): item.text} for item in section.items],
        }
        for section in document.sections
    ]


def _section_text(section: Section) -> str:
    return "\n\n".join(item.text for item in section.items)
