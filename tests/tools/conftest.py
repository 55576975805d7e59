"""Fixtures of the code interpreter's tests: each sandbox mode, an interpreter running in it.

A test that asks for `ci` runs once per mode (`[bwrap]`, `[unshare]`, `[rlimits]`); a module
that needs more of a mode (Landlock and seccomp too) or of its interpreter (file roots)
overrides `mode` or `ci`, and the other follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.tools.builtin import CodeInterpreter
from parley.tools.builtin.sandbox import SandboxMode
from tests.tools._sandbox_modes import ALL_MODES, make, require_mode


@pytest.fixture(params=ALL_MODES)
def mode(request: pytest.FixtureRequest) -> SandboxMode:
    """Each sandbox mode in turn (one this machine cannot run: see `require_mode`)."""
    return require_mode(request.param)


@pytest.fixture
def ci(mode: SandboxMode, tmp_path: Path) -> Iterator[CodeInterpreter]:
    """An interpreter in `mode` whose workspace is `tmp_path / "ws"`, closed after the test."""
    with make(mode, tmp_path / "ws") as interpreter:
        yield interpreter
