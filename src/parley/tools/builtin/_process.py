"""One worker process of the code interpreter, seen from parley's side.

The worker runs in its own process group, so a wall-time kill takes its children too. It is
a supervisor that runs no code it is sent; the cells run in its REPL child, which holds none
of the descriptors parley speaks through (`_worker.py`). Its replies are read by a thread into
a queue, each line at most `_protocol.line_limit` bytes and checked against the protocol's
models, which gives every wait a deadline and the server bounded memory: a line too long or
malformed ends the worker with a clear error. Its first message tells it how to confine
itself (`worker_config`): the uid to switch to, the Landlock paths, the seccomp filter and the
in-process guard of its mode. A cancelled call (`Cancellation`) sends it an interrupt: the
cell gets KeyboardInterrupt, and is killed after `INTERRUPT_GRACE` seconds if it goes on.

Parley holds the REPL child as a pidfd, found among the worker's descendants by its pid in
its own PID namespace (bubblewrap's, `unshare`'s). Killing the worker (its wall time, a limit
of its session, its end) kills that child first: the supervisor then reports the output the
cell had made, and exits; then the process group goes.

Before it starts, the work directory is given to the worker's user (the session's uid)
through descriptors only (`_hostfs.prepare_work_dir`): parley never follows a link the code
may have planted there. It may start inside a wrapper (`launch`: the session's cgroup).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

from pydantic import ValidationError

from parley.tools.builtin._hostfs import prepare_work_dir
from parley.tools.builtin._protocol import (
    REPLY_BYTES,
    CellReply,
    Ended,
    Ready,
    line_limit,
    parse_message,
)
from parley.tools.builtin._usage import session_processes, status_values, user_tasks
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

__all__ = [
    "INTERRUPT_GRACE",
    "Cancellation",
    "WorkerGoneError",
    "WorkerProcess",
    "WorkerTimeoutError",
    "probe_worker",
]

WORKER_SCRIPT = WORKER_FILES[0]
_STARTUP_SECONDS = 30.0
_EXIT_SECONDS = 5.0
_OUTPUT_SECONDS = 2.0  # how long a timed-out cell's supervisor has to report its output
INTERRUPT_GRACE = 1.0
"""Seconds a cancelled cell has to stop after its KeyboardInterrupt before it is killed."""
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


def worker_uid() -> int:
    """The uid the workers run as: `nobody` when parley runs as root, else parley's own."""
    return SANDBOX_USER if drops_root() else os.getuid()


def _worker_limits(limits: SandboxLimits, uid: int) -> dict[str, Any]:
    values = limits.to_json()
    if sys.platform.startswith("linux"):
        # One more for the supervisor, which runs beside the code's process.
        values["processes"] = user_tasks(uid) + limits.processes + 1
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
        # A weak mode's worker reaches a Python and a work directory its user may not (under
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
        "interrupt_grace": INTERRUPT_GRACE,
        "reply_bytes": REPLY_BYTES,
    }


class WorkerGoneError(Exception):
    """The worker exited or was killed; `reason` says how, for the model to read.

    Attributes:
        reason: Why, in words.
        cause: `exit` (it ended or died), `killed` (killed after an interrupt it did not
            obey), or `malformed` (it sent something parley does not accept).
        stdout: What the running cell had printed, when the worker could still say.
        stderr: What it had written to standard error.
    """

    def __init__(
        self, reason: str, *, cause: str = "exit", stdout: str = "", stderr: str = ""
    ) -> None:
        self.reason = reason
        self.cause = cause
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(reason)


class WorkerTimeoutError(Exception):
    """The worker did not answer in time (it has been killed).

    Attributes:
        stdout: What the running cell had printed, when the supervisor could still say.
        stderr: What it had written to standard error.
    """

    def __init__(self, stdout: str = "", stderr: str = "") -> None:
        self.stdout = stdout
        self.stderr = stderr
        super().__init__("the worker did not answer in time")


def describe_status(status: int | None, limits: SandboxLimits) -> str:
    """Why a process ended, from its status (an exit status, or minus a signal's number)."""
    if status is None:
        return "it stopped answering"
    number = -status if status < 0 else 0
    if number == signal.SIGXCPU:
        return f"it used more than its CPU time limit ({limits.cpu_time} s per call)"
    if number == signal.SIGKILL:
        return "it was killed (SIGKILL), possibly for running out of memory"
    if number:
        return f"it was stopped by {signal.Signals(number).name}"
    return f"it exited with status {status}"


def describe_exit(code: int | None, mode: SandboxMode, limits: SandboxLimits) -> str:
    """Why the worker ended, from its exit status.

    bubblewrap, and the shell that is the PID namespace's init under `unshare`, report a
    signal as 128 + its number.
    """
    if code is not None and mode != "rlimits" and code > 128:
        code = 128 - code
    return describe_status(code, limits)


