"""Qwen-Agent's `files` and `rag_cfg`, on a parley `DocumentIndex`.

`rag_cfg` takes seed 001's keys and Qwen-Agent's own:

- `retrieval_type`: `keyword`, `vector`, `hybrid` or `front_page`; default: from
  `rag_searchers`, Qwen-Agent's searcher list (`keyword_search`, `vector_search`,
  `hybrid_search`, `front_page_search`; default `["keyword_search", "front_page_search"]`,
  Qwen-Agent's, which is keyword search).
- `chunk_size` (or Qwen-Agent's `parser_page_size`): tokens per chunk (500).
- `chunk_overlap`: tokens a chunk repeats of the one before (50).
- `top_k`: passages per retrieval (10; then `max_ref_token` decides).
- `score_threshold`: drop passages scoring below it (none).
- `max_ref_token`: the most tokens of passages in the prompt (4000).
- `embedding_model`: `provider:model`, `local`, a bare DashScope or OpenAI model name, or an
  `EmbeddingModel`; default `local` when the search needs vectors.
- `index_path`: the index's SQLite file (a folder gets `index.sqlite`), or a PostgreSQL URL;
  default: a file per set of files in `~/.cache/parley/indexes/`.
- `rag_keygen_strategy`: Qwen-Agent's model-written search keywords (`GenKeyword`, ...);
  accepted and not used, with a warning unless `none`: parley searches with the question.

Qwen-Agent's `front_page_search` among the `rag_searchers` (as in its default) puts the
opening of a lone document first: when the search covers one document, its first two
chunks lead the passages, each at most a quarter of `max_ref_token` (with more documents it
adds nothing, as in Qwen-Agent). Alone, it is the `front_page` retrieval type. A query
without key words ("summarize this") gets each document's opening in the keyword and hybrid
modes, as Qwen-Agent's keyword search does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parley._sync import run_sync
from parley.compat.qwen.schema import USER, Message
from parley.embeddings.base import EmbeddingModel
from parley.errors import ConfigurationError
from parley.rag.assistant import add_sources, default_index_path
from parley.rag.index import DocumentIndex
from parley.rag.types import SearchMode

__all__ = ["RAG_CFG_KEYS", "RagSettings", "files_of", "open_index", "without_files"]

RAG_CFG_KEYS = frozenset(
    {
        "retrieval_type",
        "rag_searchers",
        "chunk_size",
        "parser_page_size",
        "chunk_overlap",
        "top_k",
        "score_threshold",
        "max_ref_token",
        "embedding_model",
        "index_path",
        "rag_keygen_strategy",
    }
)
"""The keys a `rag_cfg` takes."""
logger = logging.getLogger("parley.compat.qwen")

_MODES: tuple[SearchMode, ...] = ("keyword", "vector", "hybrid", "front_page")
_SEARCHERS = {"keyword_search", "vector_search", "hybrid_search", "front_page_search"}
_DEFAULT_SEARCHERS = ("keyword_search", "front_page_search")  # Qwen-Agent's settings.py


@dataclass
class RagSettings:
    """A `rag_cfg`, checked (see the module docstring for the keys)."""

    mode: SearchMode = "keyword"
    chunk_size: int = 500
    chunk_overlap: int = 50
    top_k: int = 10
    score_threshold: float | None = None
    max_ref_token: int = 4000
    embedding_model: EmbeddingModel[Any] | str | None = None
    index_path: str | None = None
    front_page: bool = True
    """Whether a lone document's opening leads the passages (`front_page_search`)."""

    @property
    def front_page_tokens(self) -> int | None:
        """`DocumentIndex.search`'s `front_page_tokens` for these settings."""
        return self.max_ref_token if self.front_page else None

    @classmethod
    def read(cls, rag_cfg: Mapping[str, Any] | None) -> RagSettings:
        """Check a `rag_cfg` dict.

        Raises:
            ConfigurationError: An unknown key or a bad value.
        """
        cfg = dict(rag_cfg or {})
        unknown = sorted(set(cfg) - RAG_CFG_KEYS)
        if unknown:
            raise ConfigurationError(
                f"rag_cfg has unknown keys {unknown}; known: {', '.join(sorted(RAG_CFG_KEYS))}"
            )
        mode = _mode(cfg)
        keygen = cfg.get("rag_keygen_strategy")
        if keygen is not None and str(keygen).lower() != "none":
            logger.warning(
                "rag_cfg rag_keygen_strategy %r is not used: parley searches with the question "
                "as asked (keyword, vector or hybrid search), not with keywords a model writes",
                keygen,
            )
        embedding = cfg.get("embedding_model")
        if embedding is None and mode in ("vector", "hybrid"):
            embedding = "local"
        try:
            return cls(
                mode=mode,
                chunk_size=int(cfg.get("chunk_size", cfg.get("parser_page_size", 500))),
                chunk_overlap=int(cfg.get("chunk_overlap", 50)),
                top_k=int(cfg.get("top_k", 10)),
                score_threshold=_optional_float(cfg.get("score_threshold")),
                max_ref_token=int(cfg.get("max_ref_token", 4000)),
                embedding_model=embedding,
                index_path=str(cfg["index_path"]) if cfg.get("index_path") else None,
                front_page="front_page_search" in _searchers(cfg),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"bad rag_cfg value: {exc}") from None


