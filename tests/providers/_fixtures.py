"""How each provider's `server` and `make_model` fixtures are made (its `fixtures.py`).

`provider_fixtures` returns the two fixtures for one provider: its scripted server, started and
empty, and a factory of models bound to it with fast retries (a backoff near zero; a server's
`Retry-After` waits as it asks), closed after the test. A folder's `conftest.py` gives them to
its tests; a module elsewhere binds them by name (`server = fixtures.server`), so they hold for
that module alone (never `pytest_plugins`, whose fixtures hold for the whole session and shadow
other providers' of the same name).

`model_fixtures` does the same for the models that take a `retry_delay` (embeddings, speech).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from parley.models.retry import RetryPolicy
from tests._requires import require_module

__all__ = ["ModelFactory", "model_fixtures", "provider_fixtures"]

ModelFactory = Callable[..., Any]
"""The `make_model` fixture: `make_model([cls,] [model], *, credential=None, **kwargs)`."""


def provider_fixtures(
    server_class: Callable[[], Any],
    model_class: type,
    default_model: str,
    requires: tuple[tuple[str, str], ...] = (),
) -> tuple[Any, Any]:
    """The `server` and `make_model` fixtures of one provider."""

    @pytest.fixture(name="server")
    def server() -> Iterator[Any]:
        for module, extra in requires:
            require_module(module, extra)
        with server_class() as running:
            yield running

    @pytest.fixture(name="make_model")
    async def make_model(server: Any) -> AsyncIterator[ModelFactory]:
        made: list[Any] = []

        def make(*args: Any, credential: Any = None, **kwargs: Any) -> Any:
            # A model class first (OpenAI's family has several), then the model's name.
            cls = args[0] if args and isinstance(args[0], type) else model_class
            names = args[1:] if args and isinstance(args[0], type) else args
            kwargs.setdefault("max_retries", 2)
            instance = cls(
                credential or server.credential(), *(names or (default_model,)), **kwargs
            )
            instance.retry = RetryPolicy(
                max_retries=kwargs["max_retries"], initial_delay=0.001, max_delay=0.005
            )
            made.append(instance)
            return instance

        yield make
        for instance in made:
            await instance.aclose()

    return server, make_model


def model_fixtures(
    server_class: Callable[[], Any], model_class: type, default_model: str
) -> tuple[Any, Any]:
    """The `server` and `make_model` fixtures of one provider's embedding or speech tests (a
    backoff near zero): `make_model(model, cls=..., credential=None, **kwargs)`."""

    @pytest.fixture(name="server")
    def server() -> Iterator[Any]:
        with server_class() as running:
            yield running

    @pytest.fixture(name="make_model")
    async def make_model(server: Any) -> AsyncIterator[ModelFactory]:
        made: list[Any] = []

        def make(model: str = default_model, cls: type = model_class, **kwargs: Any) -> Any:
            kwargs.setdefault("retry_delay", 0.001)
            credential = kwargs.pop("credential", None) or server.credential()
            made.append(cls(credential, model, **kwargs))
            return made[-1]

        yield make
        for instance in made:
            await instance.aclose()

    return server, make_model
