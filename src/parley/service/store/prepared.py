"""The store's hot statements compiled once and run on the driver itself.

For statements built once (the store's, module constants): each is compiled at its first
execution with a set of parameter names, and kept. The compiler and the types stay
SQLAlchemy's (the SQL, the order of the parameters, each type's conversion of a value, a
column's scalar default are SQLAlchemy's, found once a statement); what is skipped is its
work for every execution (its execution context, parameter processing, result set-up and
events), which cost about as much CPU as the database's own work for a run's statements.

- **SQLite**: `execute` and `executemany` hand the converted parameters to `sqlite3`, in the
  connection's transaction, as `Connection.execute` would (a run's opening and end,
  measured: 0.58 ms through SQLAlchemy, 0.43 ms on the cursor). On any other database they
  are `Connection.execute`. `sqlite3`'s trace callback sees these executions; SQLAlchemy's
  statement events do not.
- **PostgreSQL**: `fetch` runs a statement straight on the asyncpg connection under an
  `AsyncConnection`, from the event loop (no greenlet, no cursor adapter); a database error
  comes as SQLAlchemy's (`sqlalchemy.exc.DBAPIError` and its kinds, the driver's error as
  `orig`), and a connection it finds lost is invalidated, as SQLAlchemy does. `Counted` is a
  one-statement write that a runner can send this way.

What `execute` returns has `fetchone`, `fetchall` and `rowcount`; rows are tuples (by
position, not by name), as are `fetch`'s (asyncpg's records).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import ClauseElement, Connection, Executable
from sqlalchemy import exc as sqlalchemy_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Counted", "Rows", "execute", "executemany", "fetch", "is_closed"]


class Rows(Protocol):
    """What an execution returns: a DB-API cursor (SQLite) or SQLAlchemy's result."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row (a tuple by position), or None."""
        ...

    def fetchall(self) -> Sequence[Any]:
        """The rows left."""
        ...


class _Prepared:
    """A statement compiled for one dialect and one set of parameter names."""

    __slots__ = ("convert", "fixed", "names", "required", "sql", "statement")

    def __init__(self, statement: Executable, dialect: Dialect, keys: Sequence[str]) -> None:
        self.statement = statement  # kept: the cache is keyed by its id
        if not isinstance(statement, ClauseElement):
            raise TypeError(f"not a SQL statement: {statement!r}")
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        if not isinstance(compiled, SQLCompiler) or not dialect.positional:
            raise TypeError(f"not a positional SQL statement: {statement}")
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise TypeError(f"a statement with expanding parameters: {compiled.string}")
        self.sql = compiled.string
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.fixed: dict[str, Any] = {
            name: value
            for name, value in compiled.construct_params(_check=False).items()
            if value is not None
        }
        for column in (*compiled.insert_prefetch, *compiled.update_prefetch):
            default = column.default if column in compiled.insert_prefetch else column.onupdate
            if default is None or not default.is_scalar:
                raise TypeError(f"column {column.key}: only a scalar default is supported")
            self.fixed[column.key] = default.arg  # type: ignore[attr-defined]
        self.required = frozenset(n for n in self.names if compiled.binds[n].required)
        converters: list[Callable[[Any], Any] | None] = []
        for name in self.names:
            kind = compiled.binds[name].type
            converters.append(kind.dialect_impl(dialect).bind_processor(dialect))
        self.convert = tuple(converters)

    def args(self, values: Mapping[str, Any]) -> list[Any]:
        """The statement's positional parameters from `values` (by name), converted."""
        fixed = self.fixed
        out: list[Any] = []
        for name, convert in zip(self.names, self.convert, strict=True):
            if name in values:
                value = values[name]
            elif name in fixed:
                value = fixed[name]
            elif name in self.required:
                raise KeyError(f"a value is required for the parameter {name!r}: {self.sql}")
            else:
                value = None
            # Every value through its type's conversion, None too (JSON makes it 'null').
            out.append(value if convert is None else convert(value))
        return out


# By the statement, the dialect's kind (one process may hold a SQLite and a PostgreSQL store)
# and the parameters' names.
_cache: dict[tuple[int, type[Dialect], tuple[str, ...]], _Prepared] = {}
_CACHE_SIZE = 256  # far more than the store's statements: a caller's one-off ones go too


def _prepared(statement: Executable, dialect: Dialect, keys: tuple[str, ...]) -> _Prepared:
    key = (id(statement), type(dialect), keys)
    found = _cache.get(key)
    if found is None or found.statement is not statement:
        if len(_cache) >= _CACHE_SIZE:  # bounded: each entry keeps its statement alive
            _cache.clear()
        found = _cache[key] = _Prepared(statement, dialect, keys)
    return found


def execute(conn: Connection, statement: Executable, values: Mapping[str, Any]) -> Rows:
    """Run `statement` with `values` (by name) in `conn`'s transaction (see the module)."""
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, dict(values))
    prepared = _prepared(statement, conn.dialect, tuple(values))
    return _driver(conn).execute(prepared.sql, prepared.args(values))  # type: ignore[no-any-return]


