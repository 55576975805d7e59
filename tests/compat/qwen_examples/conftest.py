"""Fixtures of the Qwen-Agent example tests (this folder only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from parley.providers.dashscope.server import DashScopeServer
from tests.compat.qwen_examples._dashscope import dashscope_stand_in


@pytest.fixture
def dashscope_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[DashScopeServer]:
    """The DashScope stand-in, where Qwen-Agent's environment variables point (no steps yet)."""
    with dashscope_stand_in(monkeypatch) as stand_in:
        yield stand_in
