"""`RetrievalTool`: a `DocumentIndex` as a tool any agent can call.

The model asks with a `query`; the tool answers with the best passages, numbered, each under
a line naming where it comes from, so the model can cite `[1]` and a reader can check it:

    [1] handbook.pdf, page 3
    Refunds are handled within 14 days ...

    [2] faq.html: Shipping
    ...

The web page shows those lines of a `retrieval` result as the answer's sources. Passages are
added best first until `max_ref_token` tokens (Qwen-Agent's budget for knowledge, 4000);
a passage that would pass it is cut at a word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from parley._terminal import visible
from parley.agents.budget import text_token_counter
from parley.rag.index import DocumentIndex
from parley.rag.types import SearchHit, SearchMode
from parley.tools.base import Tool

__all__ = [
    "RETRIEVAL_TOOL_NAME",
    "RetrievalTool",
    "citations",
    "cite",
    "format_hits",
    "location",
    "source_name",
    "visible",
]

RETRIEVAL_TOOL_NAME = "retrieval"
"""The tool's name, as Qwen-Agent names its own."""

NO_RESULTS = "No passage of the documents matches the query."


def source_name(hit: SearchHit) -> str:
    """The passage's document as a reader names it: the file's name, or the URL."""
    source = hit.chunk.source
    return source if "://" in source else Path(source).name


def location(hit: SearchHit) -> str:
    """Where in its document a passage is: page, slide or sheet, then its heading.

    Empty when neither is known.
    """
    chunk = hit.chunk
    if chunk.page is not None:
        place = f"page {chunk.page}"
    elif chunk.slide is not None:
        place = f"slide {chunk.slide}"
    elif chunk.sheet is not None:
        place = f"sheet {chunk.sheet}"
    else:
        place = ""
    if chunk.heading:
        return f"{place}: {chunk.heading}" if place else chunk.heading
    return place


def cite(hit: SearchHit) -> str:
    """Where a passage comes from, in a line: `manual.pdf, page 2: Cleaning`.

    The file (or URL), then page, slide or sheet, then the heading, each when known.
    """
    place = location(hit)
    if not place:
        return visible(source_name(hit))
    separator = ": " if place == hit.chunk.heading else ", "
    return visible(f"{source_name(hit)}{separator}{place}")


def format_hits(hits: Sequence[SearchHit], max_tokens: int) -> str:
    """The passages as the tool returns them, numbered, within `max_tokens` tokens."""
    if not hits:
        return NO_RESULTS
    count = text_token_counter()
    parts: list[str] = []
    used = 0
    for number, hit in enumerate(hits, start=1):
        header = f"[{number}] {cite(hit)}"
        room = max_tokens - used - count(header) - 2
        if room <= 0:
            break
        text = hit.text.strip()
        tokens = count(text)
        if tokens > room:
            # Cut at a word, in proportion: the counter is per text, not per word.
            words = text.split()
            text = " ".join(words[: max(1, len(words) * room // max(tokens, 1))]) + " …"
            tokens = count(text)
        parts.append(f"{header}\n{text}")
        used += count(header) + tokens + 2
    return "\n\n".join(parts)


_HEADER = re.compile(r"^\[(\d+)\] (.+)$")


def citations(text: str) -> list[str]:
    """The `[n] source` lines of a retrieval result (what `format_hits` wrote), in order.

    The web page reads them the same way (`citations` in `static/app.js`).
    """
    found: list[str] = []
    for passage in re.split(r"\n\n(?=\[\d+\] )", text):
        match = _HEADER.match(passage.split("\n", 1)[0])
        if match:
            found.append(f"[{match[1]}] {match[2]}")
    return found


class RetrievalTool(Tool):
    """Searches an index of documents for the passages that answer a query.

    Args:
        index: The documents' index (open; the tool does not close it).
        top_k: The most passages per call.
        mode: `keyword`, `vector`, `hybrid` or `front_page`; default: hybrid when the index
            has an embedding model, else keyword.
        score_threshold: Drop passages scoring below it (on the mode's scale).
        max_ref_token: The most tokens of passages per answer.
        sources: Search only these documents (paths, folders or URLs); None: all.
        front_page: Put a lone document's opening first, as Qwen-Agent's `front_page_search`
            does (`DocumentIndex.search`'s `front_page_tokens`, this tool's budget).
        front_page_fallback: Give a query that names nothing to search for the documents'
            openings, as Qwen-Agent's keyword search does (`DocumentIndex.search`'s).
    """

    name: ClassVar[str] = RETRIEVAL_TOOL_NAME
    tool_type: ClassVar[str] = "datastore"
    idempotent: ClassVar[bool] = True  # a search of the index changes nothing
    description: ClassVar[str] = (
        "Searches the user's documents and returns the passages that best answer a query, "
        "numbered, each with its source (file and page). Cite them as [1], [2]."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for: the question, or its key words.",
            }
        },
        "required": ["query"],
    }

    def __init__(
        self,
        index: DocumentIndex,
        *,
        top_k: int = 5,
        mode: SearchMode | None = None,
        score_threshold: float | None = None,
        max_ref_token: int = 4000,
        sources: Sequence[str] | None = None,
        front_page: bool = False,
        front_page_fallback: bool = False,
    ) -> None:
        super().__init__()
        self.index = index
        self.top_k = top_k
        self.mode: SearchMode | None = mode
        self.score_threshold = score_threshold
        self.max_ref_token = max_ref_token
        self.sources = list(sources) if sources is not None else None
        self.front_page = front_page
        self.front_page_fallback = front_page_fallback

    async def search(self, query: str) -> list[SearchHit]:
        """The passages for `query`, best first, as this tool is set to search."""
        return await self.index.search(
            query,
            mode=self.mode,
            top_k=self.top_k,
            score_threshold=self.score_threshold,
            sources=self.sources,
            front_page_tokens=self.max_ref_token if self.front_page else None,
            front_page_fallback=self.front_page_fallback,
        )

    async def acall(self, params: dict[str, Any], **kwargs: Any) -> str:
        """Search for `params["query"]`; the numbered passages with their sources."""
        hits = await self.search(str(params.get("query", "")))
        return format_hits(hits, self.max_ref_token)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """The sync twin of `acall` (Qwen-Agent's entry point)."""
        from parley._sync import run_sync  # noqa: PLC0415

        return run_sync(self.acall(self._verify_json_format_args(params)))
