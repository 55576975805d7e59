"""The code interpreter's worker: a supervisor that speaks to parley, and its REPL child.

Run as a script (`python -I -B _worker.py`), standard library only, so it starts fast and
imports nothing of parley; it loads its siblings by path: `_repl.py` (the child's side),
`_confine.py` (the kernel's measures) and `_guard.py` (the audit hook).

    parley ==(fds 0, 1)==> supervisor ==(pipes)==> REPL child: runs the cells

The supervisor holds parley's pipes and runs no code it is sent. It reads parley's
configuration line, applies what both processes share (resource limits, the session's
uid), makes the scratch folder (`.parley`, as that user: parley never touches it), opens the
stdout and stderr capture files, clears its `PR_SET_DUMPABLE` flag (so a process of the same
uid cannot open its `/proc/<pid>/mem` or `/fd`) and forks the child, with the highest
out-of-memory score (`OomScore`). The child keeps only its own descriptors and confines
itself (`_repl.py`: Landlock, and seccomp whose own-pid rules name the child); the
supervisor's Landlock layer holds the child's (so it may signal the child), and its seccomp
filter, installed after the fork, refuses all the child's does and more: no process, no
socket, no System V IPC, no truncation by path, signals to itself and its child alone. It
answers `ready` with the child's pid (in its PID namespace, where it has one).

Then, per cell, the supervisor empties the capture files, notes the work directory's files,
passes the code to the child (with its file-size allowance, which the child sets as its own
`RLIMIT_FSIZE`) and waits for the child's reply, reading it with a line limit
and checking it: a line too long, not JSON or not the reply due (another cell's number, an
extra line) ends the child, and the supervisor tells parley the child sent a malformed reply.
It adds stdout and stderr (head and tail, from its own descriptors) and the changed files.
An interrupt from parley (a cancelled run) sends the child SIGINT, and SIGKILL after the
grace; when the child is gone, however it went, the supervisor says so (`ended`, with the
output it had made) and exits. The messages are listed in parley's `_protocol.py`.

    -> {"limits": {...}, "guard": {"writes": bool, "network": bool, "processes": bool,
        "strict": bool}, "identity": [uid, gid, keep_read_search] | null,
        "read": [...], "landlock": {"read": [...], "write": [...], "devices": [...]} | null,
        "seccomp": {"processes": bool, "sockets": bool, "ipc": bool} | null,
        "interrupt_grace": seconds, "reply_bytes": n}
    -> {"kind": "cell", "cell": n, "code": "...", "cpu_time": 30, "file_size": bytes | null}
    -> {"kind": "interrupt", "cell": n}
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import json
import os
import resource
import select
import signal
import stat
import sys
import tempfile
import time
from types import ModuleType
from typing import IO, Any

SCRATCH = ".parley"
_SCRATCH_FOLDERS = ("tmp", "matplotlib", "cache")
_MAX_FILES = 50
_MAX_SEEN = 10_000
_REQUEST_BYTES = 64 * 1024 * 1024  # a cell's code, from parley
_EXIT_WAIT = 5.0
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class MalformedError(Exception):
    """The child sent something that is not the reply due."""


# -- limits -----------------------------------------------------------------------------------


def _lower(kind: int, value: int) -> None:
    """Set a limit to `value`, or as close as the current hard limit allows."""
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply_limits(limits: dict[str, Any]) -> None:
    """Apply the resource limits to this process (the child inherits them)."""
    _lower(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    _lower(resource.RLIMIT_FSIZE, int(limits["file_size_bytes"]))
    _lower(resource.RLIMIT_NPROC, int(limits["processes"]))
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_CPU, int(limits["session_cpu_time"]))
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


# -- files ------------------------------------------------------------------------------------


def _real_dir(parent: int, name: str) -> int:
    """A descriptor of the folder `name` below `parent`, made if missing or not a folder.

    A link or a file the code left in its place is removed (the link itself, never what it
    points to).
    """
    try:
        if not stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        pass
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
    return os.open(name, _DIRECTORY, dir_fd=parent)


def make_scratch(root: str) -> str:
    """Make the scratch folder and its folders (TMPDIR, matplotlib's and fontconfig's)."""
    top = os.open(root, _DIRECTORY)
    try:
        scratch = _real_dir(top, SCRATCH)
        try:
            for name in _SCRATCH_FOLDERS:
                os.close(_real_dir(scratch, name))
        finally:
            os.close(scratch)
    finally:
        os.close(top)
    return os.path.join(root, SCRATCH)


def snapshot(root: str) -> dict[str, tuple[int, int]]:
    """Files under the work directory (but the scratch folder) with size and mtime."""
    found: dict[str, tuple[int, int]] = {}
    pending = [root]
    while pending:  # no recursion: the code may nest folders deeper than Python's stack
        folder = pending.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if not (folder == root and entry.name == SCRATCH):
                    pending.append(entry.path)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[os.path.relpath(entry.path, root)] = (info.st_size, info.st_mtime_ns)
            if len(found) > _MAX_SEEN:
                return found
    return found


def changed_files(before: dict[str, tuple[int, int]], root: str) -> list[str]:
    """Files created or modified since `before`."""
    after = snapshot(root)
    return sorted(path for path, seen in after.items() if before.get(path) != seen)[:_MAX_FILES]


class Capture:
    """The child's stdout and stderr files; read here, emptied before each cell."""

    def __init__(self, directory: str, limit: int) -> None:
        self.limit = limit
        # Kept for the worker's life; the child writes them as its fds 1 and 2, appending.
        self.files: list[IO[bytes]] = [tempfile.TemporaryFile(dir=directory) for _ in "12"]  # noqa: SIM115
        for file in self.files:
            flags = fcntl.fcntl(file.fileno(), fcntl.F_GETFL)
            fcntl.fcntl(file.fileno(), fcntl.F_SETFL, flags | os.O_APPEND)

    @property
    def fds(self) -> tuple[int, int]:
        """The descriptors of stdout and stderr."""
        return self.files[0].fileno(), self.files[1].fileno()

    def clear(self) -> None:
        """Empty both (before a cell)."""
        for fd in self.fds:
            os.ftruncate(fd, 0)

    def read(self) -> tuple[str, str]:
        """Stdout and stderr, cut in the middle past the limit."""
        out, err = (_read_bounded(fd, self.limit) for fd in self.fds)
        return out, err


