"""SQLite: a run's statements compiled once and run on the driver's own cursor.

For statements built once (the store's, module constants): each is compiled at its first
execution with a set of parameter names, and kept.

A run's opening and end are a handful of small statements each, and SQLAlchemy Core's work
for every execution (its execution context, parameter processing, result set-up and events)
cost about as much CPU as SQLite's own work for them (a run's opening and end, measured:
0.58 ms through it, 0.43 ms on the cursor).
`execute` keeps SQLAlchemy's compiler and its types (the SQL, the order of the parameters,
each type's conversion of a value, a column's scalar default are SQLAlchemy's, found once a
statement) and skips the rest: the parameters are converted and handed to `sqlite3`, whose
cursor comes back. It runs in the connection's transaction, as `Connection.execute` would.
On any other database it is `Connection.execute`.

What it returns has `fetchone`, `fetchall` and `rowcount`, whichever runs it; rows are
tuples (by position, not by name). SQLAlchemy's statement events do not see these
executions; `sqlite3`'s trace callback does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import ClauseElement, Connection, Executable
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Rows", "execute", "executemany"]


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


_cache: dict[tuple[int, tuple[str, ...]], _Prepared] = {}
_CACHE_SIZE = 256  # far more than the store's statements: a caller's one-off ones go too


def _prepared(statement: Executable, dialect: Dialect, keys: tuple[str, ...]) -> _Prepared:
    key = (id(statement), keys)
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
