"""A search hit and what a search backend is: below `web_search` and the backends.

`web_search` builds a backend from its configuration and the backends return hits, so the
shared shapes live here for both to import (`parley.tools.builtin.web_search` re-exports
them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["SearchBackend", "SearchResult"]


@dataclass(frozen=True)
class SearchResult:
    """One hit: its title, address and a snippet of its text."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class SearchBackend(Protocol):
    """What `web_search` needs from a search provider."""

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        """At most `max_results` results for `query`, best first."""
        ...
