"""The question-answering set's corpus: `benchmarks/data/pydocs` as a parley document index.

Each of the corpus's 2,373 passages (one documented API entry of Python's library reference)
becomes one document of one chunk whose source is the entry's id (`shutil.rmtree`), so the
retrieval tool's result names it (`[1] shutil.rmtree`) and a case's `retrieval_hit` compares
ids with the qrels. The index is an SQLite file with the embedded embedding model's vectors,
built once (2,373 passages embedded: 15 minutes on two cores shared with other work, a few
minutes on an idle machine) and reused while the corpus is unchanged.

The corpus is not in the wheel (1 MB of the PSF's text): it is read from a source checkout,
or from the folder `PARLEY_PYDOCS` names.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parley.errors import ConfigurationError

if TYPE_CHECKING:
    from parley.rag import DocumentIndex

__all__ = ["corpus_folder", "load_corpus", "open_index"]

_CHECKOUT = Path(__file__).resolve().parents[4] / "benchmarks" / "data" / "pydocs"
_BATCH = 64
"""Passages embedded per call while building (bounded memory, steady progress)."""


def corpus_folder() -> Path:
    """Where the corpus is: `PARLEY_PYDOCS`, else the source checkout's benchmarks folder.

    Raises:
        ConfigurationError: Neither holds `corpus.jsonl`.
    """
    folder = Path(os.environ.get("PARLEY_PYDOCS") or _CHECKOUT)
    if not (folder / "corpus.jsonl").is_file():
        raise ConfigurationError(
            f"the qa set needs the pydocs corpus, and {folder} has no corpus.jsonl: run it "
            "from a clone of parley, or set PARLEY_PYDOCS to a copy of benchmarks/data/pydocs"
        )
    return folder


def load_corpus(folder: Path | None = None) -> dict[str, str]:
    """The corpus's passages: entry id to text."""
    path = (folder or corpus_folder()) / "corpus.jsonl"
    with path.open(encoding="utf-8") as file:
        rows = [json.loads(line) for line in file if line.strip()]
    return {row["_id"]: row["text"] for row in rows}


async def open_index(
    path: Path, *, keyword_only: bool = False, folder: Path | None = None
) -> DocumentIndex:
    """The corpus's `DocumentIndex` at `path` (an SQLite file), built when missing or stale.

    Args:
        path: The index file; made, or rebuilt when the corpus changed.
        keyword_only: No embedding model (keyword search only: built in seconds, for tests);
            by default the embedded local model embeds passages and queries.
        folder: The corpus folder (default `corpus_folder()`).
    """
    from parley.rag import DocumentIndex  # noqa: PLC0415  (extra `rag`, loaded on use)

    corpus = load_corpus(folder)
    digest = hashlib.sha256(json.dumps(corpus).encode()).hexdigest()[:16]
    pipeline = f"pydocs:{digest}:{'keyword' if keyword_only else 'vectors'}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if keyword_only:
        index = await DocumentIndex.open(path, embedding_model=None)
    else:
        index = await DocumentIndex.open(path)
    held = await index.store.documents()
    if len(held) == len(corpus) and all(d.pipeline == pipeline for d in held):
        return index
    try:
        await index.store.remove_documents([d.doc_id for d in held])
        await _fill(index, corpus, pipeline)
    except BaseException:
        await index.close()
        raise
    return index


async def _fill(index: DocumentIndex, corpus: dict[str, str], pipeline: str) -> None:
    """Write every passage as a one-chunk document, with its vector."""
    from parley.agents.budget import text_token_counter  # noqa: PLC0415
    from parley.rag import Chunk, DocumentRecord, document_id  # noqa: PLC0415

    count = text_token_counter()
    items = list(corpus.items())
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        vectors = await _vectors(index, [text for _, text in batch])
        for row, (entry, text) in enumerate(batch):
            doc_id = document_id(entry)
            chunk = Chunk(doc_id, 0, text, count(text), entry, title=entry)
            record = DocumentRecord(
                doc_id=doc_id,
                source=entry,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                pipeline=pipeline,
                format="text",
                title=entry,
                size=len(text.encode()),
                chunk_count=1,
            )
            one = None if vectors is None else vectors[row : row + 1]
            await index.store.put_document(record, [chunk], one)


async def _vectors(index: DocumentIndex, texts: list[str]) -> Any:
    """The texts' vectors (None for a keyword-only index), the store bound to their model."""
    if index.embedding_model is None or index.model_id is None:
        return None
    vectors = (await index.embedding_model(texts)).array()
    await index.store.bind_embedding(index.model_id, int(vectors.shape[1]))
    return vectors
