"""What a code-interpreter session uses now: its processes, their memory, its files on disk.

Read from the host side, never from inside the sandbox, and never by following what the
sandboxed code could plant: the session's directory is walked with `lstat` through
descriptors opened beneath it without following links (a symbolic link, a FIFO or a socket
is counted, never opened), and a process is read through `/proc`.

- **Processes**: a worker's process and its descendants (bubblewrap's, `unshare`'s and the
  code's children). An orphan is adopted by the sandbox's own init (bubblewrap's, the
  `unshare` shim), so it stays in the tree.
- **Memory**: each process's proportional set size (`Pss`: a page shared by n processes
  counts 1/n in each, so the sum is the session's real share), plus the memory-backed files
  its processes hold open (`memfd`, `/dev/shm`, System V segments), which hold memory no
  mapping shows. Kernel memory (pipe and socket buffers) is not counted; a cgroup counts it.
- **Disk**: the blocks of every file and folder under the session's directory, each at least
  `ENTRY_BYTES` (so that millions of empty files reach the quota too), hard links once, plus
  the deleted files its processes still hold open on that file system (a file can be
  unlinked and still grow).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from parley.tools.builtin._hostfs import open_work_dir

__all__ = [
    "ENTRY_BYTES",
    "FolderMovedError",
    "Processes",
    "disk_usage",
    "held_files",
    "session_processes",
    "status_values",
    "user_tasks",
]

ENTRY_BYTES = 4096
"""The least a file or folder counts against a disk quota."""


class FolderMovedError(OSError):
    """A folder moved while the session's directory was walked: its size is not known."""


_MEMORY_FILES = ("/memfd:", "/dev/shm/", "/SYSV")
_DELETED = " (deleted)"


def _children(pid: int) -> list[int]:
    """The children of every thread of `pid` (`/proc/<pid>/task/<tid>/children`)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as text:
                found += [int(child) for child in text.read().split()]
        except OSError:
            continue
    return found


def _children_by_scan() -> dict[int, list[int]]:
    """Every process's children, from each one's parent (kernels without `children`)."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as text:
                fields = text.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def session_processes(root: int) -> list[int]:
    """`root` and all its descendants now running (a snapshot: some may have ended since)."""
    if not os.path.exists(f"/proc/{root}"):
        return []
    by_scan = None if os.path.exists(f"/proc/{root}/task/{root}/children") else _children_by_scan()
    found: list[int] = []
    pending = [root]
    while pending and len(found) < 100_000:
        pid = pending.pop()
        found.append(pid)
        pending += by_scan.get(pid, []) if by_scan is not None else _children(pid)
    return found


def status_values(pid: int, name: str) -> list[int]:
    """The numbers of one line of `/proc/<pid>/status` (`Threads`, `NSpid`, ...); [] if none."""
    try:
        with open(f"/proc/{pid}/status") as text:
            for line in text:
                if line.startswith(name + ":"):
                    return [int(value) for value in line.split()[1:] if value.isdigit()]
    except (OSError, ValueError):
        pass
    return []


def user_tasks(uid: int) -> int:
    """Processes and threads that run as `uid` (their real, effective or saved uid); 0: none.

    `RLIMIT_NPROC` counts a user's tasks by real uid; a session's uid is one no process may
    run as already.
    """
    wanted, total = str(uid), 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = dict(
                line.split(":", 1) for line in Path(f"/proc/{name}/status").read_text().splitlines()
            )
            if wanted in fields["Uid"].split()[:3]:
                total += max(1, int(fields.get("Threads", "1")))
    return total


def _status_field(pid: int, name: str) -> int:
    values = status_values(pid, name)
    return values[0] if values else 0


