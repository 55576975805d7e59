"""Running the `parley` command in a process of its own, the way the CLI tests all do."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

OFFLINE = {"HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
"""No network: a hub download through a proxy that points nowhere fails loudly."""


def keyless_env(**extra: str) -> dict[str, str]:
    """This process's environment without any `*_API_KEY`, offline (`OFFLINE`), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, **OFFLINE, **extra}


def run_parley(
    *args: str, env: Mapping[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m parley ARGS` with exactly `env`, in `cwd`; its outcome (it may fail), as text."""
    return subprocess.run(
        [sys.executable, "-m", "parley", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env),
        cwd=cwd,
        check=False,
    )