def _read_bounded(fd: int, limit: int) -> str:
    size = os.fstat(fd).st_size
    if size <= limit:
        return os.pread(fd, size, 0).decode("utf-8", "replace")
    half = limit // 2
    head = os.pread(fd, half, 0).decode("utf-8", "replace")
    tail = os.pread(fd, half, size - half).decode("utf-8", "replace")
    return f"{head}\n[... {size - limit} bytes cut ...]\n{tail}"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


# -- lines ------------------------------------------------------------------------------------


class Lines:
    """Lines read from a descriptor, none longer than `limit` bytes (the rest is refused)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.limit = limit
        self.buffer = bytearray()
        self.searched = 0  # the buffer holds no newline before this
        self.closed = False

    def fill(self) -> None:
        """Read what is there (one read); `closed` at the end of the pipe."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.closed = True
        self.buffer += chunk

    def _line(self) -> bytes | None:
        """The first complete line, taken from the buffer; None if there is none yet.

        Raises:
            MalformedError: It is, or the unfinished one is already, longer than the limit.
        """
        end = self.buffer.find(b"\n", self.searched)
        if end < 0:
            self.searched = len(self.buffer)
            if self.searched > self.limit:
                raise MalformedError(f"a line longer than {self.limit} bytes")
            return None
        if end > self.limit:
            raise MalformedError(f"a line longer than {self.limit} bytes")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        self.searched = 0
        return line

    def take(self) -> list[bytes]:
        """The complete lines read so far (see `_line` for what it raises)."""
        lines = []
        while (line := self._line()) is not None:
            lines.append(line)
        return lines

    def next_line(self) -> bytes | None:
        """The next line, waiting for it; None at the end of the pipe (see `_line`)."""
        while (line := self._line()) is None:
            if self.closed:
                return None
            self.fill()
        return line


