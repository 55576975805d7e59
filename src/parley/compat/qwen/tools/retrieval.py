"""Qwen-Agent's `retrieval`: the passages of some files that match a query.

The model (or Qwen-Agent's memory agent) names the files; each is copied into the tool's
`work_dir` under `BaseToolWithFileAccess`'s rules (local files only from `file_roots`,
downloads only from public addresses), indexed by `parley.rag` (a persistent index, so a
file read once is not parsed again) and searched as the cfg says (Qwen-Agent's keys:
`max_ref_token`, `parser_page_size`, `rag_searchers`, and parley's `rag_cfg` keys such as
`index_path`, `top_k`, `retrieval_type`). The result is Qwen-Agent's: one `{"url", "text":
[passages]}` per file that had a match, the best file first, within `max_ref_token` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from parley._sync import run_sync
from parley.agents.budget import text_token_counter
from parley.compat.qwen._rag import RAG_CFG_KEYS, RagSettings, open_index
from parley.compat.qwen.tools.base import BaseToolWithFileAccess, register_tool
from parley.rag.types import SearchHit

__all__ = ["Retrieval"]


@register_tool("retrieval")
class Retrieval(BaseToolWithFileAccess):
    """Searches the given files for a query (see the module docs)."""

    description = (
        "Retrieve the content relevant to a question from the given files. Supported types: "
        "pdf, docx, pptx, xlsx, csv, html, md, txt."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Key words, comma-separated, to find the relevant content by.",
            },
            "files": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The files: local paths or downloadable http(s) links.",
            },
        },
        "required": ["query", "files"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        # The index's keys of the cfg (the others are BaseToolWithFileAccess's, or ignored
        # as Qwen-Agent ignores them).
        self.settings = RagSettings.read({k: v for k, v in self.cfg.items() if k in RAG_CFG_KEYS})

    def call(
        self, params: str | dict[str, Any], files: Sequence[str] | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Copy the files in, index them, and return the matching passages by file."""
        arguments = self._verify_json_format_args(params)
        named = [str(f) for f in arguments.get("files") or []]
        if not named:
            return []
        copies = self.copy_files(named)
        original = dict(zip(copies, named, strict=True))
        index = open_index(copies, self.settings)
        try:
            hits = run_sync(
                index.search(
                    str(arguments["query"]),
                    mode=self.settings.mode,
                    top_k=self.settings.top_k,
                    score_threshold=self.settings.score_threshold,
                    sources=copies,
                    front_page_tokens=self.settings.front_page_tokens,
                    front_page_fallback=True,
                )
            )
        finally:
            run_sync(index.close())
        return _by_file(hits, original, self.settings.max_ref_token)


def _by_file(
    hits: Sequence[SearchHit], original: dict[str, str], max_tokens: int
) -> list[dict[str, Any]]:
    count = text_token_counter()
    records: dict[str, list[str]] = {}
    used = 0
    for hit in hits:
        tokens = count(hit.text)
        if used + tokens > max_tokens and records:
            break
        used += tokens
        records.setdefault(original.get(hit.source, hit.source), []).append(hit.text.strip())
    return [{"url": url, "text": texts} for url, texts in records.items()]
