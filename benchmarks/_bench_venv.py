"""Throwaway virtualenvs for a benchmark's peer, made on first use under a cache folder.

A peer's packages (LangGraph's server, pgqueuer) must never reach parley's own environment,
so each peer gets a virtualenv of its own, with pinned versions, under
`$PARLEY_BENCH_CACHE` (default `~/.cache/parley-bench`). The folder's name carries a hash of
the pins: changing them makes a new one, and a stamp file written after a complete install
says it is ready (an interrupted install is redone). `uv` is used when it is found (env `UV`,
the project's `.tools/bin/uv`, or on `PATH`), else the standard library's `venv` and `pip`.
Imports only the standard library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = ".parley-bench-installed"


def cache_dir() -> Path:
    """Where the benchmarks keep their peers' virtualenvs."""
    given = os.environ.get("PARLEY_BENCH_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "parley-bench"


def _uv() -> str | None:
    if os.environ.get("UV"):
        return os.environ["UV"]
    local = ROOT / ".tools" / "bin" / "uv"
    return str(local) if local.is_file() else shutil.which("uv")


def ensure(name: str, requirements: list[str], python: str = sys.executable) -> Path:
    """The Python of virtualenv `name` with exactly `requirements` installed (made if needed)."""
    digest = hashlib.sha256("\n".join([python, *requirements]).encode()).hexdigest()[:12]
    venv = cache_dir() / f"{name}-{digest}"
    venv_python = venv / "bin" / "python"
    if (venv / STAMP).is_file():
        return venv_python
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"# installing {name} into {venv} (once): {' '.join(requirements)}", flush=True)
    uv = _uv()
    if uv:
        subprocess.run([uv, "venv", "--quiet", "--python", python, str(venv)], check=True)
        subprocess.run(
            [uv, "pip", "install", "--quiet", "--python", str(venv_python), *requirements],
            check=True,
        )
    else:
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, *requirements], check=True)
    (venv / STAMP).write_text("\n".join(requirements) + "\n")
    return venv_python


def installed(python: Path, names: tuple[str, ...]) -> str:
    """The versions of these distributions in the virtualenv of `python`, as one line."""
    script = (
        "import sys\nfrom importlib import metadata\n"
        "print(', '.join(f'{n} {metadata.version(n)}' for n in sys.argv[1:]))"
    )
    done = subprocess.run(
        [str(python), "-c", script, *names], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()
