"""Every tracing test starts clean (the fixtures are in `tests.tracing.fixtures`)."""

from __future__ import annotations

import pytest

from tests._requires import require_module

require_module("opentelemetry.sdk", "tracing")


@pytest.fixture(autouse=True)
def _clean(clean_tracing: None) -> None:
    """No test here sees a tracing variable of the developer's, or another test's state."""
