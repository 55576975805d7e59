"""Claiming runs on PostgreSQL: a hand-written `FOR UPDATE SKIP LOCKED` claim beside pgqueuer.

Issue 20 asks for the queue of durable runs to be chosen by measurement. Each row puts the
same number of jobs in a table and lets N workers (each on an asyncpg connection of its own,
all in one process) take them until none is left, each job claimed once and finished once:

- **skip locked**: parley's claim, one statement, `UPDATE ... WHERE id = (SELECT id ... WHERE
  status = 'pending' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`, setting the
  worker, a lease (`now() + 30 s`) and the attempt as parley's runs table does; then the
  finish, fenced on the worker and the attempt (`UPDATE ... WHERE id = $1 AND worker_id = $2
  AND attempt = $3`).
- **skip locked, 10 a claim**: the same claim taking up to 10 jobs a statement (`WHERE id IN
  (... LIMIT 10)`), finished together (`WHERE id = ANY($1) AND worker_id = $2`): what
  batching alone buys, beside pgqueuer's manager, which batches 10.
- **pgqueuer dequeue**: pgqueuer's own claim query (`Queries.dequeue`, batch size 1: its CTEs
  with `FOR UPDATE SKIP LOCKED`, marking the job `picked` with its worker and heartbeat), then
  its finish (`Queries.log_jobs`: the job moved to its log table), the same loop as above.
- **pgqueuer manager**: pgqueuer as its users run it: one `QueueManager` per worker
  (`run(mode=drain)`, its default batch of 10, LISTEN/NOTIFY, buffered status writes), the
  job a no-op. Its claims are internal, so the row has jobs/s and no claim latency.

Figures: jobs/s (all jobs over the wall time from the first claim to the last finish), the
claim's latency p50/p99 (the claim statement's round trip, as the worker sees it),
duplicates (jobs that more than one claim returned: must be 0) and lost (jobs not finished
at the end: must be 0). Rows alternate the contenders, round after round; the ratio is
skip locked over pgqueuer dequeue.

The workers run in a throwaway virtualenv with pinned `pgqueuer[asyncpg]` and the same
asyncpg as parley's (`_bench_venv.py`, made on first use), both contenders in the same
interpreter; pgqueuer is never installed into parley's environment. PostgreSQL is
`--postgres-url` / env `PARLEY_BENCH_POSTGRES_URL`, else a throwaway cluster made as the
tests make theirs (fsync off).

Run: `python benchmarks/run_queue.py [--jobs 5000] [--workers 1,4,16] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _bench_venv  # noqa: E402

PGQUEUER = ["pgqueuer[asyncpg]==1.6.0", "asyncpg==0.32.0"]
"""The workers' virtualenv: pgqueuer pinned, asyncpg as parley's lock file has it."""
CONTENDERS = ("skip locked", "skip locked, 10 a claim", "pgqueuer dequeue", "pgqueuer manager")
BATCH = 10
"""Jobs a batched claim takes at once (pgqueuer's manager's default batch)."""
LEASE = "30 seconds"

# -- the workers' side (the throwaway virtualenv: asyncpg and pgqueuer only) ------------------

_SETUP = """
DROP TABLE IF EXISTS bench_runs;
CREATE TABLE bench_runs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending',
    worker_id text,
    lease_until timestamptz,
    attempt int NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_runs_pending ON bench_runs (id) WHERE status = 'pending';
"""
_CLAIM = f"""
UPDATE bench_runs SET status = 'running', worker_id = $1,
    lease_until = now() + interval '{LEASE}', attempt = attempt + 1
WHERE id = (
    SELECT id FROM bench_runs WHERE status = 'pending'
    ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1
)
RETURNING id, attempt
"""
_FINISH = """
UPDATE bench_runs SET status = 'success', lease_until = NULL
WHERE id = $1 AND worker_id = $2 AND attempt = $3
"""
_CLAIM_MANY = f"""
UPDATE bench_runs SET status = 'running', worker_id = $1,
    lease_until = now() + interval '{LEASE}', attempt = attempt + 1
