"""The service's persistent state: `Store` (SQLAlchemy async), and per-thread locks.

The store runs on SQLite or PostgreSQL; the locks keep two runs off one thread.
"""

from parley.service.store.locks import ThreadLocks, thread_locks
from parley.service.store.store import ApiKeyRecord, RunRecord, Store, ThreadRecord, hash_key

__all__ = [
    "ApiKeyRecord",
    "RunRecord",
    "Store",
    "ThreadLocks",
    "ThreadRecord",
    "hash_key",
    "thread_locks",
]
