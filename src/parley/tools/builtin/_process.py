"""One worker process of the code interpreter, seen from parley's side.

The worker runs in its own process group, so a wall-time kill takes its children too. Its
replies are read by a thread into a queue, which gives every wait a deadline. Its first
message tells it how to confine itself (`worker_config`): the uid to switch to, the Landlock
paths, the seccomp filter and the in-process guard of its mode.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from parley.tools.builtin.sandbox import (
    SANDBOX_USER,
    WORKER_FILES,
    SandboxLimits,
    SandboxMode,
    device_paths,
    drops_root,
    kernel_confinement,
    read_paths,
    sandbox_command,
    worker_environment,
)

__all__ = ["WorkerGoneError", "WorkerProcess", "WorkerTimeoutError", "probe_worker"]

WORKER_SCRIPT = WORKER_FILES[0]
_STARTUP_SECONDS = 30.0
# The in-process guard gives the code a clear error before the kernel's EPERM / EACCES (and
# is all there is where the kernel offers neither Landlock nor seccomp: then `strict`).
_GUARDS: dict[SandboxMode, dict[str, bool]] = {
    "bwrap": {"writes": False, "network": False, "processes": False},
    "unshare": {"writes": True, "network": False, "processes": True},
    "rlimits": {"writes": True, "network": True, "processes": True},
}


_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _spawn(command: list[str], work_dir: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start a worker from one long-lived thread.

    bubblewrap's `--die-with-parent` (PR_SET_PDEATHSIG) fires when the *thread* that started
    it exits, so a worker started from a short-lived thread (a pool thread that idles out,
    a thread per call) would die with that thread and lose the session.
    """
    global _spawner  # noqa: PLW0603  (one spawning thread per process, made on first use)
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-ci-spawn")
        spawner = _spawner

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=work_dir,
            env=worker_environment(work_dir),
            start_new_session=True,
        )

    return spawner.submit(start).result()


def _user_tasks(uid: int) -> int:
    """Processes and threads a user runs now: RLIMIT_NPROC counts them all, not the worker's."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            total += int(fields.get("Threads", "1").strip() or 1)
    return total


def worker_uid() -> int:
    """The uid the workers run as: `nobody` when parley runs as root, else parley's own."""
    return SANDBOX_USER if drops_root() else os.getuid()


def _worker_limits(limits: SandboxLimits, uid: int) -> dict[str, Any]:
    values = limits.to_json()
    if sys.platform.startswith("linux"):
        values["processes"] = _user_tasks(uid) + limits.processes
    return values


def worker_config(
    mode: SandboxMode, work_dir: Path, limits: SandboxLimits, uid: int | None = None
) -> dict[str, Any]:
    """The worker's first message: its limits and how it confines itself (as `uid`)."""
    weak = mode != "bwrap"
    kernel = kernel_confinement()  # Landlock and seccomp: without them, the strict guard
    uid = worker_uid() if uid is None else uid
    return {
        "limits": _worker_limits(limits, uid),
        "guard": {**_GUARDS[mode], "strict": weak and not kernel},
        # A weak mode's worker reaches a Python and a work directory `nobody` may not (under
        # /root, a private workspace) through CAP_DAC_READ_SEARCH, bounded by Landlock;
        # bubblewrap binds them where anyone may look.
        "identity": [uid, uid, weak] if drops_root() else None,
        "read": [*read_paths(), *device_paths(), "/proc/self"],
        "landlock": {
            "read": [*read_paths(), "/proc/self"],
            "write": [str(work_dir)],
            "devices": device_paths(),
        }
        if weak and kernel
        else None,
        # Without an IPC namespace (rlimits) System V IPC would join sessions.
        "seccomp": {"processes": weak, "sockets": weak, "ipc": mode == "rlimits"}
        if kernel
        else None,
    }


def _own(work_dir: Path, uid: int) -> None:
    """Give the work directory (and the worker's scratch folder) to the worker's user."""
    if uid == os.getuid():
        return
    os.chown(work_dir, uid, uid)
    for folder, _dirs, names in os.walk(work_dir / ".parley"):
        os.chown(folder, uid, uid)
        for name in names:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


