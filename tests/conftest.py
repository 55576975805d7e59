"""Suite-wide settings: no test reaches the internet or a model of the machine; CI's rules; the
real external servers."""

from __future__ import annotations

import pytest

import parley.models.base
from parley.providers import auto

# Under CI=true no skip passes and Hypothesis replays fixed examples (tests/_ci.py); PostgreSQL
# and Chromium fixtures (postgres_url, postgres_db_url, chromium_browser, ...); `pytester`, for
# the tests of the suite's own rules; parley's spans into memory (tests/tracing/fixtures.py).
pytest_plugins = ["tests._ci", "tests._external", "pytester", "tests.tracing.fixtures"]

# Provider adapters refuse any host but this machine (local wire-format servers still work).
parley.models.base.ALLOW_MODEL_REQUESTS = False


PROVIDER_KEYS = tuple(variable for variable, _, _ in auto.PROVIDER_KEYS)
"""The keys that would make `parley serve` and `parley chat` pick a hosted model."""


NO_OLLAMA = "127.0.0.1:1"
"""An Ollama host nothing answers on (tcpmux's port: no service listens there, and no test)."""


@pytest.fixture(autouse=True)
def no_ambient_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No model of the machine is chosen for a test that configures none (`parley.providers.auto`).

    A test that leaves the model unset runs the embedded one, as on a bare machine, whatever
    the developer has: provider keys cleared, `OLLAMA_HOST` on a port nothing listens on, and
    an empty Hugging Face cache (no pulled model). A test that wants one sets it itself.
    """
    for variable in PROVIDER_KEYS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("PARLEY_MODEL", raising=False)
    monkeypatch.delenv("PARLEY_MODEL_CHOICE", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", NO_OLLAMA)
    hub = tmp_path_factory.getbasetemp() / "no-pulled-models"
    monkeypatch.setenv("HF_HOME", str(hub))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub / "hub"))
