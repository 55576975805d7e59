"""Cancel stops the code: the cell is interrupted (then killed), and the call says so.

A cell (`SLOW`, in tests/tools/_sandbox_modes.py) prints, says it started, then waits
(boundedly) for a `go` file the test never gives before it has checked what followed, and
writes `late.txt` after the wait: the file a cancelled cell must never write. The next call
runs at once (it could not, had the cell gone on: calls in a session run one after another).
Every sandbox mode; the agent loop's side (`agent.stream()` cancelled by its caller) in the
plain mode.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from parley.agents import MessageCompleted, ToolResult
from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter
from tests.tools._sandbox_modes import CHECK, SLOW, coding_agent, make, require_mode, until_started

pytestmark = pytest.mark.timeout(120)

CTX = RunContext.detached(thread_id="t", user_id="alice")
# Ignores the interrupt: it is killed after the grace.
STUBBORN = """
import os, time
print('stubborn output', flush=True)
open('started', 'w').close()
for _ in range(400):
    try:
        if os.path.exists('go'):
            break
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass
open('late.txt', 'w').write('written after the cancel')
"""


def let_go(ci: CodeInterpreter, folder: Path) -> None:
    """Release a cell that would still be waiting, and check that none was."""
    (folder / "go").touch()
    assert ci.run_code("1", ctx=CTX).result == "1"  # after any cell still running
    assert not (folder / "late.txt").exists()


async def test_a_cancelled_call_interrupts_its_cell_and_the_session_goes_on(
    ci: CodeInterpreter,
) -> None:
    folder = ci.work_dir("t", "alice")
    await ci.acall({"code": "kept = 'state'"}, ctx=CTX)
    call = asyncio.create_task(ci.acall({"code": SLOW}, ctx=CTX))
    await until_started(folder)
    call.cancel()
    output = await call  # the call answers the cancel with what happened
    assert isinstance(output, str)
    assert "Stopped by cancel: the run was cancelled while this code ran" in output
    assert "interrupted (KeyboardInterrupt)" in output
    assert "stdout:\n\n```\npartial output\n```" in output
    after = ci.run_code(CHECK, ctx=CTX)
    assert after.notice is None  # the same interpreter: its state kept
    assert after.result == "('state', False)"
    let_go(ci, folder)


async def test_a_cell_that_ignores_the_interrupt_is_killed_and_the_next_call_says_so(
    ci: CodeInterpreter,
) -> None:
    folder = ci.work_dir("t", "alice")
    await ci.acall({"code": "kept = 'state'"}, ctx=CTX)
    call = asyncio.create_task(ci.execute(STUBBORN, ctx=CTX))
    await until_started(folder)
    call.cancel()
    stopped = await call
    assert stopped.error is not None
    assert stopped.error.startswith("Stopped by cancel: the run was cancelled while this code ran")
    assert "did not stop when interrupted, so the interpreter was killed" in stopped.error
    assert stopped.stdout == "stubborn output\n"
    after = ci.run_code(CHECK, ctx=CTX)
    assert after.notice is not None
    assert "restarted because the previous call was stopped by cancel" in after.notice
    assert "NameError" in str(after.error)
    let_go(ci, folder)


async def test_a_call_cancelled_before_its_turn_does_not_run(ci: CodeInterpreter) -> None:
    folder = ci.work_dir("t", "alice")
    first = asyncio.create_task(ci.execute(SLOW, ctx=CTX))
    await until_started(folder)
    # Queued behind the first call (one session runs one call at a time), then cancelled.
    second = asyncio.create_task(ci.execute("open('second.txt', 'w').close()", ctx=CTX))
    await asyncio.sleep(0.1)
    second.cancel()
    first.cancel()
    running = await first
    assert running.error is not None
    assert "interrupted (KeyboardInterrupt)" in running.error
    try:
        queued = await second
    except asyncio.CancelledError:  # cancelled before its thread took it: never started
        pass
    else:
        assert queued.error is not None
        assert queued.error.startswith("Stopped by cancel")
    assert not (folder / "second.txt").exists()
    let_go(ci, folder)


def test_a_cell_past_its_wall_time_returns_the_output_it_made(ci: CodeInterpreter) -> None:
    # The REPL child is killed first, so its supervisor can still report what it printed.
    run = ci.run_code(
        "import time\nprint('before the wait', flush=True)\ntime.sleep(60)", ctx=CTX, timeout=3
    )
    assert run.error is not None
    assert run.error.startswith("Timeout: the code ran for more than 3 seconds")
    assert run.stdout == "before the wait\n"
    again = ci.run_code("print('again')", ctx=CTX)
    assert again.stdout == "again\n"
    assert again.notice is not None
    assert "ran past its time limit" in again.notice


# -- the agent loop ---------------------------------------------------------------------------


async def test_run_cancel_records_what_the_interpreter_did(tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path / "ws") as ci:
        agent, model = coding_agent(ci)
        folder = ci.work_dir(agent.memory.thread_id)
        run = agent.stream("go")
        canceller = asyncio.create_task(until_started(folder))
        canceller.add_done_callback(lambda _: run.cancel())
        events = [event async for event in run]
        assert run.status == "interrupted"

        recorded = (await agent.memory.get())[-1]
        assert recorded.role == "tool"
        [result] = recorded.tool_results
        assert result.tool_call_id == "c2"
        assert isinstance(result.output, str)
        assert "Stopped by cancel" in result.output
        assert "partial output" in result.output
        assert [e.result for e in events if isinstance(e, ToolResult)][-1] == result
        assert isinstance(events[-2], MessageCompleted)

        # The conversation goes on at once, with the same interpreter.
        assert (await agent.reply("and now?")).text == "done"
        [checked] = model.requests[-1].messages[-1].tool_results
        assert "('state', False)" in str(checked.output)
        assert [r.output for r in model.requests[-2].messages[-2].tool_results] == [result.output]
        (folder / "go").touch()
        assert ci.run_code("1", session=agent.memory.thread_id).result == "1"
        assert not (folder / "late.txt").exists()


async def test_a_cancelled_task_records_what_the_interpreter_did(tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path / "ws") as ci:
        agent, _ = coding_agent(ci)
        folder = ci.work_dir(agent.memory.thread_id)
        task = asyncio.create_task(agent.reply("go"))
        await until_started(folder)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        recorded = (await agent.memory.get())[-1]
        assert recorded.role == "tool"
        [result] = recorded.tool_results
        assert "Stopped by cancel" in str(result.output)
        assert "partial output" in str(result.output)
        (folder / "go").touch()
        assert ci.run_code(CHECK, session=agent.memory.thread_id).result == "('state', False)"
