"""The one way a test asks for an optional part: skip on a developer's machine, fail under CI.

Every test that needs something the suite cannot assume (bubblewrap, user namespaces,
llama-cpp-python, the `mcp` SDK, tiktoken's encodings, PostgreSQL, Chromium, espeak-ng, ...)
goes through `unavailable` (or `require_module` and `require_program`, which call it). On a
developer's machine a missing part skips the test with a message naming it; under CI
(`CI=true`, which `.ci/run` exports itself) the same test FAILS: there a skip would pass for a
success.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

__all__ = ["SETUP_HINT", "in_ci", "require_module", "require_program", "unavailable"]

SETUP_HINT = "scripts/setup-system.sh installs it (as root; `make check` runs it)"


def in_ci() -> bool:
    """Whether this run is CI's (`CI=true`), where nothing may be skipped."""
    return os.environ.get("CI", "").lower() in {"true", "1"}


def unavailable(what: str, hint: str = SETUP_HINT) -> NoReturn:
    """Skip the test here, fail it under CI; the message names what is missing and the fix.

    Called at a module's top level, it skips (or fails) the whole module.
    """
    message = f"{what}; {hint}" if hint else what
    if in_ci():
        pytest.fail(f"{message} (CI=true, so this fails instead of skipping)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_module(name: str, extra: str) -> ModuleType:
    """Import `name`, or skip (fail under CI) saying which extra installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        unavailable(f"{name} is not importable ({exc})", f"`pip install parley[{extra}]`")


def require_program(name: str, package: str | None = None) -> str:
    """The path of the program `name` on PATH, or skip (fail under CI) naming its package.

    `package` is the Debian package that installs it (default: `name`), which
    scripts/setup-system.sh installs.
    """
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not on PATH (Debian package `{package or name}`)")
    return found
