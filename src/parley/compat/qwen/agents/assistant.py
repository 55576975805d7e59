"""Qwen-Agent's `Assistant`: a function-calling agent that answers from documents.

    bot = Assistant(llm=None, files=["handbook.pdf"],             # the embedded defaults
                    rag_cfg={"retrieval_type": "hybrid", "top_k": 5})
    for response in bot.run([{"role": "user", "content": "How long do refunds take?"}]):
        ...

As in Qwen-Agent, each run retrieves for the newest user message and puts what it found in
the system message, under `# Knowledge Base`, one `## The content from [source]:` section
per document (in Chinese when `lang` is `zh`), before the function-calling loop of
`FnCallAgent` runs. `run(messages, knowledge="...")` gives the knowledge instead of
retrieving; `run(messages, max_ref_token=...)` bounds it for that run. Files attached to
user messages (`ContentItem(file=...)`) are indexed too and searched with the agent's
`files`.

Differences from Qwen-Agent 0.0.34: the index is persistent and searched in milliseconds
(Qwen-Agent parses and indexes every file again in each run); passages are chosen by the
`rag_cfg` retrieval type within `max_ref_token` tokens and carry their page, slide or sheet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from parley._sync import run_sync
from parley.agents.budget import text_token_counter
from parley.compat.qwen._rag import files_of
from parley.compat.qwen._response import QwenMessages
from parley.compat.qwen.agents.fncall_agent import FnCallAgent
from parley.compat.qwen.schema import SYSTEM, USER, Message
from parley.rag.tool import location, source_name
from parley.rag.types import SearchHit

__all__ = ["Assistant", "format_knowledge", "format_records", "last_user_text", "with_knowledge"]

_TEMPLATE = {"en": "\n\n# Knowledge Base\n\n{knowledge}", "zh": "\n\n# 知识库\n\n{knowledge}"}
_SNIPPET = {
    "en": "## The content from [{source}]:\n\n```\n{content}\n```",
    "zh": "## 来自 [{source}] 的内容\uff1a\n\n```\n{content}\n```",
}


def format_knowledge(hits: Sequence[SearchHit], lang: str, max_tokens: int) -> str:
    """Passages as Qwen-Agent's Assistant shows them, within `max_tokens` tokens.

    One section per document, in the order of each document's best passage.
    """
    count = text_token_counter()
    kept: list[SearchHit] = []
    used = 0
    for hit in hits:
        tokens = count(hit.text)
        if used + tokens > max_tokens and kept:
            break
        kept.append(hit)
        used += tokens
    order = {hit.source: rank for rank, hit in reversed(list(enumerate(kept)))}
    kept.sort(key=lambda h: (order[h.source], h.chunk.index))
    snippet = _SNIPPET.get(lang, _SNIPPET["en"])
    groups = [list(group) for _, group in groupby(kept, key=lambda h: h.source)]
    sections = [
        snippet.format(
            source=source_name(group[0]),
            content="\n\n...\n\n".join(_passage(h) for h in group),
        )
        for group in groups
    ]
    return "\n\n".join(sections)


def format_records(records: Sequence[Mapping[str, Any]], lang: str) -> str:
    """Qwen-Agent's `retrieval` results (`[{"url", "text": [...]}]`) as knowledge sections."""
    snippet = _SNIPPET.get(lang, _SNIPPET["en"])
    return "\n\n".join(
        snippet.format(
            source=Path(str(record.get("url", ""))).name or record.get("url", ""),
            content="\n\n...\n\n".join(str(t).strip() for t in record.get("text") or []),
        )
        for record in records
        if record.get("text")
    )


def _passage(hit: SearchHit) -> str:
    where = location(hit)
    return f"({where})\n{hit.text.strip()}" if where else hit.text.strip()


