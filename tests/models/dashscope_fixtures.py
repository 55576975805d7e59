"""Fixtures for the DashScope tests: a scripted native-API server and models bound to it.

Use them from a test module with `pytest_plugins = ["tests.models.dashscope_fixtures"]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from parley.providers.dashscope import DashScopeChatModel
from parley.providers.dashscope.server import DashScopeServer

ModelFactory = Callable[..., Any]


@pytest.fixture
def server() -> Iterator[DashScopeServer]:
    """A started, empty `DashScopeServer`; stopped after the test."""
    with DashScopeServer() as running:
        yield running


@pytest.fixture
async def make_model(server: DashScopeServer) -> AsyncIterator[ModelFactory]:
    """Builds models bound to `server` (fast retries); closes their clients afterwards."""
    made: list[DashScopeChatModel] = []

    def make(model: str = "qwen-plus", *, credential: Any = None, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 2)
        instance = DashScopeChatModel(credential or server.credential(), model, **kwargs)
        # Backoff waits near zero; `Retry-After` waits stay as the server asks.
        instance.retry = RetryPolicy(
            max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
        )
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.aclose()