def _mode(cfg: Mapping[str, Any]) -> SearchMode:
    given = cfg.get("retrieval_type")
    if given is not None:
        if given not in _MODES:
            raise ConfigurationError(
                f"rag_cfg retrieval_type {given!r} is not one of {', '.join(_MODES)}"
            )
        mode: SearchMode = given
        return mode
    chosen = set(_searchers(cfg)) - {"front_page_search"}
    if "hybrid_search" in chosen or {"keyword_search", "vector_search"} <= chosen:
        return "hybrid"
    if "vector_search" in chosen:
        return "vector"
    return "keyword" if chosen else "front_page"


def _searchers(cfg: Mapping[str, Any]) -> Sequence[str]:
    searchers: Sequence[str] = cfg.get("rag_searchers") or _DEFAULT_SEARCHERS
    unknown = sorted(set(searchers) - _SEARCHERS)
    if unknown:
        raise ConfigurationError(
            f"rag_cfg rag_searchers {unknown} unknown; known: {', '.join(sorted(_SEARCHERS))}"
        )
    return searchers


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _embedder(spec: EmbeddingModel[Any] | str | None) -> EmbeddingModel[Any] | None:
    if spec is None or isinstance(spec, EmbeddingModel):
        return spec
    from parley.embeddings.spec import embedding_model_from_spec  # noqa: PLC0415

    if ":" in spec or spec == "local":
        return embedding_model_from_spec(spec)
    if spec.startswith("text-embedding-v"):  # DashScope's names, Qwen-Agent's own default
        return embedding_model_from_spec(f"dashscope:{spec}")
    if spec.startswith(("text-embedding-3", "text-embedding-ada")):
        return embedding_model_from_spec(f"openai:{spec}")
    raise ConfigurationError(
        f"rag_cfg embedding_model {spec!r}: name its provider, as 'provider:model' "
        "(e.g. 'ollama:nomic-embed-text'), or use 'local'"
    )


def _index_location(
    settings: RagSettings, files: Sequence[str], embedder: EmbeddingModel[Any] | None = None
) -> str | Path:
    path = settings.index_path
    if path is None:
        return default_index_path(files, embedder)
    if "://" in path:
        return path  # a PostgreSQL URL
    location = Path(path).expanduser()
    if location.is_dir() or not location.suffix:
        location.mkdir(parents=True, exist_ok=True)
        return location / "index.sqlite"
    return location


def open_index(files: Sequence[str], settings: RagSettings) -> DocumentIndex:
    """An index holding `files` (added now, unchanged ones skipped), from sync code.

    Raises:
        DocumentError: A file could not be read (after the others were indexed).
        ConfigurationError: A bad embedding model.
    """
    embedder = _embedder(settings.embedding_model)

    async def build() -> DocumentIndex:
        index = await DocumentIndex.open(
            _index_location(settings, files, embedder),
            embedding_model=embedder,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
        )
        try:
            await add_sources(index, files)
        except BaseException:
            await index.close()
            raise
        return index

    return run_sync(build())


def files_of(messages: Sequence[Message]) -> list[str]:
    """The files of the user's messages (`ContentItem(file=...)`), each once, in order."""
    found: list[str] = []
    for message in messages:
        if message.role == USER and not isinstance(message.content, str):
            found += [item.file for item in message.content if item.file and item.file not in found]
    return found


def local_images_of(messages: Sequence[Message]) -> list[str]:
    """The local images of any message (paths, `file://` URLs), each once, in order.

    Qwen-Agent hands a conversation's images to file tools with its files, so a tool finds
    a picture by its name in `work_dir`; remote and inline images are left out here (a
    download the tool did not ask for could fail a run that needs none).
    """
    found: list[str] = []
    for message in messages:
        if isinstance(message.content, str):
            continue
        for item in message.content:
            image = item.image
            if isinstance(image, str) and _is_local(image) and image not in found:
                found.append(image)
    return found


def _is_local(value: str) -> bool:
    scheme = value.split(":", 1)[0].lower() if ":" in value else ""
    return scheme in ("", "file") or len(scheme) == 1  # `C:\...` is a path


def without_files(messages: list[Message]) -> list[Message]:
    """The messages without their file items, as Qwen-Agent's models get them.

    A model reads text and media; files are for retrieval and file tools. A message left
    with nothing keeps an empty text.
    """
    kept: list[Message] = []
    for message in messages:
        content = message.content
        if isinstance(content, str) or not any(item.file for item in content):
            kept.append(message)
            continue
        items = [item for item in content if not item.file]
        kept.append(message.model_copy(update={"content": items or ""}))
    return kept
