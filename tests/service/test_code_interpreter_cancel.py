"""Cancelling a run over HTTP stops the code the interpreter runs, and the thread says so.

The agent's model (`coding_agent` of tests/tools/_sandbox_modes.py) calls the code
interpreter with a cell that prints, says it started, and waits (boundedly) before it writes
`late.txt`; the run is cancelled (`POST /runs/{id}/cancel`, in every sandbox mode; a client
that leaves its stream, in the plain mode). The run ends interrupted, the thread records the
call's result as the interpreter gave it ("Stopped by cancel" with the output so far), the
next message runs at once in the same interpreter, and `late.txt` is never written.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.messages import Msg
from parley.service import ServiceSettings, create_app
from parley.tools.builtin.sandbox import SandboxMode
from tests.service._live import running
from tests.service._support import wait_for, wait_for_run
from tests.service.conftest import MakeService
from tests.tools._sandbox_modes import ALL_MODES, coding_agent, make, require_mode, until_started

pytestmark = pytest.mark.timeout(120)


def stopped_result(messages: list[Msg]) -> str:
    """The one tool result of the cancelled round: the thread's last message."""
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    [result] = messages[-1].tool_results
    assert result.tool_call_id == "c2"
    assert isinstance(result.output, str)
    return result.output


async def goes_on(client: httpx.AsyncClient, folder: Path) -> None:
    """The next message runs at once, in the same interpreter; late.txt never comes."""
    again = await client.post("/invoke", json={"message": "and?", "thread_id": "t"})
    assert again.status_code == 200
    assert again.json()["content"] == "done"
    detail = (await client.get("/threads/t")).json()
    check = Msg.model_validate(detail["messages"][-2])
    assert "('state', False)" in str(check.tool_results[0].output)
    (folder / "go").touch()
    assert not (folder / "late.txt").exists()


@pytest.mark.parametrize("mode", ALL_MODES)
async def test_cancel_over_http_stops_the_cell_and_the_thread_says_so(
    service: MakeService, tmp_path: Path, mode: SandboxMode
) -> None:
    with make(require_mode(mode), tmp_path / "ws") as ci:
        svc = await service(coding_agent(ci)[0])
        folder = ci.work_dir("t", "local")
        invoke = asyncio.create_task(
            svc.client.post("/invoke", json={"message": "go", "thread_id": "t"})
        )
        handle = await wait_for_run(svc.state)
        await until_started(folder)
        cancelled = await svc.client.post(f"/runs/{handle.run_id}/cancel")
        assert cancelled.json()["status"] == "interrupted"
        assert (await invoke).status_code == 200

        stored = [m for m, _ in await svc.state.store.get_messages("t", "local")]
        output = stopped_result(stored)
        assert "Stopped by cancel: the run was cancelled while this code ran" in output
        assert "partial output" in output
        await goes_on(svc.client, folder)
        assert ci.run_code("1", session="t", user_id="local").result == "1"
        assert not (folder / "late.txt").exists()


async def test_a_client_leaving_its_stream_stops_the_cell(sqlite_url: str, tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path / "ws") as ci:
        settings = ServiceSettings(database_url=sqlite_url)
        app = create_app(settings, agents=[coding_agent(ci)[0]])
        folder = ci.work_dir("t", "local")
        with running(app) as url:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                body = {"message": "go", "thread_id": "t"}
                async with client.stream("POST", "/stream", json=body) as response:
                    run_id = response.headers["X-Run-Id"]
                    await until_started(folder)
                # Left: the response closed while the cell runs.

                async def ended() -> dict[str, Any] | None:
                    run: dict[str, Any] = (await client.get(f"/runs/{run_id}")).json()
                    return None if run["status"] == "running" else run

                run = await wait_for(ended, "the run to end after the client left", timeout=30)
                assert run["status"] == "interrupted"
                detail = (await client.get("/threads/t")).json()
                messages = [Msg.model_validate(m) for m in detail["messages"]]
                output = stopped_result(messages)
                assert "Stopped by cancel" in output
                assert "partial output" in output
                await goes_on(client, folder)
