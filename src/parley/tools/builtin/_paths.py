"""The directories a tool may touch, and opening files in them without leaving them.

A model names files; a file tool reads and writes only under its roots (by default the
conversation's directory of the workspace). `Roots.locate` resolves a name (relative to the
first root, absolute, or a `file://` URL) with every symbolic link followed, and refuses it
unless the result lies under a root, with an error naming the roots (as `shown` says them: a
tool names the conversation's folder "this conversation's files", not by its path).

A check on a path is worth nothing if the path changes before the file is opened (a link put in
place of a folder in between: time of check to time of use). So the file is not opened by its
path: `open_beneath` starts from a descriptor of the root and opens one component at a time
relative to the last (`dir_fd`), each with `O_NOFOLLOW`. The checked path holds no links any
more, so a link met on the way is one that appeared after the check, and the open fails
instead of following it. This is what Linux's `openat2(RESOLVE_BENEATH)` does, in portable
POSIX calls. The last component must be a regular file: devices, FIFOs (opened without
blocking) and sockets are refused. Links inside a root that point inside a root are fine.

A file is replaced the same way (`replacing`): written under a fresh name made with `O_CREAT |
O_EXCL | O_NOFOLLOW` in the folder's descriptor, then renamed over the old name, so a link
there is replaced, never followed, and a reader sees the old content or the whole new one.

What a path cannot show is not checked: a hard link made inside a root to a file elsewhere
reads as that file. Making one takes a process that can already reach the file (the code
interpreter's sandbox decides what its code reaches).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import unquote, urlsplit

from parley.errors import ConfigurationError, ToolArgumentsError, ToolExecutionError

__all__ = [
    "Located",
    "NotAFileError",
    "PathNotAllowedError",
    "Roots",
    "open_beneath",
    "open_folder_beneath",
    "real_path",
    "replacing",
]

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathNotAllowedError(ToolArgumentsError):
    """The path lies outside every directory the tool may touch."""


class NotAFileError(ToolExecutionError):
    """Nothing is there, or not what was asked for (a folder, a device, a pipe)."""


def real_path(path: str | os.PathLike[str]) -> Path:
    """The absolute path with every symbolic link followed (the seam a race test replaces)."""
    return Path(os.path.realpath(path))


@dataclass(frozen=True)
class Located:
    """A checked path: the root it lies under and its components below that root."""

    root: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The full path."""
        return self.root.joinpath(*self.parts)


class Roots:
    """The directories a tool may read and write; relative names start at the first.

    Args:
        directories: The roots (made absolute, links followed, once here).
        tool_name: The tool, for its error messages.
        shown: What the tool may use, as its errors say it to a model or a client ("this
            conversation's files"): a server's folders are not theirs to know. None: "files
            under" the roots' paths, for a program that gave them.
    """

    def __init__(
        self,
        directories: Sequence[str | os.PathLike[str]],
        *,
        tool_name: str,
        shown: str | None = None,
    ) -> None:
        if not directories:
            raise ConfigurationError(f"{tool_name}: roots needs at least one directory")
        self.directories = tuple(real_path(d) for d in directories)
        self.tool_name = tool_name
        self.shown = shown

    @property
    def base(self) -> Path:
        """Where relative names start."""
        return self.directories[0]

    def describe(self) -> str:
        """What the tool may use, as an error message says it."""
        if self.shown is not None:
            return self.shown
        return "files under " + " or ".join(str(d) for d in self.directories)

    def _refusal(self, name: str, why: str) -> PathNotAllowedError:
        start = "there" if len(self.directories) == 1 else "in the first"
        return PathNotAllowedError(
            f"{name!r} {why}; {self.tool_name} may only use {self.describe()} "
            f"(a relative path starts {start})",
            tool_name=self.tool_name,
        )

    def _path_of(self, name: str) -> Path:
        if name.lower().startswith("file:"):
            url = urlsplit(name)
            if url.netloc not in ("", "localhost"):
                raise self._refusal(name, f"is a file on another machine ({url.netloc})")
            name = unquote(url.path)
        if "\x00" in name:
            raise self._refusal(name, "contains a NUL byte")
        path = Path(name).expanduser()
        return path if path.is_absolute() else self.base / path

    def locate(self, name: str) -> Located:
        """The root and components of a file name, links followed.

        Raises:
            PathNotAllowedError: It resolves outside every root.
        """
        real = real_path(self._path_of(name))
        for root in self.directories:
            if real.is_relative_to(root):
                return Located(root, real.relative_to(root).parts)
        raise self._refusal(name, "is outside the allowed folders")


