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
taken gets the next free one, and its files are given to that uid (walked without following
links, only what the old uid or root owned).
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

    def __init__(self, uid: int, lock_fd: int | None) -> None:
        self.uid = uid
        self._lock_fd = lock_fd

    def release(self) -> None:
        """Let another session have the uid."""
        with _held_lock:
            _held.pop(self.uid, None)
            fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # drops the flock


def _runs_as(uid: int) -> bool:
    """Whether any process of the machine has `uid` as a real, effective or saved uid."""
    wanted = str(uid)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as text:
                for line in text:
                    if line.startswith("Uid:"):
                        if wanted in line.split()[1:4]:
                            return True
                        break
        except OSError:
            continue
    return False


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


def _reown(work_dir: Path, old: int, new: int) -> None:
    """Give `work_dir` and what `old` (or root) owns beneath it to `new`, following no link.

    `os.fwalk` opens each folder beneath the one before without following links (and checks
    that what it opened is what it listed); each entry is changed with `fchownat` and
    AT_SYMLINK_NOFOLLOW, so a planted link is changed itself, never what it names.
    """
    owners = {old, 0}
    for _folder, dirs, files, folder_fd in os.fwalk(work_dir, follow_symlinks=False):
        info = os.fstat(folder_fd)
        if info.st_uid in owners:
            os.chown(folder_fd, new, new)
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                entry = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
                # A file with other links may be another's (a root file linked in): only the
                # old session uid's are changed.
                shared = entry.st_nlink > 1 and not stat.S_ISDIR(entry.st_mode)
                if entry.st_uid in owners and not (shared and (old == 0 or entry.st_uid != old)):
                    os.chown(name, new, new, dir_fd=folder_fd, follow_symlinks=False)


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

    def _take(self, uid: int, key: str) -> UidLease | None:
        with _held_lock:
            if uid in _held:
                return None
            _held[uid] = key
        fd = None
        try:
            if self._lock_dir is not None:
                flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(self._lock_dir / str(uid), flags, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _runs_as(uid):
                logger.warning("code_interpreter: uid %d already runs processes; skipped", uid)
                raise BlockingIOError
        except OSError:
            if fd is not None:
                os.close(fd)
            with _held_lock:
                _held.pop(uid, None)
            return None
        return UidLease(uid, fd)

    def acquire(self, key: str, work_dir: Path) -> UidLease:
        """A uid for the session of `key`, its directory given to it.

        Raises:
            UidsExhaustedError: Every uid tried is held by a live session or in use.
        """
        owner = work_dir.lstat().st_uid
        start = owner if owner in self.uids else self.uids.preferred(key)
        for step in range(min(_TRIES, self.uids.count)):
            lease = self._take(self.uids.after(start, step), key)
            if lease is None:
                continue
            if owner != lease.uid:
                if owner in self.uids:
                    logger.info(
                        "code_interpreter: uid %d of %s is taken; it runs as %d",
                        owner,
                        key,
                        lease.uid,
                    )
                _reown(work_dir, owner, lease.uid)
            return lease
        last = self.uids.first + self.uids.count - 1
        raise UidsExhaustedError(
            f"no uid is free for this conversation's interpreter (uids {self.uids.first} to "
            f"{last} are held by live sessions or used by processes); try again when a session "
            "has ended"
        )
