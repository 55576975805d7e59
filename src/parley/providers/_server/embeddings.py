"""What the scripted servers answer to an embedding request: `Embeddings`, and its vectors.

A scripted vector depends only on what it embeds and its size (`vector_for`), so a test can
tell which input each vector came from, and check that a client put them back in order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_SIZE", "MEDIA_TOKENS", "Embeddings", "text_tokens", "vector_for"]

DEFAULT_SIZE = 8
"""The size of scripted vectors when neither the request nor the step sets one."""

MEDIA_TOKENS = 100
"""The tokens each scripted image or video counts."""


def vector_for(key: str, size: int) -> list[float]:
    """The scripted vector of `key` (a text, or a media value as sent: URL, data, URI).

    Each component is a multiple of 1/256, so it goes through JSON exactly.
    """
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return [(digest[i % len(digest)] + i % 7) / 256 for i in range(size)]


def text_tokens(text: str) -> int:
    """The tokens a scripted server counts for a text: its words (at least one)."""
    return max(1, len(text.split()))


@dataclass
class Embeddings:
    """One scripted embedding answer: a vector for each input of the request.

    Args:
        size: The vectors' size when the request asks for none (default `DEFAULT_SIZE`).
        usage: The usage to report instead of the counted one (`{}` reports none).
        missing: Leave out this many vectors from the end (a wrong answer).
        reverse: List the vectors in reverse order, each with its input's index (where the
            wire format has indices).
        delay: Seconds before answering.
    """

    size: int | None = None
    usage: dict[str, Any] | None = None
    missing: int = 0
    reverse: bool = False
    delay: float = 0.0

    def vectors(self, keys: list[str], requested: int | None) -> list[list[float]]:
        """The vectors to send for the inputs' keys, the `missing` ones left out."""
        size = requested or self.size or DEFAULT_SIZE
        vectors = [vector_for(key, size) for key in keys]
        return vectors[: len(vectors) - self.missing] if self.missing else vectors