# -- the supervisor ---------------------------------------------------------------------------


def _sibling(name: str) -> ModuleType:
    """Load a module that lives beside this script (the worker runs with `-I`: no sys.path)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_parley_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prctl(option: int, value: int = 0) -> int:
    """Linux's prctl; 0 elsewhere (no dumpable flag to clear)."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    return 0 if prctl is None else int(prctl(option, ctypes.c_ulong(value), 0, 0, 0))


def _protocol_fds() -> tuple[int, int]:
    """Private copies of fds 0 and 1 for parley's messages; 0 becomes /dev/null, 1 stderr."""
    reader = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    writer = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return reader, writer


class OomScore:
    """This process's `/proc/self/oom_score_adj`, opened while it may (before dropping root).

    The REPL child is forked with the highest score, and the supervisor goes back to its
    own: where the session's memory runs out (its cgroup, or the machine), the kernel's
    out-of-memory killer takes the code's processes before the supervisor, which then
    reports the cell's output. Raising a score and lowering it back needs no privilege;
    opened later, the file would be root's (the supervisor is not dumpable).
    """

    def __init__(self) -> None:
        self.fd: int | None = None
        self.own = b"0"
        with contextlib.suppress(OSError):
            self.fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
            self.own = os.read(self.fd, 32).strip() or self.own

    def set(self, value: bytes) -> None:
        """Write a score (nothing where the kernel refuses it)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.lseek(self.fd, 0, os.SEEK_SET)
                os.write(self.fd, value)

    def close(self) -> None:
        """Back to its own score, for good."""
        if self.fd is not None:
            self.set(self.own)
            os.close(self.fd)
            self.fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Supervisor:
    """The supervisor's state once the child runs; `serve` answers parley until the end."""

    def __init__(
        self, config: dict[str, Any], root: str, host: tuple[Lines, int], capture: Capture
    ) -> None:
        self.config = config
        self.root = root
        self.host, self.out = host
        self.capture = capture
        self.grace = float(config.get("interrupt_grace", 1.0))
        self.output_chars = int(config["limits"]["output_chars"])
        self.child = 0
        self.requests = -1
        self.replies: Lines | None = None
        self.wake = -1
        self.cell: int | None = None  # the cell running in the child
        self.interrupted: float | None = None  # when it was sent SIGINT
        self.before: dict[str, tuple[int, int]] = {}

    # -- talking to parley ---------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        """One message to parley."""
        _write_all(self.out, json.dumps(message).encode() + b"\n")

    def ended(self, cause: str, status: int | None, detail: str = "") -> int:
        """Tell parley the child is gone (with its cell's output so far); the exit status."""
        stdout, stderr = self.capture.read()
        self.send(
            {
                "kind": "ended",
                "cell": self.cell,
                "cause": cause,
                "status": status,
                "detail": detail,
                "stdout": stdout,
                "stderr": stderr,
            }
        )
        return 0

    # -- the child ------------------------------------------------------------------------

    def start_child(self, dumpable: int, kernel: ModuleType, oom: OomScore) -> None:
        """Fork the REPL child (see `_repl.py`); this process keeps the other pipe ends."""
        repl, guard = _sibling("_repl"), _sibling("_guard")
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        wake_read, wake_write = os.pipe()
        for fd in (wake_read, wake_write):
            os.set_blocking(fd, False)
        # SIGCHLD wakes the loop: the child may die without closing its replies (a process
        # it forked holds them).
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        parent = os.getpid()
        oom.set(b"1000")
        pid = os.fork()
        if pid == 0:
            fds = (requests_read, replies_write, *self.capture.fds)
            repl.child_main(self.config, parent, fds, dumpable, kernel, guard)
        oom.close()
        os.close(requests_read)
        os.close(replies_write)
        self.child, self.requests, self.wake = pid, requests_write, wake_read
        self.replies = Lines(replies_read, int(self.config.get("reply_bytes", 32 << 20)))

    def kill_child(self) -> int | None:
        """SIGKILL the child; its status once it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.child, signal.SIGKILL)
        return self.wait_child(_EXIT_WAIT)

    def wait_child(self, timeout: float) -> int | None:
        """The child's status (an exit status, or minus a signal) once it exits; None if not yet."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status = os.waitpid(self.child, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([self.wake], [], [], min(left, 0.05))
            self._drain_wake()

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake, 512):
                pass
        except BlockingIOError:
            pass

    def child_ready(self) -> dict[str, Any] | None:
        """The layers the child applied, or None if it failed to start (its error logged)."""
        assert self.replies is not None
        try:
            line = self.replies.next_line()
            message = json.loads(line) if line is not None else None
        except (MalformedError, ValueError):
            message = None
        if isinstance(message, dict) and isinstance(message.get("ready"), dict):
            layers: dict[str, Any] = message["ready"]
            return layers
        self.kill_child()
        sys.stderr.write(self.capture.read()[1])  # the child's traceback, for parley's log
        return None

    # -- the loop -------------------------------------------------------------------------

    def serve(self) -> int:
        """Answer parley until it closes its pipe or the child is gone; the exit status."""
        assert self.replies is not None
        while True:
            timeout = None
            if self.interrupted is not None:
                timeout = max(0.0, self.interrupted + self.grace - time.monotonic())
            watched = [self.host.fd, self.wake]
            if not self.replies.closed:
                watched.append(self.replies.fd)
            readable, _, _ = select.select(watched, [], [], timeout)
            self._drain_wake()
            try:
                if self.replies.fd in readable:
                    self.replies.fill()
                    for line in self.replies.take():
                        self.child_line(line)
            except MalformedError as exc:
                self.kill_child()
                return self.ended("malformed", None, str(exc))
            if self.host.fd in readable:
                self.host.fill()
                for line in self.host.take():
                    self.host_message(json.loads(line))
                if self.host.closed:
                    self.kill_child()
                    return 0
            done = self.check_child()
            if done is not None:
                return done

    def check_child(self) -> int | None:
        """Whether the child is gone (or past its grace, then killed): the exit status if so."""
        assert self.replies is not None
        pid, status = os.waitpid(self.child, os.WNOHANG)
        if pid:
            return self.ended("exit", os.waitstatus_to_exitcode(status))
        if self.interrupted is not None and time.monotonic() >= self.interrupted + self.grace:
            gone = self.kill_child()
            return self.ended("killed", gone, "it did not stop when interrupted")
        if self.replies.closed:
            # Its replies closed: it is exiting (wait a moment for it), or it closed them.
            gone = self.wait_child(1.0)
            if gone is not None:
                return self.ended("exit", gone)
            self.kill_child()
            return self.ended("malformed", None, "it closed its replies")
        return None

    def host_message(self, message: dict[str, Any]) -> None:
        """A cell to run, or an interrupt of the running one."""
        kind = message.get("kind")
        if kind == "interrupt":
            if message.get("cell") == self.cell and self.interrupted is None:
                self.interrupted = time.monotonic()
                # Told in line first, then by signal: a cell about to start sees the line,
                # one running gets KeyboardInterrupt (see `_repl.py`).
                with contextlib.suppress(OSError):
                    self.tell_child({"interrupt": self.cell})
                os.kill(self.child, signal.SIGINT)
        elif kind == "cell" and self.cell is None:
            self.capture.clear()
            self.before = snapshot(self.root)
            self.cell = int(message["cell"])
            request = {k: message.get(k) for k in ("cell", "code", "cpu_time", "file_size")}
            # If it closed its requests, check_child finds it gone, or the wall time ends it.
            with contextlib.suppress(OSError):
                self.tell_child(request)

    def tell_child(self, message: dict[str, Any]) -> None:
        """One line to the child."""
        _write_all(self.requests, json.dumps(message).encode() + b"\n")

    def child_line(self, line: bytes) -> None:
        """The child's reply, checked, with the output and files added, to parley.

        Raises:
            MalformedError: Not JSON, not a reply, or not the running cell's.
        """
        try:
            message = json.loads(line)
        except ValueError:
            raise MalformedError("a line that is not JSON") from None
        if self.cell is None:
            raise MalformedError("a line while no cell ran")
        error, result, images = _check_reply(message, self.cell)
        stdout, stderr = self.capture.read()
        self.send(
            {
                "kind": "cell",
                "cell": self.cell,
                "stdout": stdout,
                "stderr": stderr,
                "error": None if error is None else _cut(error, self.output_chars),
                "result": None if result is None else _cut(result, 4000),
                "images": images,
                "files": changed_files(self.before, self.root),
                "interrupted": self.interrupted is not None,
            }
        )
        self.cell = None
        self.interrupted = None


