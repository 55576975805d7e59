"""Limits per code-interpreter session, not per process: memory, tasks, disk, a uid of its own.

`SandboxLimits` says how much; the worker's resource limits (`RLIMIT_AS`, `RLIMIT_NPROC`,
`RLIMIT_FSIZE`) hold per process or per uid. This module makes them hold for the session,
whatever number of processes it runs (bubblewrap lets the code start children) and whatever
they hold outside their address space (memory files).

**Memory and tasks**, by one of two backends (`Enforcement.kind`):

- a **cgroup** per session (`_cgroup`: v1 or v2): the kernel caps the memory and the tasks
  of all the session's processes together (the worker's supervisor, its REPL child and the
  code's children). When it kills one of them for memory (the REPL child and its children
  first: they have the highest out-of-memory score), the watch stops the session's worker
  (the running cell and all its processes) and says why.
- a **watchdog**, where no cgroup is to be had: a thread per live worker measures the
  session's processes (`_usage.Processes`: the worker's whole tree) every `WATCH_INTERVAL`
  seconds and stops the worker when their memory together passes `memory_bytes`, or their
  tasks `processes`. It
  acts after the fact: between two looks the session can pass the limit by what it
  allocates in that time.

`RLIMIT_AS` still caps each process in both (an allocation past it raises MemoryError).
Stopping a worker kills its REPL child first (`WorkerProcess.kill`), so the call's result
keeps the output the cell had made.

**Disk** (`SandboxLimits.disk_bytes`, no root-only file-system quota needed): before each
cell the REPL child's `RLIMIT_FSIZE` is lowered (soft) to what remains of the quota, so a write
past it fails with EFBIG ("File too large"); the watch measures the directory while the
worker lives and stops it when the directory passes its quota (by what was written since the
last look; nothing stored is deleted); a cell that ends over the quota says so. Files copied
in (`files=`) are checked first (`check_disk_quota`).

**A uid per session** (`_uids`) when parley runs as root: another session's processes are
not the code's to signal or change, and `RLIMIT_NPROC` counts the session alone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from parley.errors import ConfigurationError
from parley.tools.builtin import _usage
from parley.tools.builtin._cgroup import (
    CgroupTree,
    CgroupUnavailableError,
    SessionCgroup,
    find_tree,
)
from parley.tools.builtin._uids import (
    DEFAULT_LOCK_DIR,
    UidLease,
    UidPool,
    UidRange,
    UidsExhaustedError,
)
from parley.tools.builtin.sandbox import SandboxLimits, drops_root

if TYPE_CHECKING:
    from parley.tools.builtin._process import WorkerProcess

__all__ = [
    "Backend",
    "Cell",
    "Enforcement",
    "SessionBox",
    "SessionLimitError",
    "check_disk_quota",
    "size_text",
]

logger = logging.getLogger("parley.tools")

Backend = Literal["auto", "cgroup", "watchdog"]
"""How memory and tasks are capped per session: `auto` takes a cgroup where it can."""

WATCH_INTERVAL = 0.2
"""Seconds between two looks of the watch."""
_SLACK = 1024 * 1024  # what a cell may always write (its output, a small file), over quota too
_DISK_EVERY = 2  # a disk walk costs more: at most every this many looks, and 4x its own time
_MOVED_LIMIT = 25  # walks in a row spoiled by moving folders before that is taken as evasion


class SessionLimitError(Exception):
    """A session cannot start within its limits; `reason` says why, for the model."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def size_text(size: int) -> str:
    """A byte count as people read it: 768 MiB, 1 GiB, 1.5 GiB."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"  # pragma: no cover  (the loop returns at GiB)


def _measure_disk(work_dir: Path, stop_at: int | None = None) -> int | None:
    """The directory's size; None if the code kept moving folders through three walks."""
    for _ in range(3):
        with contextlib.suppress(_usage.FolderMovedError):
            return _usage.disk_usage(work_dir, stop_at=stop_at)
    return None


