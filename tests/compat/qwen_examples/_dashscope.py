"""The DashScope stand-in the example tests run Qwen-Agent's examples against.

The examples read DashScope's address and key from Qwen-Agent's own environment variables
(`DASHSCOPE_HTTP_URL`, read by DashScope's SDK, and `DASHSCOPE_API_KEY`), so a test points
them at a local `DashScopeServer` and leaves the examples' lines as they are upstream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest

from parley.providers.dashscope.server import DashScopeServer, Step


@contextmanager
def dashscope_stand_in(
    monkeypatch: pytest.MonkeyPatch, steps: Iterable[Step] = (), *, api_key: str | None = "sk-test"
) -> Iterator[DashScopeServer]:
    """A `DashScopeServer` playing `steps`, where Qwen-Agent's environment variables point.

    `api_key` None leaves `DASHSCOPE_API_KEY` as the test set it.
    """
    with DashScopeServer(steps) as server:
        monkeypatch.setenv("DASHSCOPE_HTTP_URL", server.url)
        if api_key is not None:
            monkeypatch.setenv("DASHSCOPE_API_KEY", api_key)
        yield server