def _failed(exc: OSError, shown: str, tool_name: str) -> NoReturn:
    if exc.errno == errno.ENOENT:
        raise NotAFileError(f"no such file: {shown}", tool_name=tool_name) from exc
    if exc.errno == errno.ENOTDIR:
        message = f"no such file: {shown} (a part of it is a file, not a folder)"
        raise NotAFileError(message, tool_name=tool_name) from exc
    if exc.errno == errno.ELOOP:
        message = (
            f"{shown} changed while it was opened (a symbolic link appeared), so it was not used"
        )
    elif exc.errno == errno.EACCES:
        message = f"permission denied: {shown}"
    else:
        message = f"cannot open {shown}: {exc.strerror}"
    raise ToolExecutionError(message, tool_name=tool_name) from exc


def _open_step(part: str, flags: int, folder: int) -> int:
    """Open one component below `folder`, never through a link (ELOOP if it is one)."""
    try:
        return os.open(part, flags, dir_fd=folder)
    except OSError as exc:
        # With O_DIRECTORY, Linux reports a link as ENOTDIR: tell the two apart.
        if exc.errno == errno.ENOTDIR and _is_link(part, folder):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), part) from exc
        raise


def _is_link(part: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _descend(root: Path, folders: Sequence[str], *, create: bool) -> int:
    """A descriptor of `root/folders...`, each step opened with `O_NOFOLLOW` (made if `create`)."""
    descriptor = os.open(root, _DIRECTORY)
    try:
        for part in folders:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=descriptor)
            child = _open_step(part, _DIRECTORY, descriptor)
            os.close(descriptor)
            descriptor = child
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


@contextmanager
def open_folder_beneath(
    located: Located, *, shown: str, tool_name: str, create: bool = False
) -> Iterator[int]:
    """A descriptor of the folder `located` names, opened component by component (see above).

    Raises:
        ToolExecutionError: A component is missing (unless `create`), not a folder, or a link.
    """
    try:
        descriptor = _descend(located.root, located.parts, create=create)
    except OSError as exc:
        _failed(exc, shown, tool_name)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def open_beneath(located: Located, *, shown: str, tool_name: str) -> int:
    """A read-only descriptor of the regular file `located` names (see the module docstring).

    Raises:
        ToolExecutionError: It is missing, a link, not a regular file, or unreadable.
    """
    if not located.parts:
        raise NotAFileError(f"{shown} is a folder, not a file", tool_name=tool_name)
    *folders, name = located.parts
    try:
        parent = _descend(located.root, folders, create=False)
        try:
            descriptor = _open_step(name, _FILE, parent)
        finally:
            os.close(parent)
    except OSError as exc:
        _failed(exc, shown, tool_name)
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, pipe or socket"
        raise NotAFileError(f"{shown} is {kind}, not a regular file", tool_name=tool_name)
    os.set_blocking(descriptor, True)
    return descriptor


@contextmanager
def replacing(folder: int, name: str, prefix: str) -> Iterator[int]:
    """A new file (mode 0600) to fill, renamed over `name` in `folder` when the block ends.

    The file is made in the folder's descriptor as `prefix` and a random suffix (readers of
    the folder skip that prefix), and closed when the block ends. If the block or the rename
    fails, it is removed and `name` is left as it was.

    Raises:
        IsADirectoryError: `name` is a folder.
    """
    pending = f"{prefix}{secrets.token_hex(8)}"
    descriptor = os.open(pending, _NEW_FILE, 0o600, dir_fd=folder)
    try:
        try:
            yield descriptor
        finally:
            os.close(descriptor)
        os.replace(pending, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with suppress(OSError):
            os.unlink(pending, dir_fd=folder)
        raise
