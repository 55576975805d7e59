"""`storage`: key-value text files, as Qwen-Agent's `Storage` tool.

A key is a path-like name (`notes/today`); each value is one UTF-8 file. By default the files
live in the conversation's folder of the workspace, under `storage/`
(`Workspace.for_context(ctx) / "storage"`): each user's thread has keys of its own, which its
code interpreter and `doc_parser` see as files. `storage_root_path` (Qwen-Agent's key) or
`root` name one fixed folder instead, shared by every conversation.

No key reaches another file: `..` and NUL bytes are refused, a key whose path resolves outside
the folder (through a symbolic link) is refused, and files are opened one component at a time
from the folder's descriptor without following links (`_paths`), so a link swapped in after
the check is refused too. In the workspace the walk starts at the conversation's folder, so a
link put in place of `storage` itself (the code interpreter's code can write there) is
refused as well. A value is replaced atomically (written aside, then renamed). Errors name
the folder as "this conversation's storage" and keys as given, never a path on the server.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from parley.errors import ToolArgumentsError, ToolExecutionError
from parley.tools.base import Tool
from parley.tools.builtin._common import run_context, workspace_from
from parley.tools.builtin._paths import (
    Located,
    NotAFileError,
    open_beneath,
    open_folder_beneath,
    real_path,
    replacing,
)
from parley.tools.context import RunContext
from parley.tools.registry import register_tool

__all__ = ["KeyNotExistsError", "Storage"]

_OPERATIONS = ("put", "get", "delete", "scan", "list")
_FOLDER = "storage"  # in the conversation's folder
_PENDING = ".put-"  # the prefix of a value being written

Context = RunContext[Any] | None


class KeyNotExistsError(ToolExecutionError):
    """No value is stored under the key (Qwen-Agent's name)."""


@register_tool("storage")
class Storage(Tool):
    """Stores and reads text values by key, one file per key, in the conversation's folder.

    Every operation takes the conversation as `ctx` (the agent's `RunContext`; None is the
    `default` conversation).

    Args:
        cfg: `storage_root_path` (Qwen-Agent's key) or `root`: one folder for every
            conversation; without them, `<conversation folder>/storage` in the workspace at
            `work_dir` (default: the process's workspace). `max_value_bytes` (default 10 MiB).

    Attributes:
        root: The one folder of every conversation, when configured (else None).
    """

    description = (
        "Stores and reads text by key. operate is one of put (store value under key), get "
        "(read the value of key), delete (remove key), list (the keys under a folder key) "
        "and scan (the keys and values under a folder key). Keys look like file paths, "
        "such as notes/2024/summary; / is the top. Each conversation has its own keys."
    )
    parameters: ClassVar[list[dict[str, Any]] | dict[str, Any]] = {
        "type": "object",
        "properties": {
            "operate": {"type": "string", "enum": list(_OPERATIONS)},
            "key": {"type": "string", "description": "The key (a path); / is the top."},
            "value": {"type": "string", "description": "The text to store (for put)."},
        },
        "required": ["operate"],
    }

    def __init__(self, cfg: dict[str, Any] | None = None) -> None:
        super().__init__(cfg)
        root = self.cfg.get("storage_root_path") or self.cfg.get("root")
        self.root: Path | None = Path(root) if root else None
        self.max_value_bytes = int(self.cfg.get("max_value_bytes", 10 * 1024 * 1024))

    # -- keys ---------------------------------------------------------------------------------

    def _where(self) -> str:
        """The keys' folder as errors name it: never by its place on the server."""
        if self.root is None:
            return "this conversation's storage"
        return f"the storage folder {self.root.name}"

    def _unusable(self, why: str) -> ToolExecutionError:
        return ToolExecutionError(f"cannot use {self._where()}: {why}", tool_name=self.name)

    def _home(self, ctx: Context) -> Located:
        """The keys' folder (made if missing), as a root and the parts to walk below it.

        In the workspace it is `storage` in the conversation's folder, which the code
        interpreter's code can write: it is made and opened beneath that folder, never
        through a link put in its place (which would take the keys anywhere).
        """
        if self.root is not None:
            try:
                self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise self._unusable(str(exc.strerror)) from None
            return Located(real_path(self.root), ())
        try:
            conversation = workspace_from(self.cfg).for_context(ctx)
        except OSError as exc:
            raise self._unusable(str(exc.strerror)) from None
        home = Located(real_path(conversation), (_FOLDER,))
        try:
            with open_folder_beneath(home, shown=_FOLDER, tool_name=self.name, create=True):
                pass
        except ToolExecutionError:
            why = f"{_FOLDER!r} in its files is not a folder (a file or a link is there)"
            raise self._unusable(f"{why}; remove or rename it") from None
        return home

    def folder(self, ctx: Context = None) -> Path:
        """The folder of a conversation's keys (made if missing)."""
        return self._home(ctx).path

    def _parts(self, key: str) -> list[str]:
        if "\x00" in key:
            raise ToolArgumentsError("a key cannot contain NUL bytes", tool_name=self.name)
        parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ToolArgumentsError(f"a key cannot contain '..': {key!r}", tool_name=self.name)
        return parts

    def _locate(self, key: str, ctx: Context) -> tuple[Located, tuple[str, ...]]:
        """Where a key's file is (walked from the root without links), and the key's parts."""
        home = self._home(ctx)
        top = home.path
        real = real_path(top.joinpath(*self._parts(key)))
        if not real.is_relative_to(top):
            raise ToolArgumentsError(
                f"the key {key!r} leads outside the storage", tool_name=self.name
            )
        parts = real.relative_to(top).parts
        return Located(home.root, (*home.parts, *parts)), parts

    def _value(self, key: str, ctx: Context) -> Located:
        located, parts = self._locate(key, ctx)
        if not parts:
            raise ToolArgumentsError("the key is empty", tool_name=self.name)
        return located

    def path(self, key: str, ctx: Context = None) -> Path:
        """The file (or folder) a key names, checked to lie inside the conversation's folder.

        Raises:
            ToolArgumentsError: The key would reach outside the folder.
        """
        return self._locate(key, ctx)[0].path

    def _missing(self, key: str) -> KeyNotExistsError:
        return KeyNotExistsError(f"no value is stored under {key!r}", tool_name=self.name)

    # -- operations ---------------------------------------------------------------------------

    def put(self, key: str, value: str, *, ctx: Context = None) -> str:
        """Store `value` under `key` (replacing it atomically)."""
        if len(value.encode()) > self.max_value_bytes:
            raise ToolArgumentsError(
                f"the value is larger than {self.max_value_bytes} bytes", tool_name=self.name
            )
        located = self._value(key, ctx)
        parent = Located(located.root, located.parts[:-1])
        name = located.parts[-1]
        with open_folder_beneath(parent, shown=key, tool_name=self.name, create=True) as folder:
            with suppress(FileNotFoundError):
                if stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                    raise ToolExecutionError(f"{key!r} is a folder of keys", tool_name=self.name)
            with (
                replacing(folder, name, _PENDING) as descriptor,
                os.fdopen(descriptor, "w", encoding="utf-8", closefd=False) as out,
            ):
                out.write(value)
        return "SUCCESS"

    def get(self, key: str, *, ctx: Context = None) -> str:
        """The value stored under `key`.

        Raises:
            KeyNotExistsError: Nothing is stored there.
        """
        located = self._value(key, ctx)
        try:
            descriptor = open_beneath(located, shown=key, tool_name=self.name)
        except NotAFileError:
            raise self._missing(key) from None
        with os.fdopen(descriptor, "r", encoding="utf-8") as stream:
            return stream.read()

    def delete(self, key: str, *, ctx: Context = None) -> str:
        """Remove the value under `key`.

        Raises:
            KeyNotExistsError: Nothing is stored there.
        """
        located = self._value(key, ctx)
        parent = Located(located.root, located.parts[:-1])
        name = located.parts[-1]
        try:
            with open_folder_beneath(parent, shown=key, tool_name=self.name) as folder:
                found = os.stat(name, dir_fd=folder, follow_symlinks=False)
                if not stat.S_ISREG(found.st_mode):
                    raise self._missing(key)
                os.unlink(name, dir_fd=folder)
        except (NotAFileError, FileNotFoundError):
            raise self._missing(key) from None
        return f"Deleted {key}"

    def keys(self, prefix: str = "/", *, ctx: Context = None) -> list[str]:
        """The keys under a folder key, sorted."""
        located, parts = self._locate(prefix, ctx)
        found: list[str] = []
        try:
            with open_folder_beneath(located, shown=prefix, tool_name=self.name) as folder:
                # fwalk with dir_fd: no link is followed, nothing outside the folder is listed.
                for where, _folders, files, where_fd in os.fwalk(".", dir_fd=folder):
                    for name in files:
                        mode = os.stat(name, dir_fd=where_fd, follow_symlinks=False).st_mode
                        if stat.S_ISREG(mode) and not name.startswith(_PENDING):
                            found.append("/" + str(PurePosixPath(*parts, where, name)))
        except NotAFileError:
            return []
        return sorted(found)

    def scan(self, prefix: str = "/", *, ctx: Context = None) -> str:
        """Every key under a folder key with its value, one `key: value` per line."""
        keys = self.keys(prefix, ctx=ctx)
        return "\n".join(f"{key}: {self.get(key, ctx=ctx)}" for key in keys)

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """Run one operation (Qwen-Agent's `operate`, `key`, `value`) in the call's conversation.

        The conversation is the agent's `ctx` (or a Qwen-Agent style `session` keyword).
        """
        arguments = self._verify_json_format_args(params)
        ctx = run_context(kwargs)
        operate = arguments["operate"]
        key = str(arguments.get("key") or "/")
        if operate == "put":
            if "value" not in arguments:
                raise ToolArgumentsError("put needs a value", tool_name=self.name)
            return self.put(key, str(arguments["value"]), ctx=ctx)
        if operate == "get":
            return self.get(key, ctx=ctx)
        if operate == "delete":
            return self.delete(key, ctx=ctx)
        if operate == "list":
            return "\n".join(self.keys(key, ctx=ctx)) or f"No keys under {key}"
        return self.scan(key, ctx=ctx) or f"No keys under {key}"
