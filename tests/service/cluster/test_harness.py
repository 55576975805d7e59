"""The cluster harness itself, on the service as it is: replicas behind HAProxy, and its faults.

Three `parley serve` processes on one PostgreSQL behind Debian's HAProxy, with the
configuration docs/how-to/deployment.md gives (tests/service/cluster/_cluster.py). These
check what the deployment page promises of the load balancer: every replica serves, a
killed one is taken out and its share goes to the others without a client seeing it, and a
PostgreSQL restart makes requests fail clearly (503 with a message) and then work again.
"""

from __future__ import annotations

import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.service.cluster._cluster import Cluster, haproxy_config
from tests.service.cluster._tcp_proxy import FaultProxy

_DOCS = Path(__file__).resolve().parents[3] / "docs" / "how-to" / "deployment.md"


def _ask(url: str, question: str) -> httpx.Response:
    return httpx.post(f"{url}/invoke", json={"message": question}, timeout=60)


def test_three_replicas_serve_behind_haproxy(healthy_cluster: Cluster) -> None:
    cluster = healthy_cluster
    assert cluster.states() == {"r1": "UP", "r2": "UP", "r3": "UP"}
    before = cluster.served()
    questions = [f"spread {n}" for n in range(9)]
    with ThreadPoolExecutor(max_workers=9) as pool:
        answers = list(pool.map(lambda q: _ask(cluster.url, q), questions))
    assert [a.status_code for a in answers] == [200] * 9
    assert [a.json()["content"] for a in answers] == [f"turn 1: {q}" for q in questions]
    after = cluster.served()
    # leastconn with nine requests at once: each replica took some.
    assert all(after[name] > before[name] for name in ("r1", "r2", "r3")), (before, after)


def test_a_killed_replica_is_marked_down_and_the_others_answer(healthy_cluster: Cluster) -> None:
    cluster = healthy_cluster
    cluster.replica("r2").kill()
    # At once, before any health check noticed: HAProxy's connection to r2 is refused, and
    # `retry-on conn-failure` + `redispatch` send the request to another replica.
    first = [_ask(cluster.url, f"right after {n}") for n in range(6)]
    cluster.wait_state("r2", "DOWN")
    later = [_ask(cluster.url, f"after down {n}") for n in range(6)]
    assert [a.status_code for a in first + later] == [200] * 12, [a.text for a in first + later]
    assert cluster.states() == {"r1": "UP", "r2": "DOWN", "r3": "UP"}

    served = cluster.served()["r2"]
    cluster.heal()  # started again on its port: back UP, and given requests again
    assert cluster.states()["r2"] == "UP"
    with ThreadPoolExecutor(max_workers=6) as pool:
        again = list(pool.map(lambda n: _ask(cluster.url, f"back {n}"), range(6)))
    assert [a.status_code for a in again] == [200] * 6
    assert cluster.served()["r2"] > served


def test_while_postgresql_is_down_requests_fail_clearly_then_they_work(
    healthy_cluster: Cluster,
) -> None:
    # One request at a time, none in flight when it stops (test_faults.py has it under load).
    cluster = healthy_cluster
    assert _ask(cluster.url, "before").status_code == 200
    cluster.postgres.stop()
    # Before the health checks notice: parley's own 503, saying what is wrong.
    down = _ask(cluster.url, "while down")
    assert down.status_code == 503, down.text
    assert "database is unavailable" in down.json()["detail"]
    for name in ("r1", "r2", "r3"):  # /health answers 503 without its database
        cluster.wait_state(name, "DOWN")
    # Then HAProxy's own 503, no replica being UP.
    down = _ask(cluster.url, "all down")
    assert down.status_code == 503
    assert "No server is available" in down.text
    cluster.postgres.start()
    cluster.wait_all_up()
    # Working again. A replica's first request may still meet its thread-lock connection
    # that the restart closed (a clear 503 too: locks.py reconnects on the next one).
    after = [_ask(cluster.url, f"after {n}") for n in range(9)]
    assert all(a.status_code in (200, 503) for a in after), [a.text for a in after]
    assert [a.json()["content"] for a in after[-3:]] == [f"turn 1: after {n}" for n in (6, 7, 8)]


def test_the_fault_proxy_delays_cuts_and_black_holes(healthy_cluster: Cluster) -> None:
    # The proxy alone, on PostgreSQL's port: what each mode does to a raw connection.
    proxy = FaultProxy(healthy_cluster.postgres.port)
    try:

        def connect() -> socket.socket:
            return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)

        # pass: PostgreSQL answers an SSLRequest with one byte ('N': no SSL here).
        ssl_request = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")
        with connect() as sock:
            sock.sendall(ssl_request)
            assert sock.recv(1) == b"N"
        proxy.set_mode("delay", delay_ms=300)
        with connect() as sock:
            sock.sendall(ssl_request)
            assert sock.recv(1) == b"N"
        proxy.set_mode("pass")
        held = connect()
        held.sendall(ssl_request)
        assert held.recv(1) == b"N"
        proxy.set_mode("cut")  # the open connection is closed under the client
        assert held.recv(1) == b""
        held.close()
        with connect() as sock:  # and a new one at once
            assert sock.recv(1) == b""
        proxy.set_mode("pass")
        before = connect()  # open before the black hole, and one made during it
        proxy.set_mode("blackhole")
        during = connect()
        for sock in (before, during):  # open, taking bytes, never answering, never closing
            sock.sendall(ssl_request)
            sock.settimeout(1.0)
            with pytest.raises(TimeoutError):
                sock.recv(1)
        assert proxy.open_connections() == 2
        # The partition heals: what was held goes through, as TCP's retransmissions would.
        proxy.set_mode("pass")
        for sock in (before, during):
            sock.settimeout(5.0)
            assert sock.recv(1) == b"N"
            sock.close()
    finally:
        proxy.close()


def test_the_deployment_page_shows_the_configuration_the_tests_run() -> None:
    page = _DOCS.read_text()
    shown = re.search(r"```haproxy\n(.*?)```", page, re.DOTALL)
    assert shown, "docs/how-to/deployment.md has no ```haproxy block"
    ours = haproxy_config(8080, 8404, {"r1": 8001, "r2": 8002, "r3": 8003})

    def directives(text: str) -> list[str]:
        # The same lines, but for addresses (the page's are a deployment's, ours 127.0.0.1)
        # and the comments and spacing.
        stripped = (line.split("#", 1)[0].split() for line in text.splitlines())
        return [
            " ".join(w for w in words if not re.fullmatch(r"[\d.]*:\d+", w))
            for words in stripped
            if words
        ]

    assert directives(shown.group(1)) == directives(ours)
