"""Helpers the built-in tools share: optional imports, the workspace, the call's context."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from parley.errors import MissingDependencyError
from parley.tools.context import RunContext
from parley.tools.workspace import Workspace, default_workspace, dir_name

__all__ = [
    "SESSION_KEYS",
    "optional_import",
    "run_context",
    "session_key",
    "slug",
    "workspace_from",
]

SESSION_KEYS = ("session", "session_id", "thread_id", "conversation_id")
"""Keyword arguments of a tool call that name the conversation, in the order they are read."""


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


def workspace_from(cfg: Mapping[str, Any]) -> Workspace:
    """The workspace a tool's configuration names (`work_dir`), else the process's default."""
    work_dir = cfg.get("work_dir")
    return Workspace(work_dir) if work_dir else default_workspace()


def run_context(kwargs: Mapping[str, Any]) -> RunContext[Any]:
    """The context of a call: the agent's `ctx`, else one for the conversation `kwargs` name.

    Qwen-Agent style callers name it with one of `SESSION_KEYS`; without any, it is `default`.
    """
    ctx = kwargs.get("ctx")
    if isinstance(ctx, RunContext):
        return ctx
    return RunContext.detached(thread_id=session_key(kwargs))


def session_key(kwargs: Mapping[str, Any], default: str = "default") -> str:
    """The conversation a call belongs to, from the call's context."""
    for key in SESSION_KEYS:
        value = kwargs.get(key)
        if value is not None and str(value):
            return str(value)
    return default


def slug(key: str) -> str:
    """A directory name for any key: readable where it can be, unique always (`dir_name`)."""
    return dir_name(key)
