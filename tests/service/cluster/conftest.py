"""One cluster (tests/service/cluster/_cluster.py) for every test of this directory.

Starting three replicas, PostgreSQL and HAProxy takes tens of seconds on a small machine, so
they are started once; after each test `heal()` undoes its faults (PostgreSQL started,
the proxy passing, killed replicas started again, all UP) so the next one starts clean.
Replica r1 reaches PostgreSQL through the fault proxy (`cluster.proxy`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.cluster._cluster import Cluster, cluster


@pytest.fixture(scope="package")
def live_cluster() -> Iterator[Cluster]:
    """The running cluster, shared by the directory's tests."""
    with (
        tempfile.TemporaryDirectory(prefix="parley-cluster-") as root,
        cluster(Path(root), proxied=True) as made,
    ):
        yield made


@pytest.fixture
def healthy_cluster(live_cluster: Cluster) -> Iterator[Cluster]:
    """The cluster, every replica UP; healed again after the test, whatever it did."""
    live_cluster.heal()
    yield live_cluster
    live_cluster.heal()
