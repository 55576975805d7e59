"""The speech tests' fixtures: the local voice's engines, each asked for as `_requires` says."""

from __future__ import annotations

import pytest
from tests._requires import require_module, require_program

ENGINES = ["piper-joe", "espeak-ng"]
"""The local voice's engines: Piper's "joe" voice in-process, espeak-ng as a subprocess."""


def require_engine(engine: str) -> None:
    """Skip (fail under CI) when `engine` cannot run here: Piper's package, espeak-ng's program."""
    if engine == "espeak-ng":
        require_program("espeak-ng")
    else:
        require_module("piper", "tts-piper")


@pytest.fixture
def espeak_ng() -> None:
    """For a test that speaks with espeak-ng (Debian's package, not a Python one)."""
    require_engine("espeak-ng")


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each engine of the local voice in turn, asked for before the test uses it."""
    name: str = request.param
    require_engine(name)
    return name