WHERE id IN (
    SELECT id FROM bench_runs WHERE status = 'pending'
    ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $2
)
RETURNING id, attempt
"""
_FINISH_MANY = """
UPDATE bench_runs SET status = 'success', lease_until = NULL
WHERE id = ANY($1::bigint[]) AND worker_id = $2
"""


T = TypeVar("T")
_LOST_RUNS = "SELECT count(*) FROM bench_runs WHERE status <> 'success'"
_LOST_JOBS = "SELECT count(*) FROM pgqueuer"


class _Tally:
    """What a run's workers record: how long each claim took, and each job they took."""

    def __init__(self) -> None:
        self.claims: list[float] = []
        self.taken: list[int] = []

    async def claim(self, claiming: Awaitable[T]) -> T:
        """What `claiming` gives, its time recorded."""
        start = time.perf_counter()
        claimed = await claiming
        self.claims.append(time.perf_counter() - start)
        return claimed


async def _drive(
    dsn: str,
    workers: int,
    setup: Any,
    work: Callable[[Any], Awaitable[None]],
    lost_query: str,
    tally: _Tally,
) -> dict[str, Any]:
    """`work` on `workers` connections of their own, all at once, timed; then what is left
    undone (`lost_query` on `setup`), and every connection closed."""
    import asyncpg  # noqa: PLC0415

    connections = [await asyncpg.connect(dsn) for _ in range(workers)]
    start = time.perf_counter()
    await asyncio.gather(*(work(conn) for conn in connections))
    wall = time.perf_counter() - start
    lost = await setup.fetchval(lost_query)
    for conn in [*connections, setup]:
        await conn.close()
    return _result(wall, tally.claims, tally.taken, lost)


async def _setup_runs(dsn: str, jobs: int) -> Any:
    import asyncpg  # noqa: PLC0415

    setup = await asyncpg.connect(dsn)
    await setup.execute(_SETUP)
    await setup.execute(
        "INSERT INTO bench_runs (status) SELECT 'pending' FROM generate_series(1, $1)", jobs
    )
    await setup.execute("VACUUM ANALYZE bench_runs")
    return setup


async def _skip_locked(dsn: str, workers: int, jobs: int) -> dict[str, Any]:
    setup = await _setup_runs(dsn, jobs)
    tally = _Tally()

    async def work(conn: Any) -> None:
        me = uuid.uuid4().hex
        while (row := await tally.claim(conn.fetchrow(_CLAIM, me))) is not None:
            tally.taken.append(row["id"])
            await conn.execute(_FINISH, row["id"], me, row["attempt"])

    return await _drive(dsn, workers, setup, work, _LOST_RUNS, tally)


async def _skip_locked_many(dsn: str, workers: int, jobs: int) -> dict[str, Any]:
    setup = await _setup_runs(dsn, jobs)
    tally = _Tally()

    async def work(conn: Any) -> None:
        me = uuid.uuid4().hex
        while rows := await tally.claim(conn.fetch(_CLAIM_MANY, me, BATCH)):
            ids = [row["id"] for row in rows]
            tally.taken.extend(ids)
            await conn.execute(_FINISH_MANY, ids, me)

    return await _drive(dsn, workers, setup, work, _LOST_RUNS, tally)


async def _pgqueuer_install(dsn: str, jobs: int) -> Any:
    import asyncpg  # noqa: PLC0415
    from pgqueuer import Queries  # noqa: PLC0415

    setup = await asyncpg.connect(dsn)
    queries = Queries.from_asyncpg_connection(setup)
    if await queries.schema_is_installed():
        await queries.uninstall()
    await queries.install()
    batch = 1000
    for first in range(0, jobs, batch):
        count = min(batch, jobs - first)
        await queries.enqueue(["bench"] * count, [None] * count, [0] * count)
    await setup.execute("VACUUM ANALYZE pgqueuer")
    return setup


async def _pgqueuer_dequeue(dsn: str, workers: int, jobs: int) -> dict[str, Any]:
    from pgqueuer import Queries  # noqa: PLC0415
    from pgqueuer.ports.repository import EntrypointExecutionParameter  # noqa: PLC0415
    from pgqueuer.types import QueueManagerId  # noqa: PLC0415

    setup = await _pgqueuer_install(dsn, jobs)
    entrypoints = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
    tally = _Tally()

    async def work(conn: Any) -> None:
        queries = Queries.from_asyncpg_connection(conn)
        me = QueueManagerId(uuid.uuid4())
        while True:
            picked = await tally.claim(
                queries.dequeue(
                    batch_size=1,
                    entrypoints=entrypoints,  # type: ignore[arg-type]
                    queue_manager_id=me,
                    global_concurrency_limit=None,
                    heartbeat_timeout=timedelta(seconds=30),
                )
            )
            if not picked:
                return
            tally.taken.extend(job.id for job in picked)
            await queries.log_jobs([(job, "successful", None) for job in picked])

    return await _drive(dsn, workers, setup, work, _LOST_JOBS, tally)


