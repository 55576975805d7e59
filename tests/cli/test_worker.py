"""`parley worker`: runs queued runs with the service's settings and agents, no HTTP, until
SIGTERM (then it exits cleanly).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from parley.messages import Msg
from parley.service.runs_protocol import RunInput
from parley.service.store import Store
from parley.service.store.queue import RunQueue, new_run_id
from tests.service._support import wait_for
from tests.service.test_postgres import ROOT

pytestmark = pytest.mark.timeout(120)


async def test_parley_worker_runs_queued_runs_and_stops_on_sigterm(tmp_path: Path) -> None:
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"
    store = await Store.open(sqlite_url)
    queue = RunQueue(store, worker_id="maker", lease_seconds=30, max_attempts=3)
    run_id = new_run_id()
    message = RunInput(message=Msg.user("queued"))
    await queue.create(run_id, "t", "local", "echo_agent", "m", message)  # the factory's key
    log = tmp_path / "worker.log"
    command = [
        sys.executable,
        "-m",
        "parley",
        "worker",
        "--database-url",
        sqlite_url,
        "--agent",
        "tests.service._agents:echo_agent",
    ]
    with log.open("w") as out:
        worker = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=out)
    try:

        async def ended() -> str | None:
            record = await store.get_run(run_id, "local")
            assert worker.poll() is None, log.read_text()
            return record.status if record is not None and record.status == "completed" else None

        assert await wait_for(ended, "the worker to run the run", timeout=60) == "completed"
        stored = [(m.role, m.text) for m, _ in await store.get_messages("t", "local")]
        assert stored == [("user", "queued"), ("assistant", "turn 1: queued")]
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(30)
        await store.close()
    assert code == 0, log.read_text()
    assert "parley: worker ready" in log.read_text()