class Assistant(FnCallAgent):
    """Qwen-Agent's `Assistant`: `FnCallAgent` with knowledge retrieved for each question.

    Takes what `FnCallAgent` takes (`function_list`, `llm`, `system_message`, `name`,
    `description`, `files`, `rag_cfg`, ...); see the module docstring.
    """

    retrieval_as_tool = False

    file_roots: Sequence[str | Path] | None = None
    """Folders a file attached to a message may be in (None: the working directory). A
    message is the user's input, and may come from someone who must not make the agent read
    `/etc/passwd` into its prompt: a path elsewhere is refused. URLs are fetched only from
    public addresses (`parley.rag`'s reader)."""

    def _run(
        self,
        messages: list[Message],
        lang: str = "en",
        *,
        knowledge: str = "",
        max_ref_token: int | None = None,
        **kwargs: Any,
    ) -> Iterator[QwenMessages]:
        """Retrieve (unless `knowledge` is given), put it in the system message, then loop.

        Args:
            messages: The conversation, the system message first.
            lang: `zh` or `en`: the language of the knowledge's headings.
            knowledge: Use this instead of retrieving.
            max_ref_token: The most tokens of passages for this run (default: `rag_cfg`'s),
                as Qwen-Agent takes it from `run` (its docs' nested agents pass it on).
            **kwargs: What `FnCallAgent._run` takes (`seed`).
        """
        text = knowledge or self._retrieve(messages, lang, max_ref_token)
        return super()._run(with_knowledge(messages, text, lang), lang, **kwargs)

    def _retrieve(self, messages: Sequence[Message], lang: str, max_ref_token: int | None) -> str:
        query = last_user_text(messages)
        attached = files_of(messages)
        if not query or (self.index is None and not attached):
            return ""
        if attached:
            self._check_attached(attached)
            self._add_attached(attached)
        index = self.index
        assert index is not None
        settings = self.rag_settings
        sources = [*self.files, *attached]
        hits = run_sync(
            index.search(
                query,
                mode=settings.mode,
                top_k=settings.top_k,
                score_threshold=settings.score_threshold,
                sources=sources,
                front_page_tokens=settings.front_page_tokens,
                front_page_fallback=True,  # Qwen-Agent's keyword search
            )
        )
        budget = settings.max_ref_token if max_ref_token is None else max_ref_token
        return format_knowledge(hits, lang, budget)

    def _check_attached(self, files: list[str]) -> None:
        from parley.errors import DocumentError  # noqa: PLC0415
        from parley.rag.ingest import is_url, normalize_source  # noqa: PLC0415

        roots = [Path(r).resolve() for r in (self.file_roots or [Path.cwd()])]
        for file in files:
            if is_url(file) and not file.lower().startswith("file:"):
                continue
            path = Path(normalize_source(file))
            if not any(path.is_relative_to(root) for root in roots):
                raise DocumentError(
                    f"the attached file {file} is outside the folders files may come from "
                    f"({', '.join(map(str, roots))}); set Assistant.file_roots to allow it",
                    source=file,
                )

    def _add_attached(self, files: list[str]) -> None:
        from parley.compat.qwen._rag import open_index  # noqa: PLC0415
        from parley.rag.assistant import add_sources  # noqa: PLC0415

        if self.index is None:
            self.index = open_index(files, self.rag_settings)
            return
        run_sync(add_sources(self.index, files))


def last_user_text(messages: Sequence[Message]) -> str:
    """The text of the newest user message (its text items, one per line)."""
    for message in reversed(messages):
        if message.role != USER:
            continue
        content = message.content
        if isinstance(content, str):
            return content
        return "\n".join(item.text for item in content if item.text)
    return ""


def with_knowledge(messages: list[Message], knowledge: str, lang: str) -> list[Message]:
    """The messages with `knowledge` under `# Knowledge Base` in the system message."""
    if not knowledge:
        return messages
    block = _TEMPLATE.get(lang, _TEMPLATE["en"]).format(knowledge=knowledge)
    if messages and messages[0].role == SYSTEM:
        first = messages[0]
        content = first.content
        if isinstance(content, str):
            updated = first.model_copy(update={"content": content + block})
        else:
            from parley.compat.qwen.schema import ContentItem  # noqa: PLC0415

            updated = first.model_copy(update={"content": [*content, ContentItem(text=block)]})
        return [updated, *messages[1:]]
    return [Message(SYSTEM, block.lstrip()), *messages]
