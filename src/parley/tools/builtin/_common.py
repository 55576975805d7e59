"""Helpers the built-in tools share: optional imports, the workspace, session keys."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parley.errors import MissingDependencyError

__all__ = ["SESSION_KEYS", "default_work_dir", "optional_import", "session_key", "slug"]

SESSION_KEYS = ("session", "session_id", "thread_id", "conversation_id")
"""Keyword arguments of a tool call that name the conversation, in the order they are read."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def optional_import(module: str, package: str | None = None) -> Any:
    """Import a module of the `tools` extra, or say how to install it.

    The module is typed `Any` on purpose: the checks do not depend on which extras are
    installed.

    Raises:
        MissingDependencyError: The module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package or module, "tools") from None


def default_work_dir(tool_name: str) -> Path:
    """Where a tool keeps its files by default, as Qwen-Agent lays it out.

    That is `<workspace>/tools/<name>`, the workspace being `$PARLEY_WORKSPACE` or
    `./workspace`.
    """
    return Path(os.environ.get("PARLEY_WORKSPACE", "workspace")) / "tools" / tool_name


def session_key(kwargs: Mapping[str, Any], default: str = "default") -> str:
    """The conversation a call belongs to, from the call's context."""
    for key in SESSION_KEYS:
        value = kwargs.get(key)
        if value is not None and str(value):
            return str(value)
    return default


def slug(key: str) -> str:
    """A directory name for any key: readable where it can be, unique always."""
    readable = _UNSAFE.sub("_", key).strip("._")[:48] or "session"
    if readable == key:
        return key
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