class Cancellation:
    """A cancel request for one call: made once, from any thread, seen by its worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def requested(self) -> bool:
        """Whether the call was cancelled."""
        return self._requested

    def request(self) -> None:
        """Cancel the call: run the hooks now (they must not block)."""
        with self._lock:
            if self._requested:
                return
            self._requested = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    @contextlib.contextmanager
    def hooked(self, hook: Callable[[], None]) -> Iterator[None]:
        """Run `hook` on a request made while inside (at once if one was made already)."""
        with self._lock:
            now = self._requested
            if not now:
                self._hooks.append(hook)
        if now:
            hook()
        try:
            yield
        finally:
            with self._lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)


@dataclass(frozen=True)
class _Interrupt:
    """Put among the replies: the call of `cell` was cancelled."""

    cell: int


@dataclass(frozen=True)
class _Overlong:
    """Put among the replies: the worker sent a line past the limit."""

    limit: int


_Item = bytes | _Interrupt | _Overlong | None


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
        self._line_limit = line_limit(limits)
        self._cells = 0
        self._child: int | None = None
        # kill() and log_tail() may run on two threads at once (a thread deleted mid-call).
        self._lock = threading.Lock()
        work_dir.mkdir(parents=True, exist_ok=True)
        uid = worker_uid() if uid is None else uid
        try:
            prepare_work_dir(work_dir, uid)
        except OSError as exc:
            raise WorkerGoneError(f"its work directory cannot be used: {exc.strerror}") from exc
        argv = [sys.executable, "-I", "-B", str(WORKER_SCRIPT)]
        command = sandbox_command(mode, work_dir, argv)
        # The worker's own error output; closed with the process (see _release).
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = _spawn(launch(command) if launch else command, work_dir, self._log)
        except OSError as exc:
            self._log.close()
            raise WorkerGoneError(f"it could not be started: {exc}") from exc
        self._replies: queue.Queue[_Item] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="parley-ci-reader", daemon=True)
        self._reader.start()
        self._send(worker_config(mode, work_dir, limits, uid))
        try:
            ready = self._receive(time.monotonic() + _STARTUP_SECONDS, cell=None)
        except WorkerTimeoutError:
            raise WorkerGoneError("it did not start in time") from None
        if not isinstance(ready, Ready):
            self.kill()
            raise WorkerGoneError(f"it sent {ready.kind!r} before it was ready")
        self.layers: dict[str, Any] = dict(ready.layers)
        # The REPL child is the supervisor's: `kill` stops it first through this descriptor.
        self._child = _repl_child(self._proc.pid, ready.pid)

    @property
    def pid(self) -> int:
        """The process id of the worker (of bubblewrap, in that mode)."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self._proc.poll() is None

    def _read(self) -> None:
        """Read the worker's lines, each at most `_line_limit` bytes (never an unbounded one)."""
        stream = self._proc.stdout
        buffer = bytearray()
        searched = 0  # where the search for the end of the line goes on from
        try:
            # The pipe's own reads (its buffered object is never read): at most 64 KiB more
            # than the line limit is ever held.
            while stream is not None and (chunk := os.read(stream.fileno(), 1 << 16)):
                buffer += chunk
                while (end := buffer.find(b"\n", searched)) >= 0 and end < self._line_limit:
                    self._replies.put(bytes(buffer[: end + 1]))
                    del buffer[: end + 1]
                    searched = 0
                if end >= 0 or len(buffer) > self._line_limit:
                    self._replies.put(_Overlong(self._line_limit))
                    break
                searched = len(buffer)
        except (OSError, ValueError):  # closed under us by kill()
            pass
        self._replies.put(None)  # the end (a partial last line is dropped with it)

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self._proc.stdin
        try:
            if stdin is None or stdin.closed:
                raise BrokenPipeError
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()
        except (OSError, ValueError):
            raise self._gone() from None

    def _receive(self, deadline: float, cell: int | None) -> Ready | CellReply | Ended:
        """The worker's next message; a cancel of `cell` meanwhile sends it an interrupt."""
        while True:
            try:
                item = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self._timed_out() from None
            if isinstance(item, _Interrupt):
                if item.cell == cell:
                    self._send({"kind": "interrupt", "cell": cell})
                    # The supervisor kills the cell after its grace and says so; past this
                    # margin it is not answering, and everything is killed.
                    deadline = min(deadline, time.monotonic() + INTERRUPT_GRACE + 5.0)
                continue
            if item is None:
                raise self._gone()
            if isinstance(item, _Overlong):
                raise self._malformed(f"a line longer than {item.limit} bytes")
            try:
                return parse_message(item)
            except ValidationError as exc:
                raise self._malformed(_describe(exc)) from None

    def request(
        self,
        code: str,
        timeout: float,
        cancel: Cancellation | None = None,
        *,
        file_size: int | None = None,
    ) -> CellReply:
        """Run a cell and return the worker's reply.

        `file_size` is the cell's soft `RLIMIT_FSIZE` (what remains of the session's disk
        quota; the per-file limit when None), set in the REPL child before the cell.

        A cancel (`cancel.request()`, from any thread) interrupts the cell: the reply then
        says `interrupted`, or, when the cell did not stop within the grace and was killed,
        `WorkerGoneError` with cause `killed` carries the output it had made.

        Raises:
            WorkerTimeoutError: No reply within `timeout` seconds; the worker was killed (the
                error carries the cell's output, when the supervisor could still say).
            WorkerGoneError: The worker ended while running it, or sent a malformed reply.
        """
        self._cells += 1
        cell = self._cells
        message = {
            "kind": "cell",
            "cell": cell,
            "code": code,
            "cpu_time": self.limits.cpu_time,
            "file_size": file_size,
        }
        self._send(message)
        hook = functools.partial(self._replies.put, _Interrupt(cell))
        with cancel.hooked(hook) if cancel is not None else contextlib.nullcontext():
            reply = self._receive(time.monotonic() + timeout, cell)
        if isinstance(reply, Ended):
            self._ended(reply)
        if not isinstance(reply, CellReply) or reply.cell != cell:
            raise self._malformed(f"a {reply.kind!r} message where cell {cell}'s reply was due")
        return reply

    def _ended(self, ended: Ended) -> NoReturn:
        """The REPL child is gone: raise why, with the output its cell had made."""
        self.kill()
        if ended.cause == "malformed":
            reason = f"the interpreter sent a malformed reply ({ended.detail})"
        elif ended.cause == "killed":
            reason = "it did not stop when interrupted, and was killed"
        else:
            reason = describe_status(ended.status, self.limits)
        raise WorkerGoneError(reason, cause=ended.cause, stdout=ended.stdout, stderr=ended.stderr)

    def _timed_out(self) -> WorkerTimeoutError:
        """Past the deadline: kill the cell, then the worker; the error carries its output.

        The REPL child goes first, so that its supervisor reports the output it had made
        (`ended`).
        """
        with self._lock:
            waits = self._signal_child()
        stdout = stderr = ""
        end = time.monotonic() + (_OUTPUT_SECONDS if waits else 0.0)
        while (left := end - time.monotonic()) > 0:
            try:
                item = self._replies.get(timeout=left)
            except queue.Empty:
                break
            if not isinstance(item, bytes | _Interrupt):
                break  # the end of the pipe, or a line past the limit
            with contextlib.suppress(ValidationError):
                message = parse_message(item) if isinstance(item, bytes) else None
                if isinstance(message, Ended):
                    stdout, stderr = message.stdout, message.stderr
                    break
        self.kill()
        return WorkerTimeoutError(stdout, stderr)

    def _signal_child(self) -> bool:
        """SIGKILL the REPL child, holding `_lock`; whether it was there to kill.

        Its supervisor then reports it gone, with its cell's output, and exits.
        """
        if self._child is None or self._proc.returncode is not None:
            return False
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self._child, signal.SIGKILL)
        return True

    def _malformed(self, what: str) -> WorkerGoneError:
        self.kill()
        reason = f"the interpreter sent a malformed reply ({what}); it was stopped"
        return WorkerGoneError(reason, cause="malformed")

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
            # The REPL child first, so that the supervisor reaps it (killed together, it
            # would be left to init to reap), says so with its output, and exits.
            if self._signal_child():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=_EXIT_SECONDS)
            if self._proc.returncode is None:  # once reaped, its pid may be another's
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            if self._child is not None:
                select.select([self._child], [], [], _EXIT_SECONDS)  # dead, if not yet reaped
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
        if self._child is not None:
            os.close(self._child)
            self._child = None


