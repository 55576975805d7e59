"""The service on a real PostgreSQL: migrations, and several processes serving one thread.

Each service process here is a real `uvicorn` process (`tests.service._agents:app`), so
nothing is shared between them but the database: the thread's messages, the per-thread
advisory lock, the runs' cancel flags.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from parley.service.store import Store
from tests.service._agents import echo_agent
from tests.service._live import free_port
from tests.service.conftest import MakeService

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


@contextmanager
def service_process(
    database_url: str, *, delay: float = 0.0, busy_timeout: float = 30.0
) -> Iterator[str]:
    """A service in its own process on `database_url`; yields its base URL."""
    with service_popen(database_url, delay=delay, busy_timeout=busy_timeout) as (url, _):
        yield url


@contextmanager
def service_popen(
    database_url: str, *, delay: float = 0.0, busy_timeout: float = 30.0, **settings: str
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A service in its own process on `database_url`; yields its base URL and process.

    `settings`: more environment variables for it (`PARLEY_LEASE_SECONDS="2"`).
    """
    port = free_port()
    env = os.environ | {
        "PARLEY_DATABASE_URL": database_url,
        "PARLEY_BUSY_TIMEOUT": str(busy_timeout),
        "PARLEY_TEST_DELAY": str(delay),
        **settings,
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "tests.service._agents:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(process, url)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if process.stderr is not None:
            process.stderr.close()


def _wait_healthy(process: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"the service process exited while starting:\n{err[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the service at {url} did not start in {START_TIMEOUT:g}s")


async def test_the_service_runs_on_postgres(service: MakeService, postgres_db_url: str) -> None:
    svc = await service(echo_agent(), database_url=postgres_db_url)
    first = await svc.client.post("/invoke", json={"message": "hello", "thread_id": "pg-1"})
    assert first.json()["content"] == "turn 1: hello"
    second = await svc.client.post("/invoke", json={"message": "again", "thread_id": "pg-1"})
    assert second.json()["content"] == "turn 2: again"
    history = (await svc.client.post("/history", json={"thread_id": "pg-1"})).json()
    assert [m["content"] for m in history["messages"]] == [
        "hello",
        "turn 1: hello",
        "again",
        "turn 2: again",
    ]
    threads = (await svc.client.get("/threads")).json()["threads"]
    assert [(t["thread_id"], t["title"]) for t in threads] == [("pg-1", "hello")]


async def test_migrations_are_recorded_and_idempotent(postgres_db_url: str) -> None:
    for _ in range(2):
        store = await Store.open(postgres_db_url)
        await store.close()
    engine = create_async_engine(postgres_db_url)
    try:
        async with engine.connect() as conn:
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            tables = set(
                (
                    await conn.execute(
                        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                    )
                ).scalars()
            )
    finally:
        await engine.dispose()
    assert version == _head_revision()
    assert {"threads", "messages", "runs", "approvals", "feedback", "api_keys"} <= tables


async def test_concurrent_migrations_from_many_processes_agree(postgres_db_url: str) -> None:
    # Workers start together: the advisory lock lets one migrate while the others wait.
    stores = await asyncio.gather(*(Store.open(postgres_db_url) for _ in range(4)))
    for store in stores:
        await store.ping()
        await store.close()


def _invoke(url: str, message: str, thread_id: str, timeout: float = 30) -> httpx.Response:
    return httpx.post(
        f"{url}/invoke", json={"message": message, "thread_id": thread_id}, timeout=timeout
    )


def test_two_processes_continue_the_same_thread(postgres_db_url: str) -> None:
    with service_process(postgres_db_url) as a, service_process(postgres_db_url) as b:
        assert _invoke(a, "one", "shared").json()["content"] == "turn 1: one"
        assert _invoke(b, "two", "shared").json()["content"] == "turn 2: two"
        assert _invoke(a, "three", "shared").json()["content"] == "turn 3: three"
        history = httpx.post(f"{b}/history", json={"thread_id": "shared"}).json()["messages"]
        assert [m["type"] for m in history] == ["human", "ai"] * 3
        assert [m["content"] for m in history[1::2]] == [
            "turn 1: one",
            "turn 2: two",
            "turn 3: three",
        ]


def test_a_busy_thread_is_busy_for_every_process(postgres_db_url: str) -> None:
    with (
        service_process(postgres_db_url, delay=0.05, busy_timeout=0) as a,
        service_process(postgres_db_url, busy_timeout=0) as b,
    ):
        body = {"message": "a long question for a slow answer " * 3, "thread_id": "busy"}
        with httpx.stream("POST", f"{a}/stream", json=body, timeout=30) as slow:
            lines = slow.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))  # under way
            refused = _invoke(b, "me too", "busy")
            assert refused.status_code == 409
            assert "busy" in refused.json()["detail"]
            other = _invoke(b, "elsewhere", "another-thread")
            assert other.status_code == 200  # other threads are not held up
            for _ in lines:  # read the slow run to its end
                pass
        after = _invoke(b, "now", "busy")
        assert after.status_code == 200
        assert after.json()["content"].startswith("turn 2:")


