"""Threads per user: a thread is named by (user_id, id), so each user has ids of their own.

Clients choose thread ids; with one id space for everyone, a user could tell which ids
another user had (404 against 200) and take an id first, so that its owner got 404 for good.
The threads' primary key becomes (user_id, id); messages and approvals get the user of their
thread, and they and runs point at their thread by both columns. Every existing thread, with
its messages, runs, approvals and feedback, is kept.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_CHILDREN = ("messages", "runs", "approvals")
"""The tables whose rows belong to a thread."""
_GIVEN_A_USER = ("messages", "approvals")
"""The children that had no user column (a run always named its user)."""


def _fill_user_ids() -> None:
    """Add `user_id` to messages and approvals, each row's its thread's owner's."""
    for table in _GIVEN_A_USER:
        op.add_column(table, sa.Column("user_id", sa.String(length=128), nullable=True))
        op.execute(
            f"UPDATE {table} SET user_id = "  # the names of this module's tables
            f"(SELECT threads.user_id FROM threads WHERE threads.id = {table}.thread_id)"
        )


_THREAD_COLUMNS = "user_id, id, agent, title, created_at, updated_at"


def _threads_table(name: str, key: list[str]) -> None:
    """Create the threads table (as 0001 has it) under `name`, with `key` its primary key."""
    op.create_table(
        name,
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(*key, name="pk_threads"),
    )


def _key_threads(key: list[str]) -> None:
    """Make `key` the threads' primary key (the children's foreign keys dropped first)."""
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("pk_threads", "threads", type_="primary")
        op.create_primary_key("pk_threads", "threads", key)
        return
    # SQLite cannot alter a primary key: the table is copied (foreign keys are off).
    _threads_table("_threads_new", key)
    op.execute(
        f"INSERT INTO _threads_new ({_THREAD_COLUMNS}) SELECT {_THREAD_COLUMNS} FROM threads"
    )
    op.drop_table("threads")  # and its index
    op.rename_table("_threads_new", "threads")
    op.create_index("ix_threads_user_updated", "threads", ["user_id", "updated_at"])


def upgrade() -> None:
    """Key threads by (user_id, id); point messages, runs and approvals at both columns.

    On SQLite the store runs this with foreign keys off (tables are copied and replaced).
    """
    sqlite = op.get_bind().dialect.name == "sqlite"
    _fill_user_ids()
    if not sqlite:  # the keys lean on the threads' primary key: they go first
        for table in _CHILDREN:
            op.drop_constraint(f"fk_{table}_thread_id_threads", table, type_="foreignkey")
    _key_threads(["user_id", "id"])
    for table in _CHILDREN:
        with op.batch_alter_table(table, schema=None) as batch_op:
            if sqlite:
                batch_op.drop_constraint(f"fk_{table}_thread_id_threads", type_="foreignkey")
            if table in _GIVEN_A_USER:
                batch_op.alter_column(
                    "user_id", existing_type=sa.String(length=128), nullable=False
                )
            batch_op.create_foreign_key(
                f"fk_{table}_user_id_threads",
                "threads",
                ["user_id", "thread_id"],
                ["user_id", "id"],
                ondelete="CASCADE",
            )


def downgrade() -> None:
    """Back to one id space: possible only while no two users have a thread of one id.

    Raises:
        RuntimeError: Two users have threads with the same id (one would be lost).
    """
    bind = op.get_bind()
    shared = bind.execute(
        sa.text("SELECT id FROM threads GROUP BY id HAVING COUNT(*) > 1 LIMIT 1")
    ).scalar_one_or_none()
    if shared is not None:
        raise RuntimeError(
            f"cannot downgrade: several users have a thread {shared!r}; delete or rename all "
            "but one of them first"
        )
    for table in _CHILDREN:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"fk_{table}_user_id_threads", type_="foreignkey")
            if table in _GIVEN_A_USER:
                batch_op.drop_column("user_id")
    _key_threads(["id"])
    for table in _CHILDREN:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_foreign_key(
                f"fk_{table}_thread_id_threads",
                "threads",
                ["thread_id"],
                ["id"],
                ondelete="CASCADE",
            )
