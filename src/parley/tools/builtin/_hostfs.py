"""What parley itself does in a work directory the sandboxed code can write, link-safe.

Code in the sandbox may replace anything in its work directory with a symbolic link to a
place of the host (`.parley` -> `/etc`, `data.csv` -> the service's `.env`), then wait for
parley, which runs as root in containers, to touch it. So parley never opens, changes or
copies through a path there. It opens the work directory itself from its parent's
descriptor with `O_NOFOLLOW | O_DIRECTORY` (the parents are parley's own: the workspace
root and the user's folder, which the code cannot write), and everything below through
that descriptor: `fchown` on it, names looked at without following links, files made with
`O_CREAT | O_EXCL | O_NOFOLLOW` under a fresh name and renamed into place (a rename
replaces a link, never what it points to). The worker makes its scratch folder (`.parley`)
itself, after it has dropped root (see `_worker.py`).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from parley.tools.builtin._paths import replacing

__all__ = ["UnsafeWorkDirError", "copy_into", "open_work_dir", "prepare_work_dir"]

SCRATCH = ".parley"
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_COPYING = ".parley-copy-"  # the prefix of a file being copied in


class UnsafeWorkDirError(OSError):
    """The work directory is not a plain folder (a link, a file): it is not used."""


@contextmanager
def open_work_dir(work_dir: Path) -> Iterator[int]:
    """A descriptor of the work directory, opened from its parent's without following links.

    Raises:
        UnsafeWorkDirError: It is a link or not a folder.
        OSError: It or its parent cannot be opened.
    """
    parent = os.open(work_dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        descriptor = os.open(work_dir.name, _DIRECTORY, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeWorkDirError(
                exc.errno, f"{work_dir.name} is a link or a file, not a folder: it is not used"
            ) from exc
        raise
    finally:
        os.close(parent)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def prepare_work_dir(work_dir: Path, uid: int) -> None:
    """Give the work directory to the worker's user (`uid`), through descriptors only.

    When it was another's (root: a new directory, or files parley copied in before any
    worker ran; an earlier session uid that is now taken), what that owner or root owned
    beneath it goes to `uid` too (`_reown`). A scratch folder `.parley` that is not the
    user's (left by a version of parley that made it as root) is removed first by
    `shutil.rmtree`'s descriptor walk, which never follows a link; the worker makes a new
    one. Nothing else is changed.

    Raises:
        UnsafeWorkDirError: The work directory is a link or not a folder.
    """
    with open_work_dir(work_dir) as folder:
        if uid == os.getuid():
            return
        with suppress(FileNotFoundError):
            found = os.stat(SCRATCH, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISDIR(found.st_mode) and found.st_uid != uid:
                shutil.rmtree(SCRATCH, dir_fd=folder)
        owner = os.fstat(folder).st_uid
        if owner != uid:
            _reown(folder, owner, uid)


def _reown(folder: int, old: int, new: int) -> None:
    """Give the directory open as `folder`, and what `old` or root owns beneath it, to `new`.

    `os.fwalk` opens each folder beneath the one before without following links (and checks
    that what it opened is what it listed); each entry is changed with `fchownat` and
    AT_SYMLINK_NOFOLLOW, so a planted link is changed itself, never what it names. A file
    with other hard links may be another's (a root file linked in): only `old`'s are
    changed, and none of root's.
    """
    owners = {old, 0}
    os.fchown(folder, new, new)
    for _path, dirs, files, dir_fd in os.fwalk(".", follow_symlinks=False, dir_fd=folder):
        for name in (*dirs, *files):
            with suppress(FileNotFoundError):
                entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                shared = entry.st_nlink > 1 and not stat.S_ISDIR(entry.st_mode)
                if entry.st_uid in owners and not (shared and (old == 0 or entry.st_uid != old)):
                    os.chown(name, new, new, dir_fd=dir_fd, follow_symlinks=False)


def copy_into(work_dir: Path, name: str, source: int) -> None:
    """Copy the open file `source` into the work directory as `name` (replacing what is there).

    Written to a new file (`O_EXCL | O_NOFOLLOW`) owned by the work directory's owner (the
    session's uid, found by `fstat` of the directory's descriptor), with the source's
    permission bits and times, then renamed over `name`: a link at `name` is replaced, never
    followed.

    Raises:
        IsADirectoryError: A folder named `name` is in the work directory.
        UnsafeWorkDirError: The work directory is a link or not a folder.
    """
    info = os.fstat(source)
    with open_work_dir(work_dir) as folder:
        owner = os.fstat(folder)
        with replacing(folder, name, _COPYING) as target:
            _copy_bytes(source, target)
            if owner.st_uid != os.getuid():
                os.fchown(target, owner.st_uid, owner.st_gid)
            os.fchmod(target, (info.st_mode & 0o777) | 0o600)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_bytes(source: int, target: int) -> None:
    while chunk := os.read(source, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view) :]
