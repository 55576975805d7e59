"""Durable runs: runs are jobs workers claim with a lease, and each run keeps its events.

A run row gains what a worker needs to run it anywhere (`input`, `kwargs`), its place in its
thread's queue (`queued_at`, `multitask_strategy`), who holds it and until when (`worker_id`,
`lease_until`, `attempt`), how a cancel ends it (`cancel_action`), and whether its event log
was dropped after its retention (`events_expired`). `run_events` keeps every event of a run in
order, so a stream can be picked up again from any replica. Existing runs are kept: their
`queued_at` is their start, and they have no input (they cannot be taken over).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 03:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add the job columns to runs (filled for existing rows), and the run_events table."""
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("queued_at", _TIME, nullable=True))
        batch_op.add_column(sa.Column("input", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("kwargs", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column(
                "multitask_strategy", sa.String(length=16), nullable=False, server_default="reject"
            )
        )
        batch_op.add_column(sa.Column("cancel_action", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("worker_id", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("lease_until", _TIME, nullable=True))
        batch_op.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(
            sa.Column("events_expired", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.execute("UPDATE runs SET queued_at = started_at")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.alter_column("queued_at", existing_type=_TIME, nullable=False)
        batch_op.alter_column("multitask_strategy", server_default=None)
        batch_op.alter_column("attempt", server_default=None)
        batch_op.alter_column("events_expired", server_default=None)
        batch_op.create_index("ix_runs_status_queued", ["status", "queued_at"], unique=False)
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_events")),
    )


def downgrade() -> None:
    """Drop the run_events table and the job columns (the runs themselves stay)."""
    op.drop_table("run_events")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_status_queued")
        for column in (
            "events_expired",
            "attempt",
            "lease_until",
            "worker_id",
            "cancel_action",
            "multitask_strategy",
            "kwargs",
            "input",
            "queued_at",
        ):
            batch_op.drop_column(column)
