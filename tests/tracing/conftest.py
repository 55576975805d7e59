"""Every tracing test starts clean (the fixtures are in `tests.tracing.fixtures`); `server`
is the OpenAI stand-in the tests' models talk to.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parley.providers.openai.server import OpenAIServer
from tests._requires import require_module

require_module("opentelemetry.sdk", "tracing")


@pytest.fixture(autouse=True)
def _clean(clean_tracing: None) -> None:
    """No test here sees a tracing variable of the developer's, or another test's state."""


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """The OpenAI stand-in the models of these tests talk to (this folder's own fixture)."""
    with OpenAIServer() as running:
        yield running