def _innermost_pid(pid: int) -> int | None:
    """A process's pid in its own PID namespace (the last of `NSpid`); None if unreadable."""
    values = status_values(pid, "NSpid")
    return values[-1] if values else None


def _repl_child(root: int, pid: int) -> int | None:
    """A pidfd of the REPL child, which the supervisor names `pid`; None if not found.

    Under bubblewrap and `unshare` the supervisor runs in a PID namespace of its own, where
    its child's pid is another process's on the host (`unshare`'s pid 3 is a kernel thread
    here): the child is the one among the worker's descendants whose pid in its innermost
    namespace is `pid`, checked again once its descriptor is open.
    """
    for candidate in session_processes(root)[1:]:
        if _innermost_pid(candidate) != pid:
            continue
        fd = _pidfd(candidate)
        if fd is not None and _innermost_pid(candidate) != pid:  # it ended meanwhile
            os.close(fd)
            fd = None
        return fd
    return None


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when the process `pid` ends (Linux 5.3+)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _describe(exc: ValidationError) -> str:
    """What was wrong with a message, in a line (its first error, without its input)."""
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"][1:])  # after the message's kind
    return f"{where}: {error['msg']}"[:300] if where else str(error["msg"])[:300]


def probe_worker(mode: SandboxMode) -> str | None:
    """Start and stop a worker in `mode`; None if it worked, else why not."""
    with tempfile.TemporaryDirectory(prefix="parley-probe-") as tmp:
        try:
            worker = WorkerProcess(mode, Path(tmp), SandboxLimits())
        except WorkerGoneError as exc:
            return exc.reason
        worker.close()
    return None
