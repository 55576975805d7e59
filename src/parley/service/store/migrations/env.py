"""Alembic's environment for parley's store: runs on the connection the store hands it.

The store calls `alembic.command.upgrade` inside `AsyncConnection.run_sync`, passing the
synchronous connection in `config.attributes["connection"]`; there is no alembic.ini and no
offline mode.
"""

from __future__ import annotations

from alembic import context

from parley.service.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