def check_disk_quota(work_dir: Path, adding: int, limits: SandboxLimits) -> str | None:
    """Why copying `adding` bytes into a session's directory is refused; None if it fits.

    For `code_interpreter(files=...)`: call it per file, before copying. The answer is a
    short reason for the model ("... past this conversation's disk quota ...").
    """
    if adding > limits.file_size_bytes:
        return f"{size_text(adding)} is more than the {size_text(limits.file_size_bytes)} per file"
    if limits.disk_bytes is None:
        return None
    used = _measure_disk(work_dir, stop_at=limits.disk_bytes)
    if used is None:
        return "the conversation's folders kept changing while their size was measured"
    if used + adding > limits.disk_bytes:
        return (
            f"{size_text(adding)} would take this conversation's files past their disk quota "
            f"({size_text(used)} used of {size_text(limits.disk_bytes)})"
        )
    return None


@dataclass
class Cell:
    """One call's view of the limits: what the worker may write, and what happened."""

    file_size: int | None = None
    """The soft `RLIMIT_FSIZE` for the call (what remains of the disk quota)."""
    stopped: str | None = None
    """Why the watch stopped the worker during the call, if it did."""
    note: str | None = None
    """A note for the result (the directory is over its quota)."""


class Enforcement:
    """How one interpreter holds its sessions to their limits (see the module docstring).

    Args:
        backend: `auto` (a cgroup where the machine gives one, else the watchdog), `cgroup`
            (refused where there is none) or `watchdog`.
        cgroup_parent: A delegated cgroup v2 to make the sessions' groups beneath (default:
            beneath parley's own cgroup).
        uids: The uids sessions run as when parley runs as root (None: every worker runs as
            `nobody`, as when parley is not root).
        uid_lock_dir: Where held uids are locked against other parley processes.

    Raises:
        ConfigurationError: `cgroup` was asked for and this machine gives none.
    """

    def __init__(
        self,
        backend: Backend = "auto",
        *,
        cgroup_parent: Path | None = None,
        uids: UidRange | None = UidRange(),  # noqa: B008  (frozen: one shared default is safe)
        uid_lock_dir: Path | None = DEFAULT_LOCK_DIR,
    ) -> None:
        if backend not in ("auto", "cgroup", "watchdog"):
            raise ConfigurationError(
                "code_interpreter: session_limits must be auto, cgroup or watchdog, got "
                f"{backend!r}"
            )
        self.tree: CgroupTree | None = None
        if backend != "watchdog":
            try:
                self.tree = find_tree(cgroup_parent)
            except CgroupUnavailableError as exc:
                if backend == "cgroup":
                    raise ConfigurationError(
                        f"code_interpreter: no cgroup for sessions: {exc}"
                    ) from exc
                logger.info("code_interpreter: no cgroup per session (%s); a watchdog instead", exc)
        self.uid_pool = UidPool(uids, uid_lock_dir) if uids is not None and drops_root() else None

    @property
    def kind(self) -> str:
        """`cgroup v1`, `cgroup v2` or `watchdog`."""
        return self.tree.name if self.tree is not None else "watchdog"

    def describe(self, limits: SandboxLimits) -> str:
        """What is enforced, as the model reads it."""
        memory = size_text(limits.memory_bytes)
        if self.tree is not None:
            together = f"{memory} of memory for all of this conversation's processes together"
        else:
            together = (
                f"{memory} of memory for all of this conversation's processes together "
                "(checked several times a second)"
            )
        disk = (
            f"{size_text(limits.disk_bytes)} of files in total, "
            if limits.disk_bytes is not None
            else ""
        )
        return (
            f"Limits: {together}, and {memory} per process (past it, MemoryError); "
            f"{limits.processes} processes and threads; {disk}"
            f"{size_text(limits.file_size_bytes)} per file; {limits.cpu_time} s of CPU and "
            f"{limits.wall_time:g} s per call. A call that goes past its time or a limit for "
            "the whole conversation is stopped, with the output it had printed; its variables "
            "are lost (files stay)."
        )

    def details(self) -> str:
        """How it is enforced, for logs and people."""
        uid = "a uid per session" if self.uid_pool is not None else "one uid for all sessions"
        return f"memory and tasks per session by {self.kind}; disk quota by a watch; {uid}"

    def open(self, key: str, work_dir: Path) -> SessionBox:
        """The limits of one session (nothing is taken until its worker starts)."""
        return SessionBox(self, key, work_dir)

    def close(self) -> None:
        """Remove this interpreter's cgroup (its sessions' are gone by now)."""
        if self.tree is not None:
            self.tree.remove()


