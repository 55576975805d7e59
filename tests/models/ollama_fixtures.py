"""Fixtures for the Ollama tests: a scripted local server and models bound to it.

Use them from a test module with `pytest_plugins = ["tests.models.ollama_fixtures"]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from parley.providers.ollama import OllamaChatModel
from parley.providers.ollama.server import OllamaServer
from tests._requires import require_module

require_module("ollama", "ollama")  # the SDK the models and the listing run on
require_module("httpx_aiohttp", "ollama")  # the HTTP client parley builds the SDK with

ModelFactory = Callable[..., Any]


@pytest.fixture
def server() -> Iterator[OllamaServer]:
    """A started, empty `OllamaServer`; stopped after the test."""
    with OllamaServer() as running:
        yield running


@pytest.fixture
async def make_model(server: OllamaServer) -> AsyncIterator[ModelFactory]:
    """Builds models bound to `server` (fast retries); closes their clients afterwards."""
    made: list[OllamaChatModel] = []

    def make(model: str = "qwen3", *, credential: Any = None, **kwargs: Any) -> OllamaChatModel:
        kwargs.setdefault("max_retries", 2)
        instance = OllamaChatModel(credential or server.credential(), model, **kwargs)
        # Backoff waits near zero; `Retry-After` waits stay as the server asks.
        instance.retry = RetryPolicy(
            max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()
