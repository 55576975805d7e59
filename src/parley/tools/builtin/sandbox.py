"""The code interpreter's sandbox: which isolation this machine offers, and the command for it.

Three modes, strongest first; `detect_sandbox_mode()` picks the first that works here:

``bwrap``
    Debian's bubblewrap. The worker sees the whole file system read-only except its work
    directory, has its own network namespace (a loopback device and nothing else), its own
    PID, IPC and UTS namespaces, no capabilities (even when parley runs as root), and dies
    with its parent. Enforced by the kernel, for the worker and every process it starts.
``unshare``
    util-linux's `unshare` in a new user and network namespace: no network, enforced by the
    kernel. The file system is not isolated: the worker starts in its work directory, and a
    guard inside the Python process (an audit hook) refuses writes outside it and refuses to
    start processes (a child process would escape that guard).
``rlimits``
    No namespaces at all (no bubblewrap, user namespaces refused). The same in-process guard
    refuses writes outside the work directory and starting processes, and also refuses every
    socket `connect`, `bind`, `sendto` and name lookup. This guard is Python-level: code that
    reaches native calls (`ctypes`) can get around it. Use it for a model's ordinary code on
    your own machine, not to contain hostile code.

Resource limits (`setrlimit`) apply in every mode: CPU seconds per call (`RLIMIT_CPU`),
address space (`RLIMIT_AS`, so an allocation past it raises `MemoryError`), the size of any
file written (`RLIMIT_FSIZE`), the number of processes (`RLIMIT_NPROC`; the kernel does not
apply it to root) and no core files; and the wall time of each call is enforced from outside
by killing the worker's process group.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from parley.errors import ConfigurationError

__all__ = [
    "SandboxLimits",
    "SandboxMode",
    "available_sandbox_modes",
    "detect_sandbox_mode",
    "sandbox_command",
    "worker_environment",
]

logger = logging.getLogger("parley.tools")

SandboxMode = Literal["bwrap", "unshare", "rlimits"]
"""How the worker is isolated, strongest first."""

_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)
_PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class SandboxLimits:
    """The resources one interpreter session may use.

    Args:
        wall_time: Seconds a call may run before the worker is killed.
        cpu_time: CPU seconds a call may use (`RLIMIT_CPU`, raised before each call).
        session_cpu_time: CPU seconds a whole session may use before it is killed.
        memory_bytes: Address space (`RLIMIT_AS`); past it allocations fail with MemoryError.
        file_size_bytes: The largest file the code may write (`RLIMIT_FSIZE`).
        processes: Processes and threads the session may add to those its user already runs
            (`RLIMIT_NPROC` counts them all; the kernel does not apply it to root).
        output_chars: Characters of stdout and of stderr kept per call (head and tail).
    """

    wall_time: float = 30.0
    cpu_time: int = 30
    session_cpu_time: int = 600
    memory_bytes: int = 1024 * 1024 * 1024
    file_size_bytes: int = 64 * 1024 * 1024
    processes: int = 64
    output_chars: int = 20_000

    def to_json(self) -> dict[str, Any]:
        """The limits as the worker reads them."""
        return asdict(self)


def _bwrap_args(work_dir: Path) -> list[str]:
    wd = str(work_dir)
    return [
        "bwrap",
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--bind", wd, wd,
        "--unshare-all",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--chdir", wd,
        "--",
    ]  # fmt: skip


def _unshare_args() -> list[str]:
    # A user namespace first: it drops the capabilities of the initial namespace (even for
    # root), so the network namespace cannot be left with setns.
    return ["unshare", "--user", "--map-root-user", "--net", "--"]


def sandbox_command(mode: SandboxMode, work_dir: Path, argv: list[str]) -> list[str]:
    """The command that runs `argv` in `work_dir` under `mode`."""
    if mode == "bwrap":
        return [*_bwrap_args(work_dir), *argv]
    if mode == "unshare":
        return [*_unshare_args(), *argv]
    return list(argv)


def worker_environment(work_dir: Path) -> dict[str, str]:
    """A clean environment for the worker: none of the parent's variables (keys) leak in."""
    scratch = work_dir / ".parley"
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(work_dir),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(scratch / "matplotlib"),
        # One thread per numerical library: threads count against RLIMIT_NPROC and each
        # reserves address space counted by RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def _probe(mode: SandboxMode) -> bool:
    tool = "bwrap" if mode == "bwrap" else "unshare"
    if shutil.which(tool) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="parley-probe-") as tmp:
        command = sandbox_command(mode, Path(tmp), [sys.executable, "-I", "-c", "pass"])
        try:
            done = subprocess.run(
                command, capture_output=True, timeout=_PROBE_SECONDS, check=False, cwd=tmp
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.info("sandbox mode %s is unavailable: %r", mode, exc)
            return False
    if done.returncode != 0:
        logger.info("sandbox mode %s is unavailable: %s", mode, done.stderr.decode()[-300:])
    return done.returncode == 0


@functools.cache
def available_sandbox_modes() -> tuple[SandboxMode, ...]:
    """The modes that work on this machine, strongest first (probed once per process)."""
    if not sys.platform.startswith("linux"):
        return ("rlimits",)
    return tuple(mode for mode in _MODES if mode == "rlimits" or _probe(mode))


def detect_sandbox_mode(requested: str = "auto") -> SandboxMode:
    """The mode to use: the strongest available for `"auto"`, else the one named.

    Raises:
        ConfigurationError: The name is unknown, or that mode does not work here.
    """
    available = available_sandbox_modes()
    if requested == "auto":
        mode = available[0]
        if mode != "bwrap":
            logger.warning(
                "code_interpreter: bubblewrap is not available; sandbox mode %r (weaker: %s)",
                mode,
                "no network, in-process file guard" if mode == "unshare" else "in-process guard",
            )
        return mode
    if requested not in _MODES:
        raise ConfigurationError(
            f"unknown sandbox mode {requested!r}; choose auto, {', '.join(_MODES)}"
        )
    for mode in available:
        if mode == requested:
            return mode
    raise ConfigurationError(
        f"sandbox mode {requested!r} does not work on this machine; "
        f"available: {', '.join(available)}"
    )
