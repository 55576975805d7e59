"""Fixtures for the Anthropic tests: a scripted local server and models bound to it.

Use them from a test module with `pytest_plugins = ["tests.models.anthropic_fixtures"]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from parley.providers.anthropic import AnthropicChatModel
from parley.providers.anthropic.server import AnthropicServer
from tests._requires import require_module

ModelFactory = Callable[..., Any]

MODEL = "claude-sonnet-5-5"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    """A started, empty `AnthropicServer`; stopped after the test."""
    require_module("anthropic", "anthropic")
    require_module("aiohttp", "anthropic")  # the SDK's aiohttp client, which parley uses
    with AnthropicServer() as running:
        yield running


@pytest.fixture
async def make_model(server: AnthropicServer) -> AsyncIterator[ModelFactory]:
    """Builds models bound to `server` (fast retries); closes their clients afterwards."""
    made: list[AnthropicChatModel] = []

    def make(model: str = MODEL, *, credential: Any = None, **kwargs: Any) -> AnthropicChatModel:
        kwargs.setdefault("max_retries", 2)
        instance = AnthropicChatModel(credential or server.credential(), model, **kwargs)
        # Backoff waits near zero; `retry-after` waits stay as the server asks.
        instance.retry = RetryPolicy(
            max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()
