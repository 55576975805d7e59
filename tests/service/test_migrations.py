"""The migrations build exactly the tables the code describes, on both databases."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection

from parley.service.store import Store
from parley.service.store.tables import metadata


def _differences(connection: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(connection), metadata))


async def _check(url: str) -> None:
    store = await Store.open(url)
    try:
        async with store.engine.connect() as conn:
            # A table or column changed in tables.py without a migration shows up here.
            assert await conn.run_sync(_differences) == []
    finally:
        await store.close()


async def test_migrations_match_the_tables_on_sqlite(sqlite_url: str) -> None:
    await _check(sqlite_url)


async def test_migrations_match_the_tables_on_postgres(postgres_db_url: str) -> None:
    await _check(postgres_db_url)
