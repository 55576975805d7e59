"""The agent the cluster's replicas serve (`--agent tests.service.cluster._agents:slow`).

Its model answers `turn N: <last question>` (tests/service/_agents.py), two characters a chunk,
`PARLEY_TEST_DELAY` seconds apart: a run lasts long enough (a few seconds) for a fault to land
in its middle, and every event it makes is known in advance.
"""

from __future__ import annotations

import os

from parley.agents import Agent
from tests.service._agents import echo_agent

__all__ = ["slow"]


def slow() -> Agent:
    """The echo agent, streaming `PARLEY_TEST_DELAY` seconds apart (default 0.1)."""
    return echo_agent(float(os.environ.get("PARLEY_TEST_DELAY", "0.1")))