class SessionBox:
    """One session's uid, cgroup and watch; held from its first worker until it ends."""

    def __init__(self, enforcement: Enforcement, key: str, work_dir: Path) -> None:
        self.enforcement = enforcement
        self.key = key
        self.work_dir = work_dir
        self._lease: UidLease | None = None
        self._group: SessionCgroup | None = None
        self._watch: _Watch | None = None
        self._lock = threading.Lock()
        self._stopped: str | None = None
        self._cell: Cell | None = None
        self.disk_allowed: int | None = None

    @property
    def uid(self) -> int | None:
        """The session's uid (None: the default, `nobody` or parley's own)."""
        return self._lease.uid if self._lease is not None else None

    @property
    def group(self) -> SessionCgroup | None:
        """The session's cgroup, while it has one."""
        return self._group

    def prepare(self, limits: SandboxLimits) -> None:
        """Before a worker starts: the session's uid and cgroup.

        Raises:
            SessionLimitError: No uid is free, or the kernel refused the cgroup.
        """
        pool, tree = self.enforcement.uid_pool, self.enforcement.tree
        try:
            if pool is not None and self._lease is None:
                self._lease = pool.acquire(self.key, self.work_dir)
            if tree is not None and self._group is None:
                self._group = tree.session("session", limits.memory_bytes)
            if self._group is not None:
                self._group.allow_tasks(None)  # the sandbox's own processes, until it is ready
        except UidsExhaustedError as exc:
            raise SessionLimitError(exc.reason) from exc
        except OSError as exc:
            raise SessionLimitError(f"its cgroup could not be set up: {exc}") from exc
        self.disk_allowed = None if limits.disk_bytes is None else limits.disk_bytes + _SLACK

    def command(self, argv: list[str]) -> list[str]:
        """The worker's command, made to start in the session's cgroup."""
        return self._group.join_command(argv) if self._group is not None else argv

    def started(self, worker: WorkerProcess, limits: SandboxLimits) -> None:
        """The worker is ready: cap its tasks and watch it."""
        if self._group is not None:
            self._group.allow_tasks(limits.processes)
        self._watch = _Watch(self, worker, limits)
        self._watch.start()

    def take_stop_reason(self) -> str | None:
        """Why the watch stopped the worker, once (None if it did not)."""
        with self._lock:
            reason, self._stopped = self._stopped, None
            return reason

    def stop(self, worker: WorkerProcess, reason: str) -> None:
        """Stop the worker (the running cell and every process of the session) for `reason`."""
        with self._lock:
            self._stopped = reason
            if self._cell is not None:
                self._cell.stopped = reason
        worker.kill()

    @contextlib.contextmanager
    def cell(self, limits: SandboxLimits) -> Iterator[Cell]:
        """Around one call: its file-size allowance before, a note on the quota after."""
        cell = Cell()
        quota = limits.disk_bytes
        if quota is not None:
            used = _measure_disk(self.work_dir)
            if used is not None:
                cell.file_size = min(max(quota - used, _SLACK), limits.file_size_bytes)
                self.disk_allowed = max(quota, used) + _SLACK
        watch = self._watch
        with self._lock:
            self._cell = cell
        try:
            yield cell
        finally:
            with self._lock:
                self._cell = None
            if watch is not None and cell.stopped is None:
                self._settle(watch, cell)
            if quota is not None and cell.stopped is None:
                used = _measure_disk(self.work_dir)
                if used is not None and used >= quota:
                    cell.note = (
                        f"This conversation's files take {size_text(used)}, over their disk "
                        f"quota of {size_text(quota)}: writing more fails; delete files to make "
                        "room."
                    )

    def _settle(self, watch: _Watch, cell: Cell) -> None:
        """The kernel may have killed for memory between the watch's looks: stop it now."""
        reason = watch.killed_for_memory()
        if reason is None:
            return
        with self._lock:
            self._stopped = cell.stopped = reason
        watch.worker.kill()

    def worker_ended(self) -> None:
        """The worker is gone: stop watching it (its cgroup and uid stay for the next)."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.finish()

    def close(self) -> None:
        """The session ended: stop the watch, remove the cgroup, free the uid."""
        self.worker_ended()
        group, self._group = self._group, None
        if group is not None:
            group.remove()
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()


class _Watch(threading.Thread):
    """Looks at a live worker's session every `WATCH_INTERVAL` s; stops it past a limit."""

    def __init__(self, box: SessionBox, worker: WorkerProcess, limits: SandboxLimits) -> None:
        super().__init__(name="parley-ci-watch", daemon=True)
        self.box = box
        self.worker = worker
        self.limits = limits
        self._done = threading.Event()
        group = box.group
        self._ooms = group.oom_kills() if group is not None else 0
        self._tasks = _usage.Processes.measure(worker.pid).tasks if group is None else 0
        self._disk_due = 0
        self._disk_moved = 0
        self._device = box.work_dir.stat().st_dev

    def finish(self) -> None:
        """Stop looking (the worker ended)."""
        self._done.set()
        if self is not threading.current_thread():
            self.join(timeout=5)

    def run(self) -> None:
        looks = 0
        while not self._done.wait(WATCH_INTERVAL) and self.worker.alive:
            looks += 1
            try:
                reason = self._memory_and_tasks() or self._disk(looks)
            except OSError as exc:  # /proc or the cgroup changed under it: look again
                logger.warning("code_interpreter: the session's watch could not look: %s", exc)
                continue
            if reason and not self._done.is_set():
                self.box.stop(self.worker, reason)
                return

    def killed_for_memory(self) -> str | None:
        """Why the session must stop if the kernel killed one of its processes for memory."""
        group = self.box.group
        if group is None or group.oom_kills() <= self._ooms:
            return None
        return (
            "the conversation's processes together used more memory than its limit "
            f"({size_text(self.limits.memory_bytes)}); the kernel killed one of them"
        )

    def _memory_and_tasks(self) -> str | None:
        limits = self.limits
        memory = size_text(limits.memory_bytes)
        if self.box.group is not None:
            return self.killed_for_memory()
        now = _usage.Processes.measure(self.worker.pid)
        if now.memory > limits.memory_bytes:
            return (
                "the conversation's processes together used more memory than its limit "
                f"({size_text(now.memory)} of {memory})"
            )
        if now.tasks > self._tasks + limits.processes:
            return (
                f"the conversation ran more processes and threads than its limit "
                f"({now.tasks - self._tasks} of {limits.processes})"
            )
        return None

    def _disk(self, looks: int) -> str | None:
        allowed = self.box.disk_allowed
        if allowed is None or looks < self._disk_due:
            return None
        started = time.monotonic()
        try:
            used = _usage.disk_usage(self.box.work_dir, stop_at=allowed)
            self._disk_moved = 0
        except _usage.FolderMovedError:
            self._disk_moved += 1
            if self._disk_moved < _MOVED_LIMIT:
                return None
            return "its folders kept moving while the disk quota was measured"
        pids = _usage.session_processes(self.worker.pid)
        _memory, deleted = _usage.held_files(pids, disk_device=self._device)
        cost = time.monotonic() - started
        self._disk_due = looks + max(_DISK_EVERY, int(4 * cost / WATCH_INTERVAL))
        if used + deleted > allowed:
            quota = size_text(self.limits.disk_bytes or 0)
            return (
                f"the conversation's files passed their disk quota ({quota}); what was "
                "written is kept: delete files to make room"
            )
        return None
