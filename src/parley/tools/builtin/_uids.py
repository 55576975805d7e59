"""A uid of its own for each code-interpreter session, when parley runs as root.

With one uid for every worker, the kernel lets one session's process signal, renice or change
the limits of another's (they are the same user's), and `RLIMIT_NPROC` counts every
session's processes together. With a uid per session, another session's processes are not
its to touch, its files are its own, and `RLIMIT_NPROC` caps that session alone.

The uids come from a range far from real users (`UidRange`; by default 2,000,000,000 and up,
above the container ranges systemd hands out and below its "foreign" range). A session's
uid is recorded as its directory's owner: the next worker of the session (after a restart,
or in the next parley process) takes the same one, and its files stay its own. A directory
no uid of the range owns yet gets one derived from the session's key.

Two live sessions never share a uid: a uid is held while its session is live, in a table of
this process and by an `flock` on a file of `lock_dir` (for other parley processes of the
machine), and a uid some process already runs as is passed over. A session whose uid is
taken gets the next free one, and its files are given to that uid when its worker starts
(`_hostfs.prepare_work_dir`: walked without following links, only what the old uid or root
owned). A lock file lives as long as its uid is held: it is removed on release.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from parley.tools.builtin._usage import user_tasks

__all__ = ["DEFAULT_LOCK_DIR", "UidLease", "UidPool", "UidRange", "UidsExhaustedError"]

logger = logging.getLogger("parley.tools")

DEFAULT_LOCK_DIR = Path("/run/parley/sandbox-uids")
"""Where the lock files of held uids live (made, mode 0700, by the first parley as root)."""
_TRIES = 256  # uids tried after the preferred one before giving up

_held: dict[int, str] = {}  # uid -> session key, for every pool of this process
_held_lock = threading.Lock()


@dataclass(frozen=True)
class UidRange:
    """The uids sessions may run as: `count` of them from `first` on (gid = uid).

    Raises:
        ValueError: The range is empty, starts at a uid real users have (below 65536) or
            passes the largest 32-bit uid.
    """

    first: int = 2_000_000_000
    count: int = 100_000_000

    def __post_init__(self) -> None:
        if self.count < 1 or self.first < 65_536 or self.first + self.count > 4_294_967_294:
            raise ValueError(
                f"session uids {self.first}+{self.count}: choose a range from 65536 up that "
                "ends below 4294967294 and holds at least one uid"
            )

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.first <= uid < self.first + self.count

    def preferred(self, key: str) -> int:
        """The uid a session key starts from (stable: the same in every process)."""
        digest = hashlib.sha256(key.encode()).digest()
        return self.first + int.from_bytes(digest[:8], "big") % self.count

    def after(self, uid: int, step: int) -> int:
        """The uid `step` places after `uid`, wrapping around the range."""
        return self.first + (uid - self.first + step) % self.count


class UidsExhaustedError(Exception):
    """No uid of the range is free for a new session; `reason` says so for the model."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class UidLease:
    """A uid held for one live session; `release()` frees it (idempotent)."""

    def __init__(self, uid: int, lock: tuple[Path, int] | None) -> None:
        self.uid = uid
        self._lock = lock

    def release(self) -> None:
        """Let another session have the uid (its lock file is removed)."""
        with _held_lock:
            _held.pop(self.uid, None)
            lock, self._lock = self._lock, None
        if lock is not None:
            _unlock(*lock)


def _lock(path: Path) -> int | None:
    """An exclusive `flock` on the file `path` (made if missing); None if another holds it.

    A holder removes the file before it lets go (`_unlock`): a descriptor opened before
    that names a file no longer there, so the lock is taken only on the file `path` names.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, named = os.fstat(fd), os.stat(path, follow_symlinks=False)
            if (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino):
                return fd
        except (BlockingIOError, FileNotFoundError):
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    return None


def _unlock(path: Path, fd: int) -> None:
    """Remove the lock file, then let go of its lock."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.close(fd)


def _remove_stale(lock_dir: Path) -> None:
    """Remove the lock files no process holds (left by a parley that was killed)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(lock_dir):
            if entry.name.isdigit() and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    fd = _lock(Path(entry.path))
                    if fd is not None:
                        _unlock(Path(entry.path), fd)


def _usable_lock_dir(path: Path) -> Path | None:
    """`path` made if missing, if it is a directory only this user may change."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        logger.warning("code_interpreter: no lock directory for session uids (%s)", exc)
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        logger.warning(
            "code_interpreter: %s is not a private directory of this user; session uids "
            "are held only within this process",
            path,
        )
        return None
    return path


class UidPool:
    """Hands out session uids from a range (see the module docstring).

    Args:
        uids: The range.
        lock_dir: Where uids are locked against other parley processes (None: this process
            only).
    """

    def __init__(self, uids: UidRange, lock_dir: Path | None = DEFAULT_LOCK_DIR) -> None:
        self.uids = uids
        self._lock_dir = _usable_lock_dir(lock_dir) if lock_dir is not None else None
        if self._lock_dir is not None:
            _remove_stale(self._lock_dir)

    def _take(self, uid: int, key: str) -> UidLease | None:
        with _held_lock:
            if uid in _held:
                return None
            _held[uid] = key
        lease = UidLease(uid, None)
        try:
            if self._lock_dir is not None:
                path = self._lock_dir / str(uid)
                fd = _lock(path)
                if fd is None:  # another parley process holds it
                    raise BlockingIOError
                lease = UidLease(uid, (path, fd))
            if user_tasks(uid):
                logger.warning("code_interpreter: uid %d already runs processes; skipped", uid)
                raise BlockingIOError
        except OSError:
            lease.release()
            return None
        return lease

    def acquire(self, key: str, work_dir: Path) -> UidLease:
        """A uid for the session of `key` (its worker's start gives it the directory).

        Raises:
            UidsExhaustedError: Every uid tried is held by a live session or in use.
        """
        owner = work_dir.lstat().st_uid
        start = owner if owner in self.uids else self.uids.preferred(key)
        for step in range(min(_TRIES, self.uids.count)):
            lease = self._take(self.uids.after(start, step), key)
            if lease is None:
                continue
            if owner in self.uids and owner != lease.uid:  # its files move with it
                logger.info(
                    "code_interpreter: uid %d of %s is taken; it runs as %d", owner, key, lease.uid
                )
            return lease
        last = self.uids.first + self.uids.count - 1
        raise UidsExhaustedError(
            f"no uid is free for this conversation's interpreter (uids {self.uids.first} to "
            f"{last} are held by live sessions or used by processes); try again when a session "
            "has ended"
        )