def test_a_waiting_request_runs_after_the_busy_one_without_interleaving(
    postgres_db_url: str,
) -> None:
    with (
        service_process(postgres_db_url, delay=0.03) as a,
        service_process(postgres_db_url) as b,
    ):
        body = {"message": "slow " * 20, "thread_id": "queue"}
        with httpx.stream("POST", f"{a}/stream", json=body, timeout=30) as slow:
            lines = slow.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            waited = _invoke(b, "quick", "queue")  # waits for A's run, then runs
            rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]"
        assert waited.json()["content"] == "turn 2: quick"
        history = httpx.post(f"{a}/history", json={"thread_id": "queue"}).json()["messages"]
        assert [m["type"] for m in history] == ["human", "ai", "human", "ai"]


def test_cancel_reaches_a_run_in_another_process(postgres_db_url: str) -> None:
    with (
        service_process(postgres_db_url, delay=0.05) as a,
        service_process(postgres_db_url) as b,
    ):
        body = {"message": "tell me a long story " * 5, "thread_id": "stop-me"}
        with httpx.stream("POST", f"{a}/stream", json=body, timeout=30) as slow:
            run_id = slow.headers["x-run-id"]
            lines = slow.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            cancelled = httpx.post(f"{b}/runs/{run_id}/cancel", timeout=10)
            assert cancelled.status_code == 200
            rest = [line for line in lines if line]  # A ends soon, with the partial answer
        assert rest[-1] == "data: [DONE]"
        run = httpx.get(f"{b}/runs/{run_id}").json()
        assert run["status"] == "interrupted"
        detail = httpx.get(f"{b}/threads/stop-me").json()
        partial = detail["messages"][-1]
        assert partial["role"] == "assistant"
        assert partial["metadata"]["interrupted"] is True


def test_a_killed_process_frees_its_thread(postgres_db_url: str) -> None:
    with service_process(postgres_db_url) as b:
        with service_popen(postgres_db_url, delay=0.2) as (a, process):
            body = {"message": "never finished " * 10, "thread_id": "orphan"}
            with httpx.stream("POST", f"{a}/stream", json=body, timeout=30) as slow:
                run_id = slow.headers["x-run-id"]
                assert next(line for line in slow.iter_lines() if line.startswith("data: "))
                process.send_signal(signal.SIGKILL)  # a crash: no clean-up runs
                process.wait(10)
        # The dead process's session ended, so its advisory lock is free: B gets the thread
        # at once, and marks the dead run as interrupted.
        after = _invoke(b, "anyone there?", "orphan", timeout=10)
        assert after.status_code == 200
        assert after.json()["content"] == "turn 2: anyone there?"
        run = httpx.get(f"{b}/runs/{run_id}").json()
        assert run["status"] == "interrupted"
        assert "ended before the run" in run["error"]


async def test_open_runs_do_not_each_hold_a_connection(
    service: MakeService, postgres_db_url: str
) -> None:
    # Every run holds its thread's advisory lock; the locks share one connection, so the
    # database's connection limit bounds the queries at once, not the runs at once.
    runs = 30
    svc = await service(echo_agent(delay=0.05), database_url=postgres_db_url)
    database = postgres_db_url.rsplit("/", 1)[1]

    async def ask(index: int) -> int:
        body = {"message": "a slow answer " * 4, "thread_id": f"t{index}"}
        return (await svc.client.post("/stream", json=body)).status_code

    asking = [asyncio.create_task(ask(i)) for i in range(runs)]
    engine = create_async_engine(postgres_db_url)
    try:
        deadline = time.monotonic() + 10
        while len(svc.state.runs.active) < runs and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert len(svc.state.runs.active) == runs
        async with engine.connect() as conn:
            held = (
                await conn.execute(
                    text("SELECT count(*) FROM pg_stat_activity WHERE datname = :db"),
                    {"db": database},
                )
            ).scalar_one()
    finally:
        statuses = await asyncio.gather(*asking)
        await engine.dispose()
    assert statuses == [200] * runs
    # The store's pool (at most 15), the lock connection, and this query's own.
    assert held <= 17, f"{held} connections for {runs} open runs"


def _head_revision() -> str:
    """The newest migration's revision (the one a fresh database is brought to)."""
    versions = Path(__file__).parents[2] / "src/parley/service/store/migrations"
    head = ScriptDirectory(str(versions)).get_current_head()
    assert head is not None
    return head
