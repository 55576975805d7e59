"""Qwen-Agent's `simple_doc_parser`: one document (a path or URL) as text.

The file is copied into the tool's `work_dir` first, under `BaseToolWithFileAccess`'s
rules (local files only from `file_roots`, downloads only from public addresses), then parsed
by parley's document parser (PDF, Word, PowerPoint, Excel, CSV, HTML, Markdown, text) in its
own process and limits. The result is the plain text, pages apart by a blank line; with
`structured_doc` in the cfg, Qwen-Agent's page list (`[{"page_num", "content": [{"text"} or
{"table"}]}]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from parley.compat.qwen.tools._documents import pages, parse_copy, plain_text
from parley.compat.qwen.tools.base import BaseToolWithFileAccess, register_tool

__all__ = ["SimpleDocParser"]


@register_tool("simple_doc_parser")
class SimpleDocParser(BaseToolWithFileAccess):
    """Extracts a document's text (see the module docs; cfg as `BaseToolWithFileAccess`)."""

    description = (
        "Extract the content of one document. Supported types: pdf, docx, pptx, xlsx, csv, "
        "html, md, txt."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "The document's path or a downloadable http(s) link.",
            }
        },
        "required": ["url"],
    }

    def call(
        self, params: str | dict[str, Any], files: Sequence[str] | None = None, **kwargs: Any
    ) -> str | list[dict[str, Any]]:
        """Copy the document in and return its text (or its pages, with `structured_doc`)."""
        url = str(self._verify_json_format_args(params)["url"])
        (copy,) = self.copy_files([url])
        document = parse_copy(copy, self.work_dir)
        if self.cfg.get("structured_doc"):
            return pages(document)
        return plain_text(document)
