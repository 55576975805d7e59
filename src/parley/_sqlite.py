"""SQLite set-up shared by the stores that keep a file.

The embedding cache, the document index and the service's threads all use it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

__all__ = ["use_wal"]


def use_wal(connection: sqlite3.Connection | Any, timeout: float) -> None:
    """Put the file in WAL mode, waiting up to `timeout` seconds for another process doing it.

    WAL lets readers go on while one process writes, and it is a property of the file, so the
    switch happens once. Two processes opening a new file at once can both hold a read lock
    and want the write lock the switch needs: SQLite answers one of them "database is locked"
    at once rather than wait out its busy timeout (waiting would deadlock), so the wait is
    done here. A file already in WAL mode takes no write lock at all.

    `connection` is a DB-API connection to SQLite: sqlite3's, or SQLAlchemy's adapter of
    aiosqlite's (hence only `cursor()` is used).
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            cursor = connection.cursor()
            try:
                cursor.execute("PRAGMA journal_mode")
                if cursor.fetchone()[0] != "wal":
                    cursor.execute("PRAGMA journal_mode=WAL")
                return
            finally:
                cursor.close()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
