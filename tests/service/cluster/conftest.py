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
    marks = {r.name: r.log.stat().st_size if r.log.exists() else 0 for r in live_cluster.replicas}
    yield live_cluster
    # What the replicas logged during the test: pytest shows it when the test fails.
    for replica in live_cluster.replicas:
        if replica.log.exists():
            with replica.log.open(errors="replace") as log:
                log.seek(marks.get(replica.name, 0))
                print(f"--- {replica.name}.log during the test ---\n{log.read()[-60000:]}")
    live_cluster.heal()
