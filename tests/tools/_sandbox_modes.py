"""The code interpreter's sandbox modes as the tests ask for them.

A mode this machine cannot run goes through `tests._requires.unavailable`: skipped on a
developer's machine, a failure under CI (scripts/setup-system.sh installs bubblewrap, and the
kernels CI runs on offer user namespaces, Landlock and seccomp).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
