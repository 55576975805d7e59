"""Fixtures for the Gemini tests: a scripted local server and models bound to it.

Use them from a test module with `pytest_plugins = ["tests.models.gemini_fixtures"]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from parley.providers.gemini import GeminiChatModel
from parley.providers.gemini.server import GeminiServer
from tests._requires import require_module

require_module("google.genai", "gemini")

ModelFactory = Callable[..., Any]


@pytest.fixture
def server() -> Iterator[GeminiServer]:
    """A started, empty `GeminiServer`; stopped after the test."""
    with GeminiServer() as running:
        yield running


@pytest.fixture
async def make_model(server: GeminiServer) -> AsyncIterator[ModelFactory]:
    """Builds Gemini models bound to `server` (fast retries); closes their clients afterwards."""
    made: list[GeminiChatModel] = []

    def make(model: str = "gemini-2.5-flash", *, credential: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 2)
        instance = GeminiChatModel(credential or server.credential(), model, **kwargs)
        # Backoff waits near zero; `Retry-After` waits stay as the server asks.
        instance.retry = RetryPolicy(
            max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()
