"""The store's tables (SQLAlchemy Core): the schema the migrations build.

A thread is named by its user and its id together (the primary key `(user_id, id)`): ids
are the clients' choice, so each user has ids of their own, and one user's thread `t` tells
nothing about another's. Its messages, runs and approvals point at it by both columns.
Messages are kept whole, as `Msg` JSON, with the few columns queries need beside them
(thread, run, role, order). Times are UTC. Deleting a thread deletes its messages, runs,
approvals and feedback (foreign keys cascade; SQLite enforces them with `PRAGMA
foreign_keys=ON`, which the store sets on every connection).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = [
    "api_keys",
    "approvals",
    "feedback",
    "messages",
    "metadata",
    "run_events",
    "runs",
    "threads",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite gives autoincrement only to INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit sequence.
_SEQ = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Now, in UTC (the store's only time zone)."""
    return datetime.now(UTC)


def _time(name: str, *, nullable: bool = False, index: bool = False) -> Column[datetime]:
    return Column(name, DateTime(timezone=True), nullable=nullable, index=index)


def _thread_columns(*, index: bool) -> tuple[Column[str], Column[str], ForeignKeyConstraint]:
    """The thread a row belongs to (its user and id); deleting the thread deletes the row."""
    return (
        Column("user_id", String(128), nullable=False),
        Column("thread_id", String(128), nullable=False, index=index),
        ForeignKeyConstraint(
            ["user_id", "thread_id"], ["threads.user_id", "threads.id"], ondelete="CASCADE"
        ),
    )


api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("user_id", String(128), nullable=False, index=True),
    Column("name", String(200), nullable=False, default=""),
    # SHA-256 of the key: keys are 256-bit random tokens, so a fast hash cannot be reversed
    # and one indexed lookup finds the key's user.
    Column("key_hash", String(64), nullable=False, unique=True),
    _time("created_at"),
    _time("revoked_at", nullable=True),
)

threads = Table(
    "threads",
    metadata,
    Column("user_id", String(128), primary_key=True),
    Column("id", String(128), primary_key=True),
    Column("agent", String(128), nullable=False),
    Column("title", String(200), nullable=False, default=""),
    _time("created_at"),
    _time("updated_at"),
    Index("ix_threads_user_updated", "user_id", "updated_at"),
)

messages = Table(
    "messages",
    metadata,
    Column("seq", _SEQ, primary_key=True, autoincrement=True),
    *_thread_columns(index=False),
    Column("id", String(64), nullable=False),
    Column("run_id", String(64), nullable=True, index=True),
    Column("role", String(16), nullable=False),
    Column("data", Text, nullable=False),
    _time("created_at"),
    Index("ix_messages_thread_seq", "thread_id", "seq"),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    *_thread_columns(index=True),
    Column("agent", String(128), nullable=False),
    Column("model", String(200), nullable=False, default=""),
    Column("status", String(24), nullable=False),
    Column("error", Text, nullable=True),
    Column("usage", JSON, nullable=True),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    _time("started_at"),
    _time("ended_at", nullable=True),
    # -- a run as a job (durable runs): what a worker needs to run it, and who holds it ------
    # When it was asked for: runs wait on their thread in this order (`enqueue`).
    _time("queued_at"),
    # What to run: the question (Msg JSON), an approval's answer, the request's options.
    Column("input", JSON, nullable=True),
    # What the caller asked beyond the input (LangGraph's stream modes, metadata, config).
    Column("kwargs", JSON, nullable=True),
    Column("multitask_strategy", String(16), nullable=False, default="reject"),
    # How a cancel ends the run: `interrupt` (keep its partial answer) or `rollback`.
    Column("cancel_action", String(16), nullable=True),
    # The worker holding the run, until `lease_until` (then any worker may take it over).
    Column("worker_id", String(64), nullable=True),
    _time("lease_until", nullable=True),
    Column("attempt", Integer, nullable=False, default=0),
    # Whether its event log was dropped (kept `event_retention` seconds after the run ended).
    Column("events_expired", Boolean, nullable=False, default=False),
    Index("ix_runs_status_queued", "status", "queued_at"),
)

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    # 1, 2, 3... per run: the event's id on every stream of the run (`Last-Event-ID`).
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("data", Text, nullable=False),  # the AgentEvent, as JSON
    _time("created_at"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(64), primary_key=True),
    *_thread_columns(index=True),
    Column("run_id", String(64), nullable=False),
    Column("data", Text, nullable=False),  # the PendingApproval, as JSON
    Column("status", String(16), nullable=False),  # pending, answered, expired
    _time("created_at"),
    _time("answered_at", nullable=True),
)

feedback = Table(
    "feedback",
    metadata,
    Column("id", _SEQ, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("user_id", String(128), nullable=False),
    Column("key", String(200), nullable=False),
    Column("score", Float, nullable=False),
    Column("kwargs", JSON, nullable=False),
    _time("created_at"),
    Index("ix_feedback_run", "run_id"),
)
