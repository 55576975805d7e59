"""The migrations build exactly the tables the code describes, on both databases, and keep
what an older schema holds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from parley.agents.approval import PendingApproval
from parley.messages import Msg
from parley.service.store import Store
from parley.service.store.tables import metadata


def _differences(connection: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(connection), metadata))


async def _check(url: str) -> None:
    store = await Store.open(url)
    try:
        async with store.engine.connect() as conn:
            # A table or column changed in tables.py without a migration shows up here.
            assert await conn.run_sync(_differences) == []
    finally:
        await store.close()


async def test_migrations_match_the_tables_on_sqlite(sqlite_url: str) -> None:
    await _check(sqlite_url)


async def test_migrations_match_the_tables_on_postgres(postgres_db_url: str) -> None:
    await _check(postgres_db_url)


# -- from the previous head, with data in it --------------------------------------------------

_NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_TIME = sa.DateTime(timezone=True)


def _upgrade_to(connection: Connection, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", "parley.service.store:migrations")
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _table(name: str, untyped: str, **typed: Any) -> sa.TableClause:
    """A table of revision 0001: the columns `untyped` names, then those an insert types."""
    columns = [sa.column(c) for c in untyped.split()]
    return sa.table(name, *columns, *(sa.column(c, kind) for c, kind in typed.items()))


def _rows_of_0001(connection: Connection) -> None:
    """Alice's thread `t` with a message, a run, its feedback and a pending approval; bob's `u`."""
    thread = _table("threads", "id user_id agent title", created_at=_TIME, updated_at=_TIME)
    message = _table("messages", "thread_id id run_id role data", created_at=_TIME)
    run = _table(
        "runs",
        "id thread_id user_id agent model status",
        cancel_requested=sa.Boolean,
        started_at=_TIME,
    )
    approval = _table("approvals", "id thread_id run_id data status", created_at=_TIME)
    feedback = _table("feedback", "run_id user_id key score", kwargs=sa.JSON, created_at=_TIME)
    times = {"created_at": _NOW, "updated_at": _NOW}
    for thread_id, user in (("t", "alice"), ("u", "bob")):
        connection.execute(
            sa.insert(thread).values(
                id=thread_id, user_id=user, agent="helper", title=thread_id, **times
            )
        )
        asked = Msg.user(f"{user}'s question")
        connection.execute(
            sa.insert(message).values(
                thread_id=thread_id,
                id=asked.id,
                run_id=f"run_{user}",
                role="user",
                data=asked.model_dump_json(),
                created_at=_NOW,
            )
        )
        connection.execute(
            sa.insert(run).values(
                id=f"run_{user}",
                thread_id=thread_id,
                user_id=user,
                agent="helper",
                model="m",
                status="awaiting_approval",
                cancel_requested=False,
                started_at=_NOW,
            )
        )
    connection.execute(
        sa.insert(approval).values(
            id=PENDING.interrupt_id,
            thread_id="t",
            run_id="run_alice",
            data=PENDING.model_dump_json(),
            status="pending",
            created_at=_NOW,
        )
    )
    connection.execute(
        sa.insert(feedback).values(
            run_id="run_alice", user_id="alice", key="stars", score=1.0, kwargs={}, created_at=_NOW
        )
    )


PENDING = PendingApproval(agent="helper", message_id="m1", calls=[], awaiting=[], iterations=1)


async def _kept_from_0001(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade_to, "0001")
            await conn.run_sync(_rows_of_0001)
    finally:
        await engine.dispose()

    store = await Store.open(url)  # to the head
    try:
        async with store.engine.connect() as conn:
            assert await conn.run_sync(_differences) == []
        # Every row kept, each thread its owner's.
        assert [m.text for m, _ in await store.get_messages("t", "alice")] == ["alice's question"]
        assert [m.text for m, _ in await store.get_messages("u", "bob")] == ["bob's question"]
        assert await store.pending_approvals("t", "alice") == [PENDING]
        assert await store.get_approval(PENDING.interrupt_id, "alice") is not None
        assert [f["key"] for f in await store.get_feedback("run_alice")] == ["stars"]
        thread = await store.get_thread("t", "alice")
        assert thread is not None
        assert (thread.title, thread.status) == ("t", "awaiting_approval")
        assert await store.get_thread("t", "bob") is None

        # Bob may now have a thread `t` of his own, apart from alice's.
        await store.ensure_thread("t", "bob", "helper")
        await store.add_messages("t", "bob", [Msg.user("bob's own t")], None)
        assert [m.text for m, _ in await store.get_messages("t", "alice")] == ["alice's question"]

        # The keys still cascade: alice's thread goes with all it holds, bob's stay.
        assert await store.delete_thread("t", "alice")
        assert await store.get_feedback("run_alice") == []
        assert await store.get_run("run_alice", "alice") is None
        assert [m.text for m, _ in await store.get_messages("t", "bob")] == ["bob's own t"]
        assert await store.get_run("run_bob", "bob") is not None
    finally:
        await store.close()


async def test_threads_of_the_previous_head_are_kept_on_sqlite(sqlite_url: str) -> None:
    await _kept_from_0001(sqlite_url)


async def test_threads_of_the_previous_head_are_kept_on_postgres(postgres_db_url: str) -> None:
    await _kept_from_0001(postgres_db_url)