class WorkerGoneError(Exception):
    """The worker exited or was killed; `reason` says how, for the model to read."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class WorkerTimeoutError(Exception):
    """The worker did not answer in time (it has been killed)."""


def describe_exit(code: int | None, mode: SandboxMode, limits: SandboxLimits) -> str:
    """Why the worker ended, from its exit status (bubblewrap reports 128 + signal)."""
    if code is None:
        return "it stopped answering"
    # bubblewrap and the PID namespace's init under unshare report 128 + the signal.
    number = -code if code < 0 else code - 128 if mode != "rlimits" and code > 128 else 0
    if number == signal.SIGXCPU:
        return f"it used more than its CPU time limit ({limits.cpu_time} s per call)"
    if number == signal.SIGKILL:
        return "it was killed (SIGKILL), possibly for running out of memory"
    if number:
        return f"it was stopped by {signal.Signals(number).name}"
    return f"it exited with status {code}"


class WorkerProcess:
    """A started worker, ready for requests.

    Args:
        mode: The sandbox mode to run it in.
        work_dir: Its work directory (made if missing).
        limits: Its resource limits.
        uid: The uid it runs as when parley is root (default: `worker_uid()`).
        launch: Wraps its command (to start it in its session's cgroup).

    Raises:
        WorkerGoneError: It failed to start; the reason includes its error output.
    """

    def __init__(
        self,
        mode: SandboxMode,
        work_dir: Path,
        limits: SandboxLimits,
        *,
        uid: int | None = None,
        launch: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        self.mode = mode
        self.limits = limits
        # kill() and log_tail() may run on two threads at once (a thread deleted mid-call).
        self._lock = threading.Lock()
        work_dir.mkdir(parents=True, exist_ok=True)
        uid = worker_uid() if uid is None else uid
        _own(work_dir, uid)
        argv = [sys.executable, "-I", "-B", str(WORKER_SCRIPT)]
        command = sandbox_command(mode, work_dir, argv)
        # The worker's own error output; closed with the process (see _release).
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = _spawn(launch(command) if launch else command, work_dir, self._log)
        except OSError as exc:
            self._log.close()
            raise WorkerGoneError(f"it could not be started: {exc}") from exc
        self._replies: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="parley-ci-reader", daemon=True)
        self._reader.start()
        try:
            ready = self._exchange(worker_config(mode, work_dir, limits, uid), _STARTUP_SECONDS)
        except WorkerTimeoutError:
            raise WorkerGoneError("it did not start in time") from None
        self.layers: dict[str, Any] = dict(ready.get("layers") or {})

    @property
    def pid(self) -> int:
        """The process id of the worker (of bubblewrap, in that mode)."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self._proc.poll() is None

    def _read(self) -> None:
        stream = self._proc.stdout
        try:
            for line in stream or ():
                self._replies.put(line)
        except (OSError, ValueError):  # closed under us by kill()
            pass
        self._replies.put(None)

    def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        stdin = self._proc.stdin
        try:
            if stdin is None or stdin.closed:
                raise BrokenPipeError
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()
        except OSError:
            raise self._gone() from None
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise WorkerTimeoutError from None
        if line is None:
            raise self._gone()
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, code: str, timeout: float, *, file_size: int | None = None) -> dict[str, Any]:
        """Run a cell and return the worker's reply; `file_size`: its soft RLIMIT_FSIZE.

        Raises:
            WorkerTimeoutError: No reply within `timeout` seconds; the worker was killed.
            WorkerGoneError: The worker ended while running it.
        """
        message: dict[str, Any] = {"code": code, "cpu_time": self.limits.cpu_time}
        if file_size is not None:
            message["file_size"] = file_size
        return self._exchange(message, timeout)

    def _gone(self) -> WorkerGoneError:
        try:
            code: int | None = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        reason = describe_exit(code, self.mode, self.limits)
        tail = self.log_tail()
        self.kill()
        return WorkerGoneError(f"{reason}\n{tail}" if tail else reason)

    def log_tail(self, size: int = 2000) -> str:
        """The end of what the worker process wrote outside any cell (its own errors)."""
        with self._lock:
            if self._log.closed:
                return ""
            end = self._log.seek(0, os.SEEK_END)
            self._log.seek(max(0, end - size))
            return self._log.read().decode("utf-8", "replace").strip()

    def kill(self) -> None:
        """Kill the worker's whole process group and release its pipes."""
        with self._lock:
            if self._proc.returncode is None:  # once reaped, its pid may be another's
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._release()

    def close(self, timeout: float = 2.0) -> None:
        """Ask the worker to exit (end of input); kill it if it does not."""
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=timeout)
        self.kill()

    def _release(self) -> None:
        # The reader sees the end of the pipe once the process group is dead.
        self._reader.join(timeout=5)
        for stream in (self._proc.stdin, self._proc.stdout, self._log):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def probe_worker(mode: SandboxMode) -> str | None:
    """Start and stop a worker in `mode`; None if it worked, else why not."""
    with tempfile.TemporaryDirectory(prefix="parley-probe-") as tmp:
        try:
            worker = WorkerProcess(mode, Path(tmp), SandboxLimits())
        except WorkerGoneError as exc:
            return exc.reason
        worker.close()
    return None
