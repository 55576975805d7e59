"""Fixtures for the OpenAI-family tests: a scripted local server and models bound to it.

Use them from a test module with `pytest_plugins = ["tests.models.openai_fixtures"]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from parley.providers.openai._common import OpenAIModelBase
from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.server import OpenAIServer

ModelFactory = Callable[..., Any]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """A started, empty `OpenAIServer`; stopped after the test."""
    with OpenAIServer() as running:
        yield running


@pytest.fixture
async def make_model(server: OpenAIServer) -> AsyncIterator[ModelFactory]:
    """Builds models bound to `server` (fast retries); closes their clients afterwards."""
    made: list[OpenAIModelBase] = []

    def make(
        cls: type[OpenAIModelBase] = OpenAIChatModel,
        model: str = "gpt-4o-mini",
        *,
        credential: Any = None,
        **kwargs: Any,
    ) -> Any:
        kwargs.setdefault("max_retries", 2)
        instance = cls(credential or server.credential(), model, **kwargs)
        # Backoff waits near zero; `Retry-After` waits stay as the server asks.
        instance.retry = RetryPolicy(
            max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()
