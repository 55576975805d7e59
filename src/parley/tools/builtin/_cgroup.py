"""A control group per code-interpreter session: memory and tasks capped for all its processes.

`RLIMIT_AS` limits each process; a session under bubblewrap may run many, and a memory file
(`memfd`) holds memory no process maps. A cgroup's limits hold for everything its processes
use together (their pages, the page cache and kernel memory charged to them, memory files),
and its task cap counts every process and thread in it.

Where the groups are: beneath the cgroup parley runs in, one group per interpreter
(`parley-<pid>-<n>`), holding one group per live session. With cgroup v1 that is done in the
`memory` and the `pids` hierarchy each; with cgroup v2 in the one tree, with both
controllers enabled in each parent's `cgroup.subtree_control`. v2 forbids that in a group
that has processes of its own, so parley's own cgroup serves only where it may (the root);
elsewhere name a delegated cgroup with no processes in it (`cgroup_parent`). Groups left by
a parley process that died are removed by the next one.

A worker joins its session's group before it starts (`SessionCgroup.join_command`): a shell
writes its own pid into each `cgroup.procs`, then runs the sandbox, so every process of the
sandbox is in the group from the first.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupTree", "CgroupUnavailableError", "SessionCgroup", "find_tree"]

logger = logging.getLogger("parley.tools")

_names = itertools.count(1)
_STALE = re.compile(r"parley-(\d+)-\d+")
_JOIN = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n - 1)); '
    'done; exec "$@"'
)


class CgroupUnavailableError(Exception):
    """This machine gives parley no cgroup with memory and pids controllers; says why."""


@dataclass(frozen=True)
class _Layout:
    """The file names of one cgroup version."""

    memory_max: str
    swap_max: str
    memory_now: str
    memory_peak: str
    events: str


_V1 = _Layout(
    "memory.limit_in_bytes",
    "memory.memsw.limit_in_bytes",
    "memory.usage_in_bytes",
    "memory.max_usage_in_bytes",
    "memory.oom_control",
)
_V2 = _Layout("memory.max", "memory.swap.max", "memory.current", "memory.peak", "memory.events")


def _unescape(field: str) -> str:
    """A mountinfo path: spaces and the like are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts() -> list[tuple[str, str, Path, set[str]]]:
    """(file system type, root, mount point, super options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as lines:
        for line in lines:
            left, _sep, right = line.partition(" - ")
            fields, extra = left.split(), right.split()
            if len(fields) >= 5 and len(extra) >= 3 and extra[0] in ("cgroup", "cgroup2"):
                options = set(extra[2].split(","))
                found.append((extra[0], _unescape(fields[3]), Path(_unescape(fields[4])), options))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under "" its v2 cgroup."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as lines:
        for line in lines:
            _number, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _beneath(mount: Path, root: str, path: str) -> Path | None:
    """The directory of cgroup `path` in a hierarchy mounted at `mount` from `root`."""
    relative = os.path.relpath(path, root)
    return None if relative.startswith("..") else (mount / relative).resolve()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


def _read_int(path: Path, key: str | None = None) -> int:
    """An integer file, or the `key` line of a flat-keyed one; 0 if absent."""
    try:
        text = path.read_text()
    except OSError:
        return 0
    if key is None:
        return int(text.split()[0]) if text.split() and text.split()[0].isdigit() else 0
    for line in text.splitlines():
        name, _sep, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _kill_and_remove(group: Path, attempts: int = 250) -> bool:
    """Kill whatever runs in `group` and remove it (and groups beneath it); whether it went."""
    for child in [p for p in group.iterdir() if p.is_dir()] if group.is_dir() else []:
        _kill_and_remove(child, attempts)
    wait = threading.Event()
    for _ in range(attempts):
        if not group.exists():
            return True
        if (group / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(group / "cgroup.kill", "1")
        else:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            wait.wait(0.02)  # a killed process leaves its group when it has exited
    logger.warning("code_interpreter: cgroup %s could not be removed", group)
    return False


def _remove_stale(parent: Path) -> None:
    """Remove the groups of parley processes that ended without removing theirs."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            found = _STALE.fullmatch(entry.name)
            if found and entry.is_dir() and not Path(f"/proc/{found.group(1)}").exists():
                _kill_and_remove(entry)


