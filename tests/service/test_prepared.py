"""The store's statements run on SQLite's own cursor (`parley.service.store.prepared`): what
they store is what SQLAlchemy would have stored, and what they cannot run is refused."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Connection, Integer, MetaData, String, Table, insert, select

from parley.service.store import Store
from parley.service.store.prepared import execute, executemany
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
