"""Service fixtures: an app on a fresh SQLite file, driven in-process through httpx.

`service(*agents, **settings)` builds the app with those agents, runs its lifespan (store
opened and migrated), and returns a `Service` whose `client` talks to it through
`httpx.ASGITransport` (no socket). Tests that need a real socket (a browser, the openai SDK,
client disconnects, other processes) serve the app with `tests.service._live.running`.

`store` is a `Store` opened (and migrated) on `store_url`: this test's SQLite file, unless the
module overrides `store_url` (with `postgres_db_url`, or `database_url`: each database in turn).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley.agents import Agent
from parley.service import AgentRegistry, ServiceSettings, create_app
from parley.service.state import ServiceState
from parley.service.store import Store
from tests.service._sent import Sent, count_asyncpg, count_sqlite


@dataclass
class Service:
    """A running app and an httpx client bound to it."""

    app: FastAPI
    client: httpx.AsyncClient
    settings: ServiceSettings

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.app.state.parley
        return state


MakeService = Callable[..., Awaitable[Service]]


AMBIENT = (
    "AUTH_SECRET",
    "PARLEY_AUTH_SECRET",
    "PARLEY_API_KEYS",
    "PARLEY_HOST",
    "PARLEY_TRUSTED_PROXIES",
    "PARLEY_CORS_ORIGINS",
)
"""The variables of the machine that would turn auth on or change whom the service serves."""


@pytest.fixture
def no_ambient_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Settings come from the test only: none of `AMBIENT`, and no .env of the machine.

    A module asks for it with `pytestmark = pytest.mark.usefixtures("no_ambient_settings")`.
    """
    monkeypatch.chdir(tmp_path)  # a .env is read from the working folder
    for name in AMBIENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """An SQLite database file of this test's own."""
    return f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """Each database the service runs on (PostgreSQL: a fresh database of the test's own)."""
    if request.param == "sqlite":
        return sqlite_url
    url: str = request.getfixturevalue("postgres_db_url")
    return url


@pytest.fixture
def store_url(sqlite_url: str) -> str:
    """The database `store` opens; a module that runs its store elsewhere overrides this."""
    return sqlite_url


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """A store on `store_url`, its migrations run, closed after the test (passed or not)."""
    opened = await Store.open(store_url)
    yield opened
    await opened.close()


@pytest.fixture
async def service(sqlite_url: str) -> AsyncIterator[MakeService]:
    """Make services (each with its lifespan running) that end with the test."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(
            *agents: Agent,
            registry: AgentRegistry | None = None,
            headers: dict[str, str] | None = None,
            **settings: Any,
        ) -> Service:
            settings.setdefault("database_url", sqlite_url)
            # A test process's heap is the whole suite's: freezing it (a full collection
            # first) would cost every start a quarter of a second. `test_heap_freeze.py`
            # starts services with it.
            settings.setdefault("gc_freeze", False)
            config = ServiceSettings(**settings)
            app = create_app(config, agents=registry if registry is not None else list(agents))
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                # A name of this machine: without auth the service answers no other Host.
                base_url="http://127.0.0.1",
                headers=headers,
                timeout=30,
            )
            await stack.enter_async_context(client)
            return Service(app, client, config)

        yield make


@pytest.fixture
def asyncpg_sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every statement asyncpg executes while `sent.on` (`tests/service/_sent.py`)."""
    return count_asyncpg(monkeypatch)


@pytest.fixture
def sqlite_sent() -> Iterator[Sent]:
    """Every statement SQLite runs while `sent.on` (`tests/service/_sent.py`)."""
    with count_sqlite() as sent:
        yield sent