def _check_reply(message: Any, cell: int) -> tuple[str | None, str | None, list[str]]:
    """The reply's error, result and images, if it is the reply of `cell`.

    Raises:
        MalformedError: Anything else.
    """
    if not isinstance(message, dict) or set(message) != {"cell", "error", "result", "images"}:
        raise MalformedError("a message that is not a cell's reply")
    if message["cell"] != cell:
        raise MalformedError(f"the reply of cell {message['cell']!r} while cell {cell} ran")
    error, result, images = message["error"], message["result"], message["images"]
    texts_ok = all(value is None or isinstance(value, str) for value in (error, result))
    if not texts_ok or not isinstance(images, list) or not all(isinstance(i, str) for i in images):
        raise MalformedError("a reply whose fields have the wrong types")
    return error, result, images


def landlock_supervisor(config: dict[str, Any], root: str, kernel: ModuleType) -> None:
    """Landlock for the supervisor, before the fork: the child adds its own, narrower layer.

    One domain holding the other lets the supervisor signal the child (Landlock's signal
    scope refuses signals to a process outside the sender's domain and those nested in it),
    and not the reverse. The supervisor may read all of `/proc`: the child's own layer
    narrows that to its `/proc/self`, which a rule made here would name the supervisor's.
    """
    landlock = config.get("landlock")
    if landlock:
        read = [path for path in landlock["read"] if path != "/proc/self"]
        kernel.restrict_files([*read, "/proc"], [*landlock["write"], root], landlock["devices"])


