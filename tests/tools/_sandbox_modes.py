"""The code interpreter's sandbox modes as the tests ask for them, and a cell to cancel.

A mode this machine cannot run goes through `tests._requires.unavailable`: skipped on a
developer's machine, a failure under CI (scripts/setup-system.sh installs bubblewrap, and the
kernels CI runs on offer user namespaces, Landlock and seccomp). The fixtures `mode` and `ci`
are in tests/tools/conftest.py. The cell, its check and its agent serve the tests of cancel
here and over HTTP (tests/service/test_code_interpreter_cancel.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.tools.builtin import CodeInterpreter, SandboxLimits, available_sandbox_modes
from parley.tools.builtin.sandbox import SandboxMode, kernel_confinement
from tests._requires import unavailable

ALL_MODES: tuple[SandboxMode, ...] = ("bwrap", "unshare", "rlimits")
LIMITS = SandboxLimits(wall_time=30, cpu_time=20, memory_bytes=768 * 1024 * 1024)

_WHY = {
    "bwrap": "bubblewrap is not installed, or cannot make namespaces here",
    "unshare": "util-linux's unshare cannot make a network namespace here",
    "rlimits": "the plain sandbox mode cannot start a worker here",
}


def require_mode(name: SandboxMode, *, kernel: bool = False) -> SandboxMode:
    """The mode, if this machine runs it (with Landlock and seccomp when `kernel`)."""
    if name not in available_sandbox_modes():
        unavailable(f"sandbox mode {name!r} does not work on this machine: {_WHY[name]}")
    if kernel and name != "bwrap" and not kernel_confinement():
        unavailable(
            "this kernel offers no Landlock or seccomp, so the weak sandbox modes fall back "
            "to a Python-level guard",
            "run on Linux 5.13+ (x86-64 or AArch64)",
        )
    return name


def make(mode: str, work_dir: Path, limits: SandboxLimits = LIMITS, **cfg: Any) -> CodeInterpreter:
    """An interpreter in `mode` whose workspace is `work_dir`."""
    return CodeInterpreter({"sandbox": mode, "work_dir": str(work_dir), "limits": limits, **cfg})


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait (up to 20 s) for what the code under test does on its own; no timing asserted."""
    done = threading.Event()
    for _ in range(1000):
        if condition():
            return
        done.wait(0.02)
    raise AssertionError(f"never happened: {what}")


# -- a cell that starts threads ------------------------------------------------------------------


def thread_bomb(*, cap: int, stack_kib: int) -> str:
    """A cell that starts threads (of `stack_kib` KiB of stack) until one is refused or `cap`
    run, then ends them all; its result is how many started (under `cap`: one was refused).
    """
    return f"""
import threading
threading.stack_size({stack_kib} * 1024)
release, started = threading.Event(), []
try:
    while len(started) < {cap}:
        thread = threading.Thread(target=release.wait)
        thread.start()
        started.append(thread)
except RuntimeError:
    pass
release.set()
for thread in started:
    thread.join()
len(started)
"""


# -- a cell to cancel ---------------------------------------------------------------------------

# Prints, says it started, then waits up to 20 s for a `go` file the tests give only after
# they have checked what followed the cancel, and writes late.txt: the file a cancelled cell
# must never write. On a parley whose cancel does not stop the code, it writes late.txt after
# the wait, and the next call (which waits for it: a session runs one call at a time) sees it.
SLOW = """
import os, time
print('partial output', flush=True)
open('started', 'w').close()
for _ in range(400):
    if os.path.exists('go'):
        break
    time.sleep(0.05)
open('late.txt', 'w').write('written after the cancel')
"""
CHECK = "import os\n(kept, os.path.exists('late.txt'))"
"""What follows: `('state', False)` in the same interpreter, with no late.txt."""


async def until_started(folder: Path) -> None:
    """Wait (up to 30 s) for a cell to say it started (its file `started` in `folder`)."""
    for _ in range(1500):
        if (folder / "started").exists():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the cell never started")


def coding_agent(ci: CodeInterpreter) -> tuple[Agent, ScriptedModel]:
    """An agent whose model sets `kept`, runs `SLOW`, then (the next message) `CHECK`.

    Its answer after the check is "done".
    """
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("code_interpreter", {"code": "kept = 'state'"}, "c1"),
            ScriptedModel.tool_call("code_interpreter", {"code": SLOW}, "c2"),
            ScriptedModel.tool_call("code_interpreter", {"code": CHECK}, "c3"),
            "done",
        ]
    )
    return Agent("coder", model, tools=[ci]), model