async def _pgqueuer_manager(dsn: str, workers: int, jobs: int) -> dict[str, Any]:
    import asyncpg  # noqa: PLC0415
    from pgqueuer import AsyncpgDriver, Queries, QueueManager  # noqa: PLC0415
    from pgqueuer.types import QueueExecutionMode  # noqa: PLC0415

    setup = await _pgqueuer_install(dsn, jobs)
    taken: list[int] = []
    managers = []
    for _ in range(workers):
        manager = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(dsn))))

        @manager.entrypoint("bench")
        async def job(job: Any) -> None:
            taken.append(job.id)

        managers.append(manager)
    start = time.perf_counter()
    await asyncio.gather(*(m.run(mode=QueueExecutionMode.drain) for m in managers))
    wall = time.perf_counter() - start
    lost = await setup.fetchval(_LOST_JOBS)
    await setup.close()
    return _result(wall, [], taken, lost)


def _result(wall: float, claims: list[float], taken: list[int], lost: int) -> dict[str, Any]:
    counts = Counter(taken)
    return {
        "wall": wall,
        "jobs": len(counts),
        "claims": claims,
        "duplicates": sum(n - 1 for n in counts.values() if n > 1),
        "lost": int(lost),
    }


def _work(contender: str, dsn: str, workers: int, jobs: int) -> None:
    run = {
        "skip locked": _skip_locked,
        "skip locked, 10 a claim": _skip_locked_many,
        "pgqueuer dequeue": _pgqueuer_dequeue,
        "pgqueuer manager": _pgqueuer_manager,
    }[contender]
    print(json.dumps(asyncio.run(run(dsn, workers, jobs))), flush=True)


# -- the benchmark's side (parley's environment: the throwaway PostgreSQL) ---------------------


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _measure(python: Path, contender: str, dsn: str, workers: int, jobs: int) -> dict[str, Any]:
    command = [str(python), __file__, "--work", contender, "--dsn", dsn]
    command += ["--workers", str(workers), "--jobs", str(jobs)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{contender} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rate": sum(r["jobs"] for r in results) / sum(r["wall"] for r in results),
        "claims": [c for r in results for c in r["claims"]],
        "duplicates": sum(r["duplicates"] for r in results),
        "lost": sum(r["lost"] for r in results),
        "jobs": sum(r["jobs"] for r in results),
    }


def _cell(merged: dict[str, Any]) -> str:
    claims = merged["claims"]
    latency = (
        f"{_quantile(claims, 0.5) * 1000:.2f} / {_quantile(claims, 0.99) * 1000:.2f}"
        if claims
        else "-"
    )
    return f"{merged['rate']:,.0f} | {latency} | {merged['duplicates']} | {merged['lost']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per row and round")
    parser.add_argument("--workers", default="1,4,16", help="concurrent workers, one row each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres-url", help="a PostgreSQL server to use (else a throwaway one)")
    parser.add_argument("--work", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.work:
        _work(args.work, args.dsn, int(args.workers), args.jobs)
        return 0
    from service import postgres  # noqa: PLC0415  (the throwaway cluster, as service.py's)

    python = _bench_venv.ensure("pgqueuer", PGQUEUER)
    namespace = argparse.Namespace(skip_postgres=False, postgres_url=args.postgres_url)
    with postgres(namespace) as pg:
        if pg is None:
            return 1
        url, where = pg
        dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        print(f"# PostgreSQL: {where}; {args.jobs} jobs a row and round, {args.rounds} rounds")
        print(f"# workers' Python: {python}; load average {os.getloadavg()[0]:.2f}")
        print(
            "| workers | contender | jobs/s | claim p50 / p99 ms | duplicates | lost "
            "| jobs/s ratio (skip locked / this) |"
        )
        print("|---|---|---|---|---|---|---|")
        for workers in [int(w) for w in args.workers.split(",")]:
            results: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
            for round_ in range(args.rounds):
                turn = round_ % len(CONTENDERS)
                order = CONTENDERS[turn:] + CONTENDERS[:turn]
                for contender in order:
                    results[contender].append(_measure(python, contender, dsn, workers, args.jobs))
            merged = {c: _merge(results[c]) for c in CONTENDERS}
            base = merged["skip locked"]["rate"]
            for contender in CONTENDERS:
                ratio = base / merged[contender]["rate"]
                print(f"| {workers} | {contender} | {_cell(merged[contender])} | {ratio:.2f} |")
        print(f"# load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
