"""Fixtures of the agents' tests."""

from __future__ import annotations

import pytest

from tests.agents._tools import ran


@pytest.fixture
def clear_ran() -> None:
    """Empty the record of the shared tools' calls (`_tools.ran`) before a test."""
    ran.clear()