def seccomp_supervisor(config: dict[str, Any], kernel: ModuleType, child: int) -> None:
    """The supervisor's seccomp filter, after the fork (a filter is inherited).

    At least the child's in every mode: the supervisor starts no process, opens no socket,
    uses no System V IPC, truncates no path, and signals only itself and its child.
    """
    if config.get("seccomp"):
        kernel.deny_syscalls(
            processes=True, sockets=True, signals=True, truncate=True, ipc=True, child=child
        )


def main() -> int:
    """Start the child, then serve parley until it closes stdin."""
    reader, writer = _protocol_fds()
    host = Lines(reader, _REQUEST_BYTES)
    line = host.next_line()
    if line is None:
        return 0
    config = json.loads(line)
    root = os.getcwd()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    apply_limits(config["limits"])
    oom = OomScore()
    kernel = _sibling("_confine")
    layers: dict[str, Any] = {}
    identity = config.get("identity")
    if identity:
        uid, gid, keep_read_search = identity
        kernel.drop_root(int(uid), int(gid), keep_read_search=bool(keep_read_search))
    layers["uid"] = os.getuid()
    scratch = make_scratch(root)
    capture = Capture(os.path.join(scratch, "tmp"), int(config["limits"]["output_chars"]))
    supervisor = Supervisor(config, root, (host, writer), capture)
    dumpable = _prctl(_PR_GET_DUMPABLE)
    _prctl(_PR_SET_DUMPABLE, 0)
    landlock_supervisor(config, root, kernel)
    supervisor.start_child(dumpable, kernel, oom)
    seccomp_supervisor(config, kernel, supervisor.child)
    child_layers = supervisor.child_ready()
    if child_layers is None:
        return 1
    layers.update(child_layers)
    supervisor.send({"kind": "ready", "pid": supervisor.child, "layers": layers})
    return supervisor.serve()


if __name__ == "__main__":
    sys.exit(main())
