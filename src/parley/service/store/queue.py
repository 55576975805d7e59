"""Runs as jobs: made `pending`, claimed by a worker with a lease, renewed, ended fenced.

A run row is a job (`runs_protocol`). `RunQueue` is one worker's view of the queue (one per
process, named by `worker_id`):

- `create` records a run `pending` with what it needs (`RunInput`, kwargs). A run made for a
  request that waits for it in this process is *reserved* (`worker_id` = this worker, with a
  lease): no other worker takes it while the reservation is renewed; if this process dies,
  the reservation lapses and any worker takes it.
- `claim(run_id)` takes one run: `running`, `worker_id` = me, `attempt` + 1, `lease_until` =
  the database's now + `lease_seconds`. One conditional `UPDATE` whose candidate is picked
  with `FOR UPDATE SKIP LOCKED` on PostgreSQL: two workers never both take a run. A pending
  run is taken only when no run is `running` on its thread and no pending run was queued
  before it there (`enqueue` order); a `running` run is taken over when its lease ran out
  (its worker died or lost the database) and it has attempts left. The caller holds the
  thread's lock (`ThreadLocks`) around the claim and for the whole run: that is the one-run-
  per-thread guard between workers (PostgreSQL's advisory lock belongs to the worker's
  process, so a dead worker frees it).
- `heartbeat` renews the leases this worker holds; a run missing from its answer was lost
  (taken over, cancelled, deleted): its worker stops its copy.
- `finish` records a run's end only if this worker still holds it (`worker_id` = me and
  `attempt` = mine): a worker that lost its lease cannot end a run another took over.
- `give_up` ends `error` the runs whose lease ran out after `max_attempts` starts.

SQLite has one process: the same statements run there (its one writer thread), with the
process's clock for the database's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    and_,
    case,
    exists,
    func,
    literal,
    or_,
    select,
    update,
)

from parley.messages import Msg
from parley.service.runs_protocol import RunInput
from parley.service.store.store import (
    OpenedRun,
    RunRecord,
    Store,
    _append,
    _exists,
    _history,
    _run,
    _title,
)
from parley.service.store.tables import approvals, runs, threads, utcnow

__all__ = ["Candidate", "RunQueue", "new_run_id"]

GAVE_UP_ERROR = (
    "the run was started {attempts} times and each time its worker stopped before it ended "
    "(PARLEY_MAX_ATTEMPTS)"
)


def new_run_id() -> str:
    """A new run's id (the agent's own form: `run_<hex>`)."""
    return f"run_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Candidate:
    """A run a worker may claim: its id and its thread (to lock before claiming)."""

    run_id: str
    thread_id: str
    user_id: str
    takeover: bool = False
    """Whether it is a running run whose worker's lease lapsed (not a pending one)."""


def _now_plus(conn: Connection, seconds: float = 0.0) -> ColumnElement[datetime]:
    """The database's now (plus `seconds`): one clock for every replica's leases.

    SQLite serves one process, whose clock is the only one.
    """
    if conn.dialect.name == "postgresql":
        base: ColumnElement[datetime] = func.now()
        return base + timedelta(seconds=seconds) if seconds else base
    return literal(utcnow() + timedelta(seconds=seconds), DateTime(timezone=True))


def _blocked(now: ColumnElement[datetime]) -> ColumnElement[bool]:
    """Whether another run of the thread goes first: one running, or pending before it."""
    other = runs.alias("other")
    return exists().where(
        other.c.thread_id == runs.c.thread_id,
        other.c.user_id == runs.c.user_id,
        other.c.id != runs.c.id,
        or_(
            other.c.status == "running",
            and_(
                runs.c.status == "pending",
                other.c.status == "pending",
                or_(
                    other.c.queued_at < runs.c.queued_at,
                    and_(other.c.queued_at == runs.c.queued_at, other.c.id < runs.c.id),
                ),
            ),
        ),
    )


