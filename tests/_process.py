"""Running Python code in a fresh interpreter: what a test that needs a clean process does.

A fresh process is the only place to see what an import loads, what happens at exit, or what a
kernel measure refuses once applied, without this test process's modules, loop or state.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_python(
    code: str,
    *options: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run `code` with this Python (`options` go before `-c`); it must exit 0; its output as text.

    Args:
        code: The program, given with `-c`.
        *options: The interpreter's options (`-I`, `-W always::ResourceWarning`, ...).
        env: Its whole environment (None: this process's).
        cwd: Its working folder (None: this process's).
        timeout: Seconds before it is killed and the test fails.
    """
    done = subprocess.run(
        [sys.executable, *options, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else dict(env),
        cwd=cwd,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done