def _pss(pid: int) -> int:
    """The process's proportional set size in bytes; its resident size where that is hidden."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as text:
            for line in text:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _status_field(pid, "VmRSS") * 1024


@dataclass(frozen=True)
class Processes:
    """A session's processes as measured once."""

    pids: tuple[int, ...]
    tasks: int
    """Processes and threads."""
    memory: int
    """Bytes: their proportional set sizes and the memory files they hold open."""

    @classmethod
    def measure(cls, root: int) -> Processes:
        """Measure the tree of `root` now."""
        pids = tuple(session_processes(root))
        tasks = sum(max(1, _status_field(pid, "Threads")) for pid in pids)
        held_memory, _disk = held_files(pids, disk_device=None)
        return cls(pids, tasks, sum(_pss(pid) for pid in pids) + held_memory)


def _open_files(pids: Iterable[int]) -> Iterator[tuple[str, os.stat_result]]:
    """(what each descriptor names, its file's status) for every descriptor of `pids`."""
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"{folder}/{fd}")
                if target.startswith("/"):
                    # stat() through /proc reaches the open file itself, not a path.
                    yield target, os.stat(f"{folder}/{fd}")


def held_files(pids: Iterable[int], *, disk_device: int | None) -> tuple[int, int]:
    """(memory, disk) bytes of files the processes hold open that no directory shows.

    Memory: `memfd`, `/dev/shm` and System V segments, by size. Disk: deleted regular files
    on `disk_device` (the session directory's file system), by blocks. Each file counts once
    however many descriptors name it.
    """
    memory = disk = 0
    seen: set[tuple[int, int]] = set()
    for target, info in _open_files(pids):
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        if target.startswith(_MEMORY_FILES):
            memory += info.st_size
        elif target.endswith(_DELETED) and info.st_dev == disk_device:
            disk += info.st_blocks * 512
    return memory, disk


def _entry_bytes(info: os.stat_result) -> int:
    return max(info.st_blocks * 512, ENTRY_BYTES)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass
class _Walk:
    """One walk's state: the total so far, the hard-linked files counted, where to stop."""

    stop_at: int | None
    total: int = 0
    seen: set[tuple[int, int]] = field(default_factory=set)

    def over(self) -> bool:
        return self.stop_at is not None and self.total > self.stop_at

    def scan(self, fd: int) -> list[str]:
        """Count the entries of the directory open as `fd`; the names of its folders."""
        folders = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile
                is_dir = stat.S_ISDIR(info.st_mode)
                if info.st_nlink > 1 and not is_dir:
                    if (info.st_dev, info.st_ino) in self.seen:
                        continue
                    self.seen.add((info.st_dev, info.st_ino))
                self.total += _entry_bytes(info)
                if is_dir:
                    folders.append(entry.name)
        return folders


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _walk(root: int, walk: _Walk) -> None:
    """Count everything beneath the directory open as `root`, holding one descriptor.

    Depth costs nothing (no recursion, no descriptor per level): the walk goes down by
    opening a folder beneath the current one without following links, and back up through
    `..`, which it checks is the folder it came from (as fts does); if the code moved a
    folder meanwhile, `FolderMovedError`.
    """
    fd = os.dup(root)
    try:
        path = [_identity(fd)]
        pending = [walk.scan(fd)]
        while pending and not walk.over():
            if pending[-1]:
                try:
                    child = os.open(pending[-1].pop(), _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue  # replaced by a link or removed meanwhile: not followed
                os.close(fd)
                fd = child
                path.append(_identity(fd))
                pending.append(walk.scan(fd))
                continue
            pending.pop()
            path.pop()
            if not pending:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            if _identity(fd) != path[-1]:
                raise FolderMovedError("a folder was moved while the directory was measured")
    finally:
        os.close(fd)


def disk_usage(work_dir: Path, *, stop_at: int | None = None) -> int:
    """Bytes the session's directory takes (see the module docstring); 0 if it is missing.

    Args:
        work_dir: The session's directory.
        stop_at: Stop walking once the total passes this (the caller only needs to know
            that it did).

    Raises:
        FolderMovedError: The code moved a folder while it was walked; try again.
        UnsafeWorkDirError: The directory is a link or not a folder.
    """
    try:
        with open_work_dir(work_dir) as fd:
            walk = _Walk(stop_at, _entry_bytes(os.fstat(fd)))
            _walk(fd, walk)
            return walk.total
    except FileNotFoundError:
        return 0
