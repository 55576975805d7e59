"""`Workspace`: one directory per conversation, shared by the tools of that conversation.

The code interpreter runs in its session's directory, `storage` keeps its values there and
`doc_parser` reads files from there, so a file one tool wrote in a thread is what another
reads in the same thread, and nothing of another user's thread is in reach. A session's
directory is `<root>/<user>/<thread>`, each part a name no other id maps to (`dir_name`): a
plain id (letters, digits, `_`, `.`, `-`, up to 48 characters, not starting or ending with `.`
or `_`) is its own name; any other id is a readable part, `+` and a hash of the whole id, and
no plain id holds a `+`. (Before, such ids were named `<readable>-<12 hex digits>`, which is
also a plain id's name: those directories are not looked for any more; move one to its new
name by hand to keep its files.)

The code interpreter's sandboxed code writes inside its session's directory, so parley never
follows a link there: the directory is removed with `shutil.rmtree`'s descriptor-based walk,
which removes links and never what they point to.

The process-wide default root is `$PARLEY_WORKSPACE` when set; otherwise a private temporary
directory (mode 0700) made on first use and removed when the process exits.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path

from parley.tools.context import LOCAL_USER, RunContext

__all__ = ["Workspace", "default_workspace", "dir_name"]


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def dir_name(key: str) -> str:
    """A directory name for any id: the id itself when plain, else readable and unique.

    Plain ids (see the module) keep their name, so existing directories are found again;
    any other id gets `<readable>+<hash>`, which no plain id can equal (it holds a `+`) and
    no other id reaches short of a collision of 128 bits of SHA-256.
    """
    readable = _UNSAFE.sub("_", key).strip("._")[:48]
    if readable and readable == key:
        return key
    return f"{readable or 'id'}+{hashlib.sha256(key.encode()).hexdigest()[:32]}"


class Workspace:
    """Per-conversation directories under one root.

    Args:
        root: The directory holding every session's directory (made if missing).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()

    def session_dir(self, user_id: str | None, thread_id: str, *, create: bool = True) -> Path:
        """The directory of one user's thread (made, private, unless `create` is False)."""
        path = self.root / dir_name(user_id or LOCAL_USER) / dir_name(thread_id)
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def for_context(self, ctx: RunContext[object] | None, *, create: bool = True) -> Path:
        """The directory of the conversation a tool call belongs to (`default` without one)."""
        if ctx is None:
            return self.session_dir(None, "default", create=create)
        return self.session_dir(ctx.user_id, ctx.thread_id, create=create)

    def remove(self, user_id: str | None, thread_id: str) -> None:
        """Delete a thread's directory and everything in it (no error if absent)."""
        shutil.rmtree(self.session_dir(user_id, thread_id, create=False), ignore_errors=True)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


_default: Workspace | None = None
_default_lock = threading.Lock()


def default_workspace() -> Workspace:
    """The process-wide workspace: `$PARLEY_WORKSPACE`, or a private temporary directory."""
    global _default  # noqa: PLW0603  (one per process, made on first use)
    with _default_lock:
        if _default is None:
            configured = os.environ.get("PARLEY_WORKSPACE")
            if configured:
                _default = Workspace(configured)
            else:
                temporary = tempfile.mkdtemp(prefix="parley-workspace-")
                atexit.register(shutil.rmtree, temporary, ignore_errors=True)
                _default = Workspace(temporary)
        return _default
