"""The code interpreter worker's in-process guard: an audit hook (PEP 578).

Standard library only; the worker loads it from beside itself. In the weak sandbox modes the
kernel (Landlock, seccomp) is what holds; this hook runs first and turns what the kernel
would refuse into a clear `PermissionError` ("... is not allowed in this sandbox"). Where the
kernel offers neither, `strict` makes the hook the only line: it then also refuses reads
outside the allowed paths, `dir_fd` pointing outside the work directory, and native calls
through `ctypes`. An audit hook is Python-level: native code that got past it (memory
written through an object it did not see) would not be stopped, which the sandbox module's
docstring says.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["make_guard", "refuse_dir_fd_opens"]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# Audit events that change the file system: (path argument, its dir_fd argument) pairs.
_PATH_EVENTS: dict[str, tuple[tuple[int, int | None], ...]] = {
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.rename": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
    "os.link": ((0, 2), (1, 3)),
    "os.truncate": ((0, None),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.utime": ((0, 3),),
    "os.mkfifo": ((0, 2),),
    "os.mknod": ((0, 3),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),),
}
_READ_EVENTS: dict[str, int] = {"os.listdir": 0, "os.scandir": 0, "sqlite3.connect": 0}
_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
    }
)
_NETWORK_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
# Loading a library, finding a symbol, reading memory at an address: how ctypes reaches
# native code (`libc.system`, `libc.fork`) that raises no audit event of its own.
_CTYPES_EVENTS = frozenset(
    {
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.PyObj_FromPtr",
    }
)


def _refuse(what: str) -> PermissionError:
    return PermissionError(errno.EPERM, f"{what} is not allowed in this sandbox")


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _resolve(path: Any, dir_fd: Any) -> str | None:
    """The real path an os call would touch; None when it cannot be known."""
    if isinstance(path, int):
        return _fd_path(path)
    text = os.fsdecode(path)
    if dir_fd not in (None, -1) and not os.path.isabs(text):  # events pass -1 for none
        base = _fd_path(int(dir_fd))
        if base is None:
            return None
        text = os.path.join(base, text)
    return os.path.realpath(text)


def _under(resolved: str | None, roots: Iterable[str]) -> bool:
    if resolved is None:
        return False
    return any(resolved == root or resolved.startswith(root.rstrip("/") + "/") for root in roots)


def _writes(args: tuple[Any, ...]) -> bool:
    _path, mode, flags = args
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


class _Guard:
    """The hook's state: the work directory, what may be read, and what is checked."""

    def __init__(self, root: str, readable: Iterable[str], checks: dict[str, bool]) -> None:
        self.root = os.path.realpath(root)
        self.readable = [self.root, *(os.path.realpath(path) for path in readable)]
        self.checks = checks
        self.strict = bool(checks.get("strict"))

    def files(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path = args[0]
            if _writes(args):
                # An open descriptor was checked when it was opened.
                if not isinstance(path, int) and not _under(_resolve(path, None), [self.root]):
                    raise _refuse(f"writing {path!r} (outside the work directory)")
            elif (
                self.strict
                and not isinstance(path, int)
                and not _under(_resolve(path, None), self.readable)
            ):
                raise _refuse(f"reading {path!r}")
            return
        for position, fd_position in _PATH_EVENTS.get(event, ()):
            dir_fd = args[fd_position] if fd_position is not None else None
            if isinstance(args[position], int):
                continue  # an open descriptor: checked when it was opened
            if not _under(_resolve(args[position], dir_fd), [self.root]):
                raise _refuse(f"{event} outside the work directory")
        read_at = _READ_EVENTS.get(event)
        if self.strict and read_at is not None:
            target = args[read_at]
            if target == ":memory:":
                return
            if not _under(_resolve(target, None), self.readable):
                raise _refuse(f"reading {target!r}")

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.checks.get("writes"):
            self.files(event, args)
        if self.checks.get("processes"):
            if event in _PROCESS_EVENTS:
                raise _refuse("starting a process")
            if event in {"os.kill", "os.killpg"} and args[0] != os.getpid():
                raise _refuse("signalling another process")
        if self.checks.get("network") and event in _NETWORK_EVENTS:
            raise _refuse("network access")
        if self.strict:
            if event in _CTYPES_EVENTS:
                raise _refuse("native code through ctypes")
            if event == "import" and args[0] == "_posixsubprocess":
                raise _refuse("starting a process")


def make_guard(
    root: str, readable: Iterable[str], checks: dict[str, bool]
) -> Callable[[str, tuple[Any, ...]], None]:
    """The audit hook for a work directory; `checks` names what it refuses (see module)."""
    return _Guard(root, readable, checks)


def refuse_dir_fd_opens(root: str) -> None:
    """Make `os.open` refuse a `dir_fd` outside the work directory (strict mode).

    The `open` audit event does not carry `dir_fd`, so the hook alone cannot tell where a
    relative path opened through one lands. `_posixsubprocess.fork_exec` raises no event:
    it is replaced too (`subprocess.Popen` raises one first).
    """
    real_root = os.path.realpath(root)
    real_open = os.open

    def guarded_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if dir_fd not in (None, -1) and not _under(_resolve(path, dir_fd), [real_root]):
            raise _refuse("opening through a dir_fd outside the work directory")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    os.open = guarded_open
    posix = sys.modules.get("posix")
    if posix is not None:
        setattr(posix, "open", guarded_open)  # noqa: B010  (typeshed has no `posix.open`)
    import _posixsubprocess  # noqa: PLC0415  (imported here, before the hook refuses it)

    def no_fork_exec(*args: Any) -> int:
        raise _refuse("starting a process")

    setattr(_posixsubprocess, "fork_exec", no_fork_exec)  # noqa: B010  (a typed signature)
