"""What an embedding model takes and gives: inputs and vectors.

Kept below `parley.embeddings.base` and `parley.embeddings.cache` so that both can name a
vector without importing each other (the model uses a cache; a cache stores vectors).
"""

from __future__ import annotations

from parley.messages import AudioBlock, FileBlock, ImageBlock, TextBlock, VideoBlock

__all__ = ["DataBlock", "Embedding", "EmbeddingInput"]

DataBlock = TextBlock | ImageBlock | VideoBlock | AudioBlock | FileBlock
"""A block a multimodal embedding model takes (text, or media by URL or base64)."""

EmbeddingInput = str | DataBlock
"""One input: a text, or (for multimodal models) a block."""

Embedding = list[float]
"""One dense vector."""
