"""`storage`: key-value text files in a directory, as Qwen-Agent's `Storage` tool.

A key is a path-like name (`notes/today`); each value is one UTF-8 file under the root. Keys
are checked before any file is touched: `..`, NUL bytes and anything that resolves outside
the root (through a symbolic link, say) are refused, so no key reaches another file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from parley.errors import ToolArgumentsError, ToolExecutionError
from parley.tools.base import Tool
from parley.tools.builtin._common import default_work_dir
from parley.tools.registry import register_tool

__all__ = ["KeyNotExistsError", "Storage"]

_OPERATIONS = ("put", "get", "delete", "scan", "list")


class KeyNotExistsError(ToolExecutionError):
    """No value is stored under the key (Qwen-Agent's name)."""


@register_tool("storage")
class Storage(Tool):
    """Stores and reads text values by key, one file per key, under a root directory.

    Args:
        cfg: `storage_root_path` (Qwen-Agent's key) or `work_dir`: the root directory
            (default `<workspace>/tools/storage`); `max_value_bytes` (default 10 MiB).
    """

    description = (
        "Stores and reads text by key. operate is one of put (store value under key), get "
        "(read the value of key), delete (remove key), list (the keys under a folder key) "
        "and scan (the keys and values under a folder key). Keys look like file paths, "
        "such as notes/2024/summary; / is the top."
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
        root = self.cfg.get("storage_root_path") or self.cfg.get("work_dir")
        self.root = Path(root) if root else default_work_dir(self.name)
        self.max_value_bytes = int(self.cfg.get("max_value_bytes", 10 * 1024 * 1024))

    # -- keys ---------------------------------------------------------------------------------

    def _parts(self, key: str) -> list[str]:
        if "\x00" in key:
            raise ToolArgumentsError("a key cannot contain NUL bytes", tool_name=self.name)
        parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ToolArgumentsError(f"a key cannot contain '..': {key!r}", tool_name=self.name)
        return parts

    def path(self, key: str) -> Path:
        """The file (or folder) a key names, checked to lie inside the root.

        Raises:
            ToolArgumentsError: The key would reach outside the root.
        """
        root = self.root.resolve()
        target = root.joinpath(*self._parts(key))
        if target.resolve() != root and not target.resolve().is_relative_to(root):
            raise ToolArgumentsError(
                f"the key {key!r} leads outside the storage", tool_name=self.name
            )
        return target

    def _file(self, key: str) -> Path:
        if not self._parts(key):
            raise ToolArgumentsError("the key is empty", tool_name=self.name)
        return self.path(key)

    @staticmethod
    def _key(path: Path, root: Path) -> str:
        return "/" + path.relative_to(root).as_posix()

    # -- operations ---------------------------------------------------------------------------

    def put(self, key: str, value: str) -> str:
        """Store `value` under `key` (replacing it atomically)."""
        if len(value.encode()) > self.max_value_bytes:
            raise ToolArgumentsError(
                f"the value is larger than {self.max_value_bytes} bytes", tool_name=self.name
            )
        target = self._file(key)
        if target.is_dir():
            raise ToolExecutionError(f"{key!r} is a folder of keys", tool_name=self.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.path(key)  # the folders just made may not be links out of the root
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=".put-")
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(value)
        Path(temporary).replace(target)
        return "SUCCESS"

    def get(self, key: str) -> str:
        """The value stored under `key`.

        Raises:
            KeyNotExistsError: Nothing is stored there.
        """
        target = self._file(key)
        if not target.is_file():
            raise KeyNotExistsError(f"no value is stored under {key!r}", tool_name=self.name)
        return target.read_text(encoding="utf-8")

    def delete(self, key: str) -> str:
        """Remove the value under `key`.

        Raises:
            KeyNotExistsError: Nothing is stored there.
        """
        target = self._file(key)
        if not target.is_file():
            raise KeyNotExistsError(f"no value is stored under {key!r}", tool_name=self.name)
        target.unlink()
        return f"Deleted {key}"

    def keys(self, prefix: str = "/") -> list[str]:
        """The keys under a folder key, sorted."""
        folder = self.path(prefix)
        if not folder.is_dir():
            return []
        root = self.root.resolve()
        found = (p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".put-"))
        return sorted(self._key(p, root) for p in found)

    def scan(self, prefix: str = "/") -> str:
        """Every key under a folder key with its value, one `key: value` per line."""
        return "\n".join(f"{key}: {self.get(key)}" for key in self.keys(prefix))

    def call(self, params: str | dict[str, Any], **kwargs: Any) -> str:
        """Run one operation (Qwen-Agent's `operate`, `key`, `value`)."""
        arguments = self._verify_json_format_args(params)
        operate = arguments["operate"]
        key = str(arguments.get("key") or "/")
        if operate == "put":
            if "value" not in arguments:
                raise ToolArgumentsError("put needs a value", tool_name=self.name)
            return self.put(key, str(arguments["value"]))
        if operate == "get":
            return self.get(key)
        if operate == "delete":
            return self.delete(key)
        if operate == "list":
            return "\n".join(self.keys(key)) or f"No keys under {key}"
        return self.scan(key) or f"No keys under {key}"