class SessionCgroup:
    """One session's group (in both v1 hierarchies, or the one v2 tree)."""

    def __init__(self, version: int, memory_dir: Path, pids_dir: Path) -> None:
        self.version = version
        self.memory_dir = memory_dir
        self.pids_dir = pids_dir
        self._files = _V1 if version == 1 else _V2

    @property
    def dirs(self) -> list[Path]:
        """Its directories (one in v2)."""
        return list(dict.fromkeys((self.memory_dir, self.pids_dir)))

    def limit_memory(self, memory_bytes: int) -> None:
        """Cap the memory of all its processes; in v2 an out-of-memory kill takes them all."""
        _write(self.memory_dir / self._files.memory_max, str(memory_bytes))
        swap = self.memory_dir / self._files.swap_max
        if swap.exists():  # swap must not hold what RAM may not (v1 counts RAM + swap)
            _write(swap, str(memory_bytes) if self.version == 1 else "0")
        if self.version == 2:
            _write(self.memory_dir / "memory.oom.group", "1")

    def allow_tasks(self, more: int | None) -> None:
        """Cap its tasks at those it has now plus `more` (None: no cap)."""
        value = "max" if more is None else str(self.tasks() + more)
        _write(self.pids_dir / "pids.max", value)

    def join_command(self, argv: list[str]) -> list[str]:
        """`argv`, run by a shell that first puts itself in this group."""
        procs = [str(folder / "cgroup.procs") for folder in self.dirs]
        return ["/bin/sh", "-c", _JOIN, "sh", str(len(procs)), *procs, *argv]

    def tasks(self) -> int:
        """Processes and threads in it now."""
        return _read_int(self.pids_dir / "pids.current")

    def memory(self) -> int:
        """Bytes charged to it now."""
        return _read_int(self.memory_dir / self._files.memory_now)

    def peak(self) -> int:
        """The most bytes charged to it at once (since it was made)."""
        return _read_int(self.memory_dir / self._files.memory_peak) or self.memory()

    def oom_kills(self) -> int:
        """Processes the kernel killed in it for its memory limit."""
        return _read_int(self.memory_dir / self._files.events, "oom_kill")

    def remove(self) -> bool:
        """Kill what runs in it and remove it; whether every directory went."""
        removed = [_kill_and_remove(folder) for folder in self.dirs]  # each, even past a failure
        return all(removed)


class CgroupTree:
    """One interpreter's group, holding its sessions' groups."""

    def __init__(self, version: int, memory_dir: Path, pids_dir: Path) -> None:
        self.version = version
        self.memory_dir = memory_dir
        self.pids_dir = pids_dir

    @property
    def name(self) -> str:
        """How logs and descriptions name the backend."""
        return f"cgroup v{self.version}"

    def session(self, label: str, memory_bytes: int) -> SessionCgroup:
        """A new group for a session, its memory capped.

        Raises:
            OSError: The kernel refused to make or configure it.
        """
        name = f"{label}-{next(_names)}"
        group = SessionCgroup(self.version, self.memory_dir / name, self.pids_dir / name)
        for folder in group.dirs:
            folder.mkdir()
        try:
            group.limit_memory(memory_bytes)
        except OSError:
            group.remove()
            raise
        return group

    def remove(self) -> None:
        """Remove its groups (sessions' groups left in it first)."""
        for folder in dict.fromkeys((self.memory_dir, self.pids_dir)):
            _kill_and_remove(folder)


def _enable(folder: Path) -> None:
    """Hand the memory and pids controllers to the groups beneath `folder` (v2)."""
    enabled = (folder / "cgroup.subtree_control").read_text().split()
    missing = [name for name in ("memory", "pids") if name not in enabled]
    if missing:
        _write(folder / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))


def _v1_dirs() -> tuple[Path, Path]:
    own = _own_paths()
    dirs = []
    for controller in ("memory", "pids"):
        mount = next(
            (m for m in _mounts() if m[0] == "cgroup" and controller in m[3] and controller in own),
            None,
        )
        folder = _beneath(mount[2], mount[1], own[controller]) if mount else None
        if folder is None or not folder.is_dir():
            raise CgroupUnavailableError(f"no cgroup v1 {controller} hierarchy holds this process")
        dirs.append(folder)
    return dirs[0], dirs[1]


def _v2_dir(parent: Path | None) -> Path:
    if parent is not None:
        return parent
    own = _own_paths()
    mount = next((m for m in _mounts() if m[0] == "cgroup2"), None)
    folder = _beneath(mount[2], mount[1], own[""]) if mount and "" in own else None
    if folder is None:
        raise CgroupUnavailableError("no cgroup v2 tree holds this process")
    return folder


def _make_tree(version: int, memory_parent: Path, pids_parent: Path) -> CgroupTree:
    for parent in dict.fromkeys((memory_parent, pids_parent)):
        _remove_stale(parent)
    name = f"parley-{os.getpid()}-{next(_names)}"
    tree = CgroupTree(version, memory_parent / name, pids_parent / name)
    try:
        for folder in dict.fromkeys((tree.memory_dir, tree.pids_dir)):
            folder.mkdir()
        if version == 2:
            _enable(tree.memory_dir)
        tree.session("probe", 64 * 1024 * 1024).remove()
    except OSError as exc:
        tree.remove()
        raise CgroupUnavailableError(f"cgroup v{version}: {exc}") from exc
    return tree


def find_tree(parent: Path | None = None) -> CgroupTree:
    """Make this interpreter's group: under `parent` (v2) if given, else beneath parley's own.

    Raises:
        CgroupUnavailableError: No cgroup here has writable memory and pids controllers;
            the message says what was missing.
    """
    reasons = []
    if parent is None:
        try:
            memory, pids = _v1_dirs()
            return _make_tree(1, memory, pids)
        except (CgroupUnavailableError, OSError) as exc:
            reasons.append(str(exc))
    try:
        folder = _v2_dir(parent)
        controllers = (folder / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(controllers):
            raise CgroupUnavailableError(
                f"cgroup v2 {folder} has no memory and pids controllers ({' '.join(controllers)})"
            )
        _enable(folder)
        return _make_tree(2, folder, folder)
    except (CgroupUnavailableError, OSError) as exc:
        reasons.append(str(exc))
    raise CgroupUnavailableError("; ".join(reasons))
