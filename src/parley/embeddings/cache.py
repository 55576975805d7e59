"""Embedding caches: vectors computed once, reused by later calls.

`EmbeddingCache` is the interface (seed 003's `EmbeddingCacheBase`): four async methods on a
request's identifier (a JSON-able dict: provider, model, parameters and inputs, see
`EmbeddingModel.cache_identifier`). A cache that sets `per_item` is asked input by input
(`retrieve_items`, `store_items`), so a batch whose inputs are partly cached sends only the
others.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from parley.embeddings.base import Embedding

__all__ = ["EmbeddingCache"]


class EmbeddingCache(ABC):
    """Where an embedding model keeps vectors it computed."""

    per_item: ClassVar[bool] = False
    """Whether the model asks this cache input by input rather than request by request."""

    @staticmethod
    def key(identifier: Mapping[str, Any]) -> str:
        """The SHA-256 (hex) of an identifier's canonical JSON: its name in the cache."""
        text = json.dumps(identifier, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @abstractmethod
    async def store(
        self,
        embeddings: Sequence[Embedding],
        identifier: Mapping[str, Any],
        overwrite: bool = False,
    ) -> None:
        """Keep `embeddings` under `identifier` (an existing entry stays unless `overwrite`)."""

    @abstractmethod
    async def retrieve(self, identifier: Mapping[str, Any]) -> list[Embedding] | None:
        """The vectors kept under `identifier`, or None."""

    @abstractmethod
    async def remove(self, identifier: Mapping[str, Any]) -> None:
        """Forget the entry under `identifier`, if any."""

    @abstractmethod
    async def clear(self) -> None:
        """Forget every entry."""

    async def retrieve_items(
        self, identifiers: Sequence[Mapping[str, Any]]
    ) -> list[Embedding | None]:
        """One vector or None per single-input identifier (a per-item cache does it at once)."""
        found: list[Embedding | None] = []
        for identifier in identifiers:
            vectors = await self.retrieve(identifier)
            found.append(vectors[0] if vectors else None)
        return found

    async def store_items(
        self, embeddings: Sequence[Embedding], identifiers: Sequence[Mapping[str, Any]]
    ) -> None:
        """Keep one vector per single-input identifier."""
        for vector, identifier in zip(embeddings, identifiers, strict=True):
            await self.store([vector], identifier, overwrite=True)
