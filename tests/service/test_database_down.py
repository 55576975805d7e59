"""Which database errors mean "the database cannot serve now" (503 and retried)."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc

from parley.service.store.runners import is_database_down


def _wrapped(orig: Exception) -> sa_exc.DBAPIError:
    """As SQLAlchemy hands a driver's error up: its generic wrapper around it."""
    return sa_exc.DBAPIError("SELECT 1", None, orig)


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError("refused"),
        TimeoutError("a statement timed out"),  # asyncpg's command_timeout
        sa_exc.TimeoutError("QueuePool limit reached"),
        sa_exc.OperationalError("SELECT 1", None, Exception("gone")),
        _wrapped(asyncpg.exceptions.CannotConnectNowError("the database is shutting down")),
        _wrapped(asyncpg.exceptions.AdminShutdownError("terminating connection")),
        _wrapped(asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed")),
    ],
    ids=lambda e: type(getattr(e, "orig", None) or e).__name__,
)
def test_a_database_that_cannot_serve_now(error: Exception) -> None:
    assert is_database_down(error)


@pytest.mark.parametrize(
    "error",
    [
        sa_exc.IntegrityError("INSERT", None, asyncpg.exceptions.UniqueViolationError("dup")),
        _wrapped(asyncpg.exceptions.UndefinedTableError("no such table")),
        ValueError("not the database's"),
    ],
    ids=lambda e: type(getattr(e, "orig", None) or e).__name__,
)
def test_a_failure_of_the_request_is_not_the_database_being_down(error: Exception) -> None:
    assert not is_database_down(error)
