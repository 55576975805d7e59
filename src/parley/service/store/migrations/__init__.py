"""Alembic migrations of the store (run at start-up by `Store.open`)."""
