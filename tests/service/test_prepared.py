"""The store's statements run on the driver itself (`parley.service.store.prepared`): on
SQLite's own cursor and on asyncpg's connection, what they store is what SQLAlchemy would
have stored, what they cannot run is refused, and the driver's errors come as SQLAlchemy's."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy.exc import IntegrityError, InterfaceError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from parley.service.store import Store
from parley.service.store.prepared import Counted, execute, executemany, fetch
from parley.service.store.runners import is_database_down
from parley.service.store.store import _Run, _run_values
from parley.service.store.tables import messages, runs, threads

_NOW = datetime(2026, 12, 2, 20, 0, 0, tzinfo=UTC)  # no microseconds: formatted in full still


def _thread(thread_id: str) -> dict[str, Any]:
    values = _run_values("r-" + thread_id, thread_id, "ann", "echo", "m", _NOW)
    return {**values, "_title": "a title"}


def _raw_rows(path: Path, table: str, key: str) -> list[dict[str, Any]]:
    """The rows as SQLite holds them (its own text for datetimes and JSON), sorted by `key`,
    without their ids."""
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
    names = rows[0].keys() if rows else []  # a Row iterates over its values, not its names
    return [{k: row[k] for k in names if k not in ("id", "thread_id")} for row in rows]


async def test_what_it_stores_is_what_sqlalchemy_stores(store: Store, sqlite_url: str) -> None:
    fast, slow = _thread("fast"), _thread("slow")

    def both(conn: Connection) -> None:
        for values, run in ((fast, execute), (slow, None)):
            if run is None:  # through SQLAlchemy, as before
                conn.execute(_Run.make_thread, values)
                conn.execute(_Run.record, values)
            else:
                run(conn, _Run.make_thread, values)
                run(conn, _Run.record, values)

    await store.transact(both)
    path = Path(sqlite_url.split("///", 1)[1])
    made = _raw_rows(path, "threads", "id")
    assert made[0] == made[1]
    fast_run, slow_run = _raw_rows(path, "runs", "thread_id")
    # The same text for each value: datetimes, JSON None ('null'), booleans, the column's
    # scalar default (`events_expired`) that the statement leaves to the table.
    assert fast_run == slow_run
    record = await store.get_run("r-fast", "ann")
    assert record is not None
    assert record.status == "running"
    assert record.started_at == _NOW


async def test_many_rows_in_one_execution_and_rows_read_by_position(store: Store) -> None:
    values = _thread("t")
    rows = [
        {
            "user_id": "ann",
            "thread_id": "t",
            "id": f"m{i}",
            "run_id": None,
            "role": "user",
            "data": "{}",
            "created_at": _NOW,
        }
        for i in range(3)
    ]

    def work(conn: Connection) -> Any:
        execute(conn, _Run.make_thread, values)
        executemany(conn, insert(messages), rows)
        claim = execute(conn, _Run.claim, values).fetchone()
        ids = execute(conn, select(messages.c.id).order_by(messages.c.seq), {}).fetchall()
        return claim, [row[0] for row in ids]

    claim, ids = await store.transact(work)
    assert tuple(claim) == (0, 0, 0)  # the thread exists: nothing running, pending, queued
    assert ids == ["m0", "m1", "m2"]


async def test_a_missing_parameter_is_named(store: Store) -> None:
    values = _thread("t")
    del values["_agent"]
    with pytest.raises(KeyError, match="_agent"):
        await store.transact(lambda conn: execute(conn, _Run.make_thread, values))
    assert await store.get_thread("t", "ann") is None  # nothing was stored


async def test_what_it_cannot_run_is_refused(store: Store) -> None:
    table = Table(
        "numbered",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("stamp", String, default=lambda: "now"),
    )
    with pytest.raises(TypeError, match="scalar default"):
        await store.transact(lambda conn: execute(conn, insert(table), {"id": 1}))
    in_list = select(threads.c.id).where(threads.c.id.in_(["a", "b"]))
    with pytest.raises(TypeError, match="expanding"):
        await store.query(lambda conn: execute(conn, in_list, {}).fetchall())
    assert runs.c.id is not None


# -- PostgreSQL: straight on asyncpg ------------------------------------------------------------


@pytest.fixture
async def pg_store(postgres_db_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(postgres_db_url)
    yield opened
    await opened.close()


def _without_ids(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row._mapping.items() if k not in ("id", "thread_id")} for row in rows]


async def test_what_asyncpg_stores_is_what_sqlalchemy_stores(pg_store: Store) -> None:
    fast, slow = _thread("fast"), _thread("slow")
    async with pg_store.engine.connect() as conn:
        # Straight on the driver: each statement commits on its own (no BEGIN was sent).
        assert await fetch(conn, _Run.make_thread, fast) == []
        await fetch(conn, _Run.record, fast)
        await conn.execute(_Run.make_thread, slow)
        await conn.execute(_Run.record, slow)
        await conn.commit()
        made = (await conn.execute(select(threads).order_by(threads.c.id))).all()
        ran = (await conn.execute(select(runs).order_by(runs.c.thread_id))).all()
    # The same values: datetimes, JSON None, booleans, the column's scalar default.
    assert _without_ids(made)[0] == _without_ids(made)[1]
    assert _without_ids(ran)[0] == _without_ids(ran)[1]
    record = await pg_store.get_run("r-fast", "ann")
    assert record is not None
    assert (record.status, record.started_at) == ("running", _NOW)


async def test_a_count_sent_straight_on_asyncpg_is_read_by_position(pg_store: Store) -> None:
    values = _thread("t")
    counted = Counted(select(func.count()).select_from(threads), {})
    async with pg_store.engine.connect() as conn:
        assert await counted.direct(conn) == 0
        await fetch(conn, _Run.make_thread, values)
        assert await counted.direct(conn) == 1
        rows = await fetch(conn, _Run.claim, values)
    assert [tuple(row) for row in rows] == [(0, 0, 0)]
    # The same work runs as any other in a transaction, through SQLAlchemy.
    assert await pg_store.transact(counted) == 1


async def test_a_postgres_error_comes_as_sqlalchemys_and_the_connection_goes_on(
    pg_store: Store,
) -> None:
    values = _thread("t")
    async with pg_store.engine.connect() as conn:
        await fetch(conn, insert(threads), _thread_row(values))
        with pytest.raises(IntegrityError) as raised:
            await fetch(conn, insert(threads), _thread_row(values))
        assert raised.value.orig is not None
        assert getattr(raised.value.orig, "sqlstate", None) == "23505"  # a unique key
        assert not is_database_down(raised.value)
        assert not conn.invalidated
        assert await Counted(select(func.count()).select_from(threads), {}).direct(conn) == 1


async def test_a_lost_postgres_connection_is_said_down_and_left_out_of_the_pool(
    pg_store: Store,
) -> None:
    async with pg_store.engine.connect() as conn:
        lost = await _backend(conn)
        async with pg_store.engine.connect() as other:
            await fetch(other, select(func.pg_terminate_backend(lost)), {})
        with pytest.raises(InterfaceError) as raised:
            await _backend(conn)
        assert is_database_down(raised.value)
        assert raised.value.connection_invalidated
        assert conn.invalidated
    async with pg_store.engine.connect() as conn:  # the pool lends a new connection
        assert await _backend(conn) != lost


async def test_a_postgres_statement_over_its_timeout_is_a_timeout(postgres_db_url: str) -> None:
    engine = create_async_engine(postgres_db_url, connect_args={"command_timeout": 0.2})
    try:
        async with engine.connect() as conn:
            with pytest.raises(TimeoutError):
                await fetch(conn, _SLEEP, {"s": 5})
            assert (await fetch(conn, select(literal(1)), {}))[0][0] == 1  # it goes on
    finally:
        await engine.dispose()


def _thread_row(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "user_id": values["_user"],
        "id": values["_thread"],
        "agent": values["_agent"],
        "title": "",
        "created_at": _NOW,
        "updated_at": _NOW,
    }


async def test_a_postgres_statement_stopped_midway_leaves_its_connection_out_of_the_pool(
    pg_store: Store,
) -> None:
    async with pg_store.engine.connect() as conn:
        stopped = await _backend(conn)
        task = asyncio.create_task(fetch(conn, _SLEEP, {"s": 30}))
        await asyncio.sleep(0.3)  # under way on the server
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conn.invalidated  # its state unknown: never lent again
    async with pg_store.engine.connect() as conn:
        assert await _backend(conn) != stopped


_SLEEP = select(func.pg_sleep(bindparam("s", type_=Float)))


async def _backend(conn: AsyncConnection) -> int:
    """The server process behind `conn` (another one is another connection)."""
    (pid,) = (await fetch(conn, select(func.pg_backend_pid()), {}))[0]
    return int(pid)
