"""The store contract (`store_contract.py`) on the embedded store, one SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from parley.rag import IndexStore, SQLiteIndexStore
from tests.rag.store_contract import Reopen, StoreContract


class TestSQLiteIndexStore(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[IndexStore]:
        opened = await SQLiteIndexStore.open(tmp_path / "index.db")
        yield opened
        await opened.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        async def again() -> IndexStore:
            return await SQLiteIndexStore.open(tmp_path / "index.db")

        return again
