"""`parley._sync`: the loop the sync twins run on, stopped and closed at exit."""

from __future__ import annotations

from tests._process import run_python


def test_the_sync_loop_is_closed_at_exit() -> None:
    # An exit hook registered before the loop exists runs after the loop's own hook.
    script = """
import asyncio, atexit
from parley._sync import run_sync

loops = []
atexit.register(lambda: print("closed:", loops[0].is_closed(), flush=True))

async def note_loop():
    loops.append(asyncio.get_running_loop())
    return "ran"

print(run_sync(note_loop()))
"""
    ran = run_python(script, "-W", "always::ResourceWarning", timeout=60)
    assert ran.stdout.splitlines() == ["ran", "closed: True"]
    assert "unclosed event loop" not in ran.stderr


def test_tasks_left_on_the_sync_loop_finish_before_it_closes() -> None:
    # What a client collected at the end starts: the closing of its connections, as a task.
    script = """
import asyncio
from parley._sync import run_sync

async def closing():
    await asyncio.sleep(0.05)
    print("closed", flush=True)

async def leave_a_task():
    asyncio.get_running_loop().create_task(closing())
    return "left"

print(run_sync(leave_a_task()))
"""
    ran = run_python(script, "-W", "always::ResourceWarning", timeout=60)
    assert ran.stdout.splitlines() == ["left", "closed"]
    assert "destroyed but it is pending" not in ran.stderr
