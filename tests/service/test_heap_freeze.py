"""A started service keeps the heap it started with out of the collector's full passes.

A full collection scans every tracked object; a service starts with hundreds of thousands,
and under load those passes were most of a request's p99 (`benchmarks/service.py`). So the
lifespan collects what is garbage, freezes the rest (`gc.freeze()`) and gives it back to the
collector at shutdown (`ServiceSettings.gc_freeze`, on by default).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from parley.service import ServiceSettings, create_app
from tests.service._agents import echo_agent


class _Cycle:
    """Garbage only a collection finds: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_off() -> Iterator[None]:
    """No automatic collection meanwhile: only the service's own can collect."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_the_heap_is_frozen_while_the_service_runs_and_given_back_after(
    sqlite_url: str, collector_off: None
) -> None:
    app = create_app(ServiceSettings(database_url=sqlite_url), agents=[echo_agent()])
    garbage = weakref.ref(_Cycle())
    assert garbage() is not None  # nothing collected it yet
    before = gc.get_freeze_count()
    async with app.router.lifespan_context(app):
        assert garbage() is None  # collected first, not frozen
        # The modules, the app, its routes, the store: far more than a handful.
        assert gc.get_freeze_count() - before > 10_000
        response = await _health(app)
        assert response == 200
    assert gc.get_freeze_count() == 0  # collectable again: a dropped app leaks nothing


async def test_without_gc_freeze_nothing_is_frozen(sqlite_url: str, collector_off: None) -> None:
    settings = ServiceSettings(database_url=sqlite_url, gc_freeze=False)
    app = create_app(settings, agents=[echo_agent()])
    garbage = weakref.ref(_Cycle())
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() == 0
        assert garbage() is not None  # and no collection of its own
    del garbage


def test_gc_freeze_is_on_by_default_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ServiceSettings().gc_freeze
    monkeypatch.setenv("PARLEY_GC_FREEZE", "false")
    assert not ServiceSettings().gc_freeze


async def _health(app: FastAPI) -> int:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return (await client.get("/health")).status_code
