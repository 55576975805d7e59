"""The contract suites' fixtures: one parameter per provider, named apart from any provider's.

A test of `test_chat_contract.py` takes `chat` (a `Chat`: one provider's started server and
the models built on it) and runs once per chat provider in `_chat.CHAT_PROVIDERS`; marked
`@pytest.mark.needs(...)`, only on the providers that declare those capabilities (a bare
`@pytest.mark.needs` asks for none, over a module's `pytestmark`). The embedding suite does the
same with `embedder` (`_embedding.EMBEDDING_PROVIDERS`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.providers import _chat, _embedding
from tests.providers._chat import Chat, ChatProvider
from tests.providers._embedding import Embedder, EmbeddingProvider


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*capabilities): run a contract test on the providers that have them"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("needs")
    needs = marker.args if marker else ()
    if "chat_provider" in metafunc.fixturenames:
        metafunc.parametrize("chat_provider", _chat.chat_params(*needs))
    if "embedding_provider" in metafunc.fixturenames:
        metafunc.parametrize("embedding_provider", _embedding.embedding_params(*needs))


@pytest.fixture
async def chat(chat_provider: ChatProvider) -> AsyncIterator[Chat]:
    """The provider's server, started and empty, and models on it (closed after the test)."""
    _chat.require(chat_provider)
    with chat_provider.server() as server:
        harness = Chat(chat_provider, server)
        yield harness
        for model in harness.made:
            await model.aclose()


@pytest.fixture
async def embedder(embedding_provider: EmbeddingProvider) -> AsyncIterator[Embedder]:
    """The provider's server (if it has one), started and empty, and models on it."""
    _embedding.require(embedding_provider)
    if embedding_provider.server is None:
        harness = Embedder(embedding_provider, None)
        yield harness
    else:
        with embedding_provider.server() as server:
            harness = Embedder(embedding_provider, server)
            yield harness
    for model in harness.made:
        await model.aclose()