def _claimable(
    worker_id: str, max_attempts: int, now: ColumnElement[datetime]
) -> ColumnElement[bool]:
    """A pending run free to take (or reserved by me), or a running one whose lease ran out."""
    return or_(
        and_(
            runs.c.status == "pending",
            or_(
                runs.c.worker_id.is_(None),
                runs.c.worker_id == worker_id,
                runs.c.lease_until < now,
            ),
        ),
        and_(
            runs.c.status == "running",
            runs.c.lease_until < now,
            runs.c.attempt < max_attempts,
            runs.c.input.is_not(None),
        ),
    )


class RunQueue:
    """One worker's side of the run queue (see the module).

    Args:
        store: The store the runs are in.
        worker_id: This worker's name (unique per process).
        lease_seconds: How long a claim lasts unless renewed.
        max_attempts: Starts a run gets in all before it ends `error`.
    """

    def __init__(
        self, store: Store, *, worker_id: str, lease_seconds: float, max_attempts: int
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts

    async def create(
        self,
        run_id: str,
        thread_id: str,
        user_id: str,
        agent: str,
        model: str,
        run_input: RunInput,
        *,
        kwargs: dict[str, Any] | None = None,
        multitask_strategy: str = "enqueue",
        reserve: bool = False,
    ) -> RunRecord:
        """Record a run `pending` on the thread (made for `agent` if new); its record.

        With `reserve`, only this worker takes it while it renews the reservation.
        """
        payload = run_input.model_dump(mode="json")
        lease = self.lease_seconds
        me = self.worker_id

        def work(conn: Connection) -> RunRecord:
            now = utcnow()
            if not _exists(conn, thread_id, user_id):
                conn.execute(
                    threads.insert().values(
                        id=thread_id,
                        user_id=user_id,
                        agent=agent,
                        title=_title([run_input.message] if run_input.message else []),
                        created_at=now,
                        updated_at=now,
                    )
                )
            conn.execute(
                runs.insert().values(
                    id=run_id,
                    thread_id=thread_id,
                    user_id=user_id,
                    agent=agent,
                    model=model,
                    status="pending",
                    cancel_requested=False,
                    started_at=now,
                    queued_at=now,
                    input=payload,
                    kwargs=kwargs or {},
                    multitask_strategy=multitask_strategy,
                    worker_id=me if reserve else None,
                    lease_until=now + timedelta(seconds=lease) if reserve else None,
                    attempt=0,
                )
            )
            return _one(conn, run_id)

        return await self.store.transact(work)

    async def candidates(self, limit: int) -> list[Candidate]:
        """Runs this worker may claim now, oldest first (each still to be claimed)."""
        me, cap = self.worker_id, self.max_attempts

        def work(conn: Connection) -> list[Candidate]:
            now = _now_plus(conn)
            query = (
                select(runs.c.id, runs.c.thread_id, runs.c.user_id, runs.c.status)
                .where(_claimable(me, cap, now), ~_blocked(now))
                .order_by(runs.c.queued_at, runs.c.id)
                .limit(limit)
            )
            return [
                Candidate(r.id, r.thread_id, r.user_id, takeover=r.status == "running")
                for r in conn.execute(query)
            ]

        return await self.store.query(work)

    async def claim(
        self,
        run_id: str,
        *,
        then: Callable[[list[Msg], RunRecord], Sequence[Msg]] | None = None,
    ) -> tuple[RunRecord, OpenedRun] | None:
        """Take the run if it is free to take (call holding its thread's lock); else None.

        In the claim's transaction, a first start (`attempt` 1) opens the run as `open_run`
        does: the input's history seeds an empty thread, pending approvals expire before a
        new message, and `then(history, record)` names the messages stored now (its
        question). A takeover only reads the thread.
        """
        me, cap, lease = self.worker_id, self.max_attempts, self.lease_seconds

        def work(conn: Connection) -> tuple[RunRecord, OpenedRun] | None:
            now = _now_plus(conn)
            pick = (
                select(runs.c.id)
                .where(runs.c.id == run_id, _claimable(me, cap, now), ~_blocked(now))
                .with_for_update(skip_locked=True, of=runs)
                .scalar_subquery()
            )
            taken = conn.execute(
                update(runs)
                .where(runs.c.id == pick)
                .values(
                    status="running",
                    worker_id=me,
                    attempt=runs.c.attempt + 1,
                    lease_until=_now_plus(conn, lease),
                    started_at=case((runs.c.attempt == 0, now), else_=runs.c.started_at),
                )
                .execution_options(synchronize_session=False)
            ).rowcount
            if not taken:
                return None
            record = _one(conn, run_id)
            return record, _open(conn, record, then)

        return await self.store.transact(work)

    async def heartbeat(self, held: dict[str, int]) -> set[str]:
        """Renew the leases of the runs this worker holds ({run id: attempt}); those renewed.

        A pending run reserved here is renewed too (its attempt is 0). One missing from the
        answer is not this worker's any more: stop its copy.
        """
        if not held:
            return set()
        me, lease = self.worker_id, self.lease_seconds

        def work(conn: Connection) -> set[str]:
            until = _now_plus(conn, lease)
            kept: set[str] = set()
            for run_id, attempt in held.items():
                renewed = conn.execute(
                    update(runs)
                    .where(
                        runs.c.id == run_id,
                        runs.c.worker_id == me,
                        runs.c.attempt == attempt,
                        runs.c.status.in_(("running", "pending")),
                    )
                    .values(lease_until=until)
                ).rowcount
                if renewed:
                    kept.add(run_id)
            return kept

        return await self.store.transact(work)

    async def finish(
        self,
        run_id: str,
        attempt: int,
        status: str,
        usage: dict[str, Any] | None,
        error: str | None,
        *,
        last: tuple[str, str, Sequence[Msg]] | None = None,
        rollback: bool = False,
    ) -> bool:
        """Record how a run this worker holds ended (with its last messages); False if lost.

        Fenced: only while `worker_id` is mine and `attempt` my attempt. With `rollback`,
        the run and every message it added are deleted instead.
        """
        return await self.store.end_run(
            run_id,
            status,
            usage,
            error,
            last=last,
            fence=(self.worker_id, attempt),
            rollback=rollback,
        )

    async def give_up(self) -> list[str]:
        """End `error` the runs whose lease ran out after their last allowed start; their ids."""
        cap = self.max_attempts

        def work(conn: Connection) -> list[str]:
            now = _now_plus(conn)
            stuck = and_(
                runs.c.status == "running",
                runs.c.lease_until < now,
                or_(runs.c.attempt >= cap, runs.c.input.is_(None)),
            )
            ids = list(conn.execute(select(runs.c.id).where(stuck)).scalars())
            for run_id in ids:
                row = _one(conn, run_id)
                conn.execute(
                    update(runs)
                    .where(runs.c.id == run_id, stuck)
                    .values(
                        status="error",
                        error=GAVE_UP_ERROR.format(attempts=row.attempt),
                        ended_at=utcnow(),
                        lease_until=None,
                    )
                )
            return ids

        return await self.store.transact(work)


def _one(conn: Connection, run_id: str) -> RunRecord:
    row = conn.execute(select(runs).where(runs.c.id == run_id)).one()
    return _run(row)


def _open(
    conn: Connection,
    record: RunRecord,
    then: Callable[[list[Msg], RunRecord], Sequence[Msg]] | None,
) -> OpenedRun:
    """A claimed run's thread: on its first start, its question stored (see `claim`)."""
    values = {"_thread": record.thread_id, "_user": record.user_id}
    history = _history(conn, values)
    if record.attempt > 1:
        return OpenedRun(history, [])
    run_input = RunInput.model_validate(record.input or {})
    thread = (record.thread_id, record.user_id)
    now = utcnow()
    if run_input.message is not None:
        conn.execute(
            update(approvals)
            .where(
                approvals.c.thread_id == record.thread_id,
                approvals.c.user_id == record.user_id,
                approvals.c.status == "pending",
            )
            .values(status="expired", answered_at=now)
        )
    if run_input.history and not history:
        _append(conn, thread, run_input.history, None, now)
        history = list(run_input.history)
    added = list(then(history, record)) if then is not None else []
    _append(conn, thread, added, record.run_id, now)
    return OpenedRun(history, added)
