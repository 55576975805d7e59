"""Fault scenarios every embedding provider's tests run the same way, on its own server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from parley.errors import ModelTimeoutError


async def slow_answer_is_retried_then_surfaced(
    server: Any,
    make_model: Callable[..., Any],
    embeddings: Callable[..., Any],
    expected: list[float],
    requests: Callable[[], list[Any]] | None = None,
) -> None:
    """An answer slower than the timeout is asked again, and surfaced once retries are spent.

    `embeddings` makes the server's answer step (taking `delay`); `expected` is the vector of
    "a"; `requests` counts the embedding requests the server saw (default: all of them).
    """
    seen = requests or (lambda: server.requests)
    server.add(embeddings(delay=1.0), embeddings())
    response = await make_model(timeout=0.3)(["a"])
    assert response.embeddings == [expected]
    assert len(seen()) == 2
    server.add(embeddings(delay=1.0))
    with pytest.raises(ModelTimeoutError):
        await make_model(timeout=0.3, max_retries=0)(["a"])