def executemany(conn: Connection, statement: Executable, rows: Sequence[Mapping[str, Any]]) -> Rows:
    """Run `statement` once for each of `rows` (each with the same names), as `execute`."""
    if conn.dialect.name != "sqlite":
        return conn.execute(statement, [dict(row) for row in rows])
    prepared = _prepared(statement, conn.dialect, tuple(rows[0]))
    args = [prepared.args(row) for row in rows]
    return _driver(conn).executemany(prepared.sql, args)  # type: ignore[no-any-return]


def _driver(conn: Connection) -> Any:
    """The `sqlite3` connection under `conn` (its transaction begun, as SQLAlchemy's is)."""
    raw = conn.connection.driver_connection
    if raw is None:
        raise RuntimeError("the connection is closed")
    return raw


# -- PostgreSQL: straight on asyncpg -----------------------------------------------------------


async def fetch(
    conn: AsyncConnection, statement: Executable, values: Mapping[str, Any]
) -> list[Any]:
    """Run `statement` with `values` on the asyncpg connection under `conn`; its rows.

    Outside any transaction SQLAlchemy began (none is begun by it), so a write commits on
    its own; the connection's `command_timeout` bounds it (`TimeoutError`). See the module.
    """
    prepared = _prepared(statement, conn.dialect, tuple(values))
    args = prepared.args(values)
    if conn.sync_connection is None:
        raise RuntimeError("the connection is not open")
    driver = _driver(conn.sync_connection)
    try:
        return await driver.fetch(prepared.sql, *args)  # type: ignore[no-any-return]
    except asyncio.CancelledError:
        # Stopped mid-statement: what the connection is in is unknown, so the pool must not
        # lend it again (SQLAlchemy invalidates a connection on such an exit too).
        with contextlib.suppress(Exception):
            await conn.invalidate()
        raise
    except Exception as exc:
        # Closed, or in a state the driver cannot go on from (the server's FATAL read
        # before the socket's end: a connection killed while it was idle).
        lost = driver.is_closed() or _is_stuck(exc)
        if lost:  # as SQLAlchemy does: the pool drops it instead of lending it out again
            await conn.invalidate()
        raise _as_sqlalchemy(exc, prepared.sql, args, lost=lost) from exc


def is_closed(conn: AsyncConnection) -> bool:
    """Whether the driver's connection under `conn` is closed (or `conn` itself is)."""
    if conn.sync_connection is None or conn.closed or conn.invalidated:
        return True
    return bool(_driver(conn.sync_connection).is_closed())


def _is_stuck(exc: Exception) -> bool:
    import asyncpg  # noqa: PLC0415 - PostgreSQL only (the `postgres` extra)

    return isinstance(exc, asyncpg.InternalClientError)


def _as_sqlalchemy(exc: Exception, sql: str, args: list[Any], *, lost: bool) -> Exception:
    """The driver's error as SQLAlchemy's asyncpg dialect raises it (its kind, `orig`).

    A statement timeout (`TimeoutError`) and errors that are not the driver's stay as they
    are, as they come through SQLAlchemy.
    """
    import asyncpg  # noqa: PLC0415 - PostgreSQL only (the `postgres` extra)

    if lost or (
        isinstance(exc, asyncpg.InterfaceError | OSError) and not isinstance(exc, TimeoutError)
    ):
        return sqlalchemy_exc.InterfaceError(sql, args, exc, connection_invalidated=lost)
    if not isinstance(exc, asyncpg.PostgresError):
        return exc
    state = str(exc.sqlstate or "")
    kind = next((named for prefix, named in _KINDS if state.startswith(prefix)), None)
    return (kind or sqlalchemy_exc.DBAPIError)(sql, args, exc)


_KINDS: tuple[tuple[str, type[sqlalchemy_exc.DBAPIError]], ...] = (
    ("23", sqlalchemy_exc.IntegrityError),  # a constraint
    ("42", sqlalchemy_exc.ProgrammingError),  # syntax, no such table, no right
    ("XX", sqlalchemy_exc.InternalError),  # the server's own failure
)
"""SQLSTATE classes and the kind each is raised as, as SQLAlchemy's asyncpg dialect does;
the rest as `DBAPIError` itself (a lost server among them: `is_database_down` reads its
state)."""


class Counted:
    """A write of ONE statement whose one row is a count: that count.

    A work like any other (a function of a sync connection) in a transaction or a batch; a
    runner that sends it alone on PostgreSQL calls `direct` instead (see `fetch`).
    """

    __slots__ = ("statement", "values")

    def __init__(self, statement: Executable, values: Mapping[str, Any]) -> None:
        self.statement = statement
        self.values = values

    def __call__(self, conn: Connection) -> int:
        """The count, on `conn`, in its transaction."""
        row = execute(conn, self.statement, self.values).fetchone()
        return int(row[0])

    async def direct(self, conn: AsyncConnection) -> int:
        """The count, the statement sent straight on `conn`'s asyncpg connection."""
        rows = await fetch(conn, self.statement, self.values)
        return int(rows[0][0])
