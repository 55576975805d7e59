"""`parley serve --docs PATH`: an assistant over documents, their index kept current.

At start-up the index is opened (so the `documents` agent can answer at once from what it
already holds) and brought up to date in the background, each document logged as it is done.
Then the folders and files are watched (`watchfiles`): a file added, changed or removed is
indexed again or dropped within a second or two. URLs are fetched at start-up only.

Each document is parsed in a parser process under `docs_parse_timeout` and
`docs_parse_memory_bytes` (`ParseLimits`): a document built to pin its parser fails alone,
logged, and never costs the service its memory or its other documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from parley._terminal import visible
from parley.errors import ConfigurationError
from parley.models.spec import DEFAULT_MODEL_SPEC

if TYPE_CHECKING:
    from parley.agents import Agent
    from parley.models.base import ChatModel
    from parley.rag.index import DocumentIndex
    from parley.service.settings import ServiceSettings

__all__ = ["DOCUMENTS_KEY", "DocumentsService"]

DOCUMENTS_KEY = "documents"
"""The served agent's key."""

log = logging.getLogger("parley.service")


class DocumentsService:
    """The documents' index for the service's lifetime, and the agent that answers from it.

    Args:
        settings: `docs` (what to index), `docs_index` (where), `docs_embedding` (how),
            `docs_parse_timeout` and `docs_parse_memory_bytes` (each document's parse).
        build_model: Makes the agent's chat model from a spec (the settings' `model`).
    """

    def __init__(self, settings: ServiceSettings, build_model: Callable[[str], ChatModel]) -> None:
        if not settings.docs:
            raise ConfigurationError("no documents to serve: set docs (--docs PATH)")
        self.sources = list(settings.docs)
        self.location = settings.docs_index
        self.embedding = settings.docs_embedding
        from parley.tools.builtin.doc_parser import ParseLimits  # noqa: PLC0415

        self.parse_limits = ParseLimits(
            timeout=settings.docs_parse_timeout, memory_bytes=settings.docs_parse_memory_bytes
        )
        self.model_spec = settings.model or DEFAULT_MODEL_SPEC  # create_app chose it
        self.build_model = build_model
        self.index: DocumentIndex | None = None
        self.ready = asyncio.Event()
        """Set once the first update is done (failed documents logged)."""
        self._task: asyncio.Task[None] | None = None

    def agent(self) -> Agent:
        """The assistant (built by the registry on first use, after `start`)."""
        from parley.rag.assistant import Assistant  # noqa: PLC0415

        if self.index is None:
            raise ConfigurationError("the documents' index is not open: the service is not started")
        return Assistant(self.index, self.build_model(self.model_spec), name=DOCUMENTS_KEY)

    async def start(self) -> None:
        """Open the index, then update and watch it in the background."""
        from parley.rag.assistant import default_index_path  # noqa: PLC0415
        from parley.rag.index import DocumentIndex  # noqa: PLC0415

        embedder = None
        if self.embedding != "none":
            from parley.embeddings.spec import embedding_model_from_spec  # noqa: PLC0415

            embedder = embedding_model_from_spec(self.embedding)
        location = self.location or default_index_path(self.sources, embedder)
        self.index = await DocumentIndex.open(
            location, embedding_model=embedder, parse_limits=self.parse_limits
        )
        log.info("parley: documents index at %s; updating it from %s", location, self.sources)
        self._task = asyncio.create_task(self._keep_current(), name="parley-documents")

    async def close(self) -> None:
        """Stop watching and close the index."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.index is not None:
            await self.index.close()
            self.index = None

    async def update(self, *, quiet: bool = False) -> None:
        """Bring the index up to date with the sources now.

        Each document is logged as it is done, unless `quiet` (an update after a change),
        which logs only what changed.
        """
        from parley.rag.assistant import add_sources  # noqa: PLC0415

        assert self.index is not None

        # A file's name is anyone's, and the log is read on a terminal: shown, never obeyed.
        def progress(done: int, total: int, source: str) -> None:
            log.info("parley: indexed %d/%d %s", done, total, visible(source))

        report = await add_sources(
            self.index, self.sources, progress=None if quiet else progress, errors="report"
        )
        for source, error in report.failed.items():
            log.warning("parley: could not index %s", visible(f"{source}: {error}", keep="\n"))
        if quiet and not (report.added or report.updated or report.removed):
            return
        log.info(
            "parley: documents index up to date: %d added, %d updated, %d unchanged, "
            "%d removed, %d failed",
            len(report.added),
            len(report.updated),
            len(report.unchanged),
            len(report.removed),
            len(report.failed),
        )

    async def _keep_current(self) -> None:
        try:
            await self.update()
        except Exception:  # an index that cannot be written: answer from what it holds
            log.exception("parley: could not update the documents index")
        finally:
            self.ready.set()
        watched = [s for s in self.sources if "://" not in s and Path(s).exists()]
        if not watched:
            return
        from watchfiles import awatch  # noqa: PLC0415  (the rag extra)

        async for _changes in awatch(
            *watched, watch_filter=_is_document, debounce=500, recursive=True
        ):
            try:
                await self.update(quiet=True)
            except Exception:
                log.exception("parley: could not update the documents index")


def _is_document(_change: object, path: str) -> bool:
    """Whether a changed path is one the index holds.

    Not the service's database, an index, an editor's swap file, or anything in a hidden
    folder: those change all the time and would set off updates that find nothing new.
    """
    from parley.tools.builtin.doc_parser import detect_format  # noqa: PLC0415

    parts = Path(path).parts
    return not any(p.startswith(".") for p in parts) and detect_format(parts[-1]) is not None
