"""Statements counted as the drivers send them (`asyncpg_sent`, `sqlite_sent` in conftest).

Below SQLAlchemy, so what the store sends straight on a driver
(`parley.service.store.prepared`) is counted as what goes through SQLAlchemy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from asyncpg.prepared_stmt import PreparedStatement
from sqlalchemy import Engine, event


@dataclass
class Sent:
    """The statements sent while `on` (each with what sent it), in order."""

    on: bool = False
    statements: list[str] = field(default_factory=list)
    commits: int = 0
    """Transactions committed (SQLite's engines)."""
    straight: list[str] = field(default_factory=list)
    """Of `statements`, those sent on asyncpg's connection itself, not by SQLAlchemy."""

    def event_batches(self) -> list[str]:
        """The statements that store a batch of events on their own (not with a run's end)."""
        return [s for s in self.statements if s.startswith(_BATCHES)]

    def others(self) -> list[str]:
        # A poll for cancel requests comes every half second of a run: not the run's own.
        polls = "SELECT runs.id, runs.cancel_action"
        return [s for s in self.statements if not s.startswith((polls, *_BATCHES))]


# A batch of events on PostgreSQL (rows as arrays, the doorbell beside), and on SQLite.
_BATCHES = ("WITH added AS", "INSERT INTO run_events")


def _counted(
    sent: Sent, method: Callable[..., Any], query_of: Callable[..., str], *, straight: bool
) -> Any:
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if sent.on:
            sent.statements.append(query_of(self, *args))
            if straight:
                sent.straight.append(sent.statements[-1])
        return await method(self, *args, **kwargs)

    return counted


def count_asyncpg(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every statement asyncpg executes (each one a round trip) while `sent.on`.

    What SQLAlchemy's asyncpg dialect calls (prepared statements' executions, and the
    connection's own: BEGIN, COMMIT, ROLLBACK, executemany) and what the store sends on the
    connection itself (`fetch`: also in `straight`); a statement's PREPARE is left out (once
    per connection: how many connections the pool opened is not the run's doing).
    """
    sent = Sent()
    connection = asyncpg.connection.Connection
    for name in ("execute", "executemany", "fetch", "fetchrow", "fetchval"):
        method = getattr(connection, name)
        query: Callable[..., str] = lambda _c, q, *_: q  # noqa: E731
        # SQLAlchemy's dialect sends its statements prepared, and only BEGIN, COMMIT and
        # ROLLBACK (`execute`) and `executemany` on the connection itself.
        counted = _counted(sent, method, query, straight=name == "fetch")
        monkeypatch.setattr(connection, name, counted)
    for name in ("fetch", "fetchrow", "fetchval", "executemany", "cursor"):
        method = getattr(PreparedStatement, name)
        query_of: Callable[..., str] = lambda stmt, *_: stmt.get_query()  # noqa: E731
        monkeypatch.setattr(
            PreparedStatement, name, _counted(sent, method, query_of, straight=False)
        )
    return sent


@contextlib.contextmanager
def count_sqlite() -> Iterator[Sent]:
    """Every statement SQLite runs while `sent.on`, on the connections of the engines opened.

    Seen by `sqlite3`'s own trace callback, so what the store runs on the driver's cursor
    (`parley.service.store.prepared`) is counted as what runs through SQLAlchemy; BEGIN and
    the pragmas are left out, COMMITs counted apart.
    """
    sent = Sent()

    def traced(sql: str) -> None:
        if not sent.on:
            return
        word = sql.split(None, 1)[0].upper()
        if word == "COMMIT":
            sent.commits += 1
        elif word not in ("BEGIN", "PRAGMA"):
            sent.statements.append(sql)

    def connected(dbapi_connection: Any, _record: Any) -> None:
        trace = getattr(dbapi_connection, "set_trace_callback", None)  # sqlite3's, not aiosqlite's
        if trace is not None:
            trace(traced)

    event.listen(Engine, "connect", connected)
    try:
        yield sent
    finally:
        event.remove(Engine, "connect", connected)
