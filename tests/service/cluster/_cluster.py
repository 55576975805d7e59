"""Three `parley serve` replicas on one PostgreSQL behind HAProxy: the fault tests' cluster.

`cluster(root)` (a context manager) starts, all on 127.0.0.1 and free ports:

- a throwaway PostgreSQL cluster of its own (tests/_external.py's machinery: initdb in a temp
  dir, fsync off, run as `postgres` under root), which the tests stop, start and restart;
- optionally a `FaultProxy` (tests/service/cluster/_tcp_proxy.py) in front of it, through
  which the FIRST replica (`r1`) reaches the database, the others going straight to it;
- `replicas` times `parley serve` (real subprocesses, `PARLEY_DATABASE_URL` on that database,
  serving `tests.service.cluster._agents:slow`, whose runs take a few seconds);
- HAProxy (`haproxy -f <cfg> -db`) with the configuration of docs/how-to/deployment.md
  (`HAPROXY_CONFIG` below, ports filled in), and its stats page, which tells each replica's
  state as HAProxy's health checks see it.

It yields a `Cluster`: `.url` (HAProxy's front), `.replicas`, `.postgres`, `.proxy`, and the
faults: `Replica.kill()` (SIGKILL), `Replica.start()` (again, same port), `Postgres.stop()`,
`.start()` and `.restart()`, `Cluster.wait_state(name, "UP"|"DOWN")`. Every wait is bounded
and every process is ended when the block ends, whatever happened in it. Logs stay in `root`
(replica `rN.log`, `haproxy.log`, PostgreSQL's `server.log`) for the failure messages.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests._external import _Cluster, _postgres_bin, pg_connection, run_async
from tests._requires import require_program, unavailable
from tests.service._live import free_port
from tests.service.cluster._tcp_proxy import FaultProxy

__all__ = ["HAPROXY_CONFIG", "Cluster", "Postgres", "Replica", "cluster", "haproxy_config"]

_ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
STATE_TIMEOUT = 20.0  # HAProxy marks a server DOWN after 2 failed checks 1 s apart: ~2 s
AGENT = "tests.service.cluster._agents:slow"
LEASE_SECONDS = 4.0

# The configuration docs/how-to/deployment.md shows (a test checks they agree), with the ports
# as format fields. Why each line is there is said in that page.
HAPROXY_CONFIG = """\
global
    log stdout format raw local0 info
    maxconn 4096

defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 5s
    retries 2
    option redispatch 1
    retry-on conn-failure

frontend parley_front
    bind 127.0.0.1:{front_port}
    default_backend parley_replicas

backend parley_replicas
    balance leastconn
    option httpchk
    http-check send meth GET uri /health
    http-check expect status 200
    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 2
{servers}
frontend stats
    bind 127.0.0.1:{stats_port}
    stats enable
    stats uri /stats
    stats refresh 5s
"""


def haproxy_config(front_port: int, stats_port: int, replica_ports: dict[str, int]) -> str:
    """`HAPROXY_CONFIG` for these ports: one `server NAME 127.0.0.1:PORT check` per replica."""
    servers = "".join(
        f"    server {name} 127.0.0.1:{port} check\n" for name, port in replica_ports.items()
    )
    return HAPROXY_CONFIG.format(front_port=front_port, stats_port=stats_port, servers=servers)


def _wait(what: str, ready: object, timeout: float, log: Path | None = None) -> None:
    """Poll `ready()` (a callable returning truth) every 0.1 s until true or `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what}: not so within {timeout:g}s\n{tail}")


@dataclass
class Replica:
    """One `parley serve` process; `start()` again after `kill()` reuses its port."""

    name: str
    port: int
    database_url: str
    root: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        """Its own address, past HAProxy."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """Its stderr (all starts appended)."""
        return self.root / f"{self.name}.log"

    def start(self) -> None:
        """Start it (not waiting: `wait_healthy`)."""
        command = [
            *(sys.executable, "-m", "parley", "serve", "--port", str(self.port)),
            *("--database-url", self.database_url, "--agent", AGENT, "--log-level", "warning"),
        ]
        with self.log.open("a") as out:
            out.write(f"--- start {self.starts + 1}\n")
            out.flush()
            self.process = subprocess.Popen(
                command, cwd=_ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.starts += 1

    def healthy(self) -> bool:
        """Whether its `/health` answers 200 now (it fails while the database is down)."""
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        return False

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until `/health` answers 200; fail at once if the process ended."""

        def ready() -> bool:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            return self.healthy()

        _wait(f"{self.name} healthy", ready, timeout, self.log)

    def kill(self) -> None:
        """kill -9: no shutdown, no cleanup, its connections reset by the kernel."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        """End it (SIGTERM, then SIGKILL past the bounded wait)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()


class Postgres:
    """The cluster's own PostgreSQL: its URL, and stop/start/restart on the same port."""

    def __init__(self) -> None:
        bin_dir = _postgres_bin()
        if bin_dir is None:
            unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self._server = _Cluster(bin_dir)
        self.url = self._server.start()
        self.up = True

    @property
    def port(self) -> int:
        """The port it listens on (kept across restarts)."""
        return self._server.port

    @property
    def log(self) -> Path:
        """Its server log."""
        return self._server.log

    def _pg_ctl(self, *args: str) -> None:
        server = self._server
        common = ("-D", str(server.data), "-w", "-t", "60")
        server._check(f"pg_ctl {args[0]}", server._run("pg_ctl", *args, *common))

    def stop(self) -> None:
        """Stop it now (`-m fast`: open sessions are ended, as a restart ends them)."""
        self._pg_ctl("stop", "-m", "fast")
        self.up = False

    def start(self) -> None:
        """Start it again on its port (waits until it accepts connections)."""
        self._pg_ctl("start", "-l", str(self._server.log), "-o", f"-p {self.port}")
        self.up = True

    def restart(self) -> None:
        """Stop and start it (`pg_ctl restart -m fast`)."""
        server = self._server
        self._pg_ctl("restart", "-m", "fast", "-l", str(server.log), "-o", f"-p {self.port}")

    def close(self) -> None:
        """Stop it for good and delete its files."""
        self._server.stop()

    def query(self, sql: str, *args: object) -> list[dict[str, Any]]:
        """The rows of one statement, run straight on the server (not through any proxy)."""

        async def run() -> list[dict[str, Any]]:
            async with pg_connection(self.url, command_timeout=30) as connection:
                return [dict(row) for row in await connection.fetch(sql, *args)]

        return run_async(run, timeout=60)  # whatever loop the caller runs

    def run_statuses(self) -> dict[str, int]:
        """How many runs the store has in each status."""
        rows = self.query("SELECT status, count(*) AS n FROM runs GROUP BY status")
        return {row["status"]: int(row["n"]) for row in rows}


@dataclass
class Cluster:
    """The running cluster; see the module doc."""

    root: Path
    postgres: Postgres
    replicas: list[Replica]
    front_port: int
    stats_port: int
    haproxy: subprocess.Popen[bytes] | None = None
    proxy: FaultProxy | None = None
    config: Path = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.root / "haproxy.cfg"

    @property
    def url(self) -> str:
        """HAProxy's front: where clients go."""
        return f"http://127.0.0.1:{self.front_port}"

    @property
    def haproxy_log(self) -> Path:
        """HAProxy's log (its request lines, and servers going UP and DOWN)."""
        return self.root / "haproxy.log"

    def replica(self, name: str) -> Replica:
        """The replica called `name` (`r1`, `r2`...)."""
        return next(r for r in self.replicas if r.name == name)

    def start_haproxy(self) -> None:
        """Write its configuration, check it (`haproxy -c`) and start it in the foreground."""
        binary = require_program("haproxy")
        ports = {r.name: r.port for r in self.replicas}
        self.config.write_text(haproxy_config(self.front_port, self.stats_port, ports))
        check = subprocess.run(
            [binary, "-c", "-f", str(self.config)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if check.returncode != 0:
            refused = f"{check.stdout}{check.stderr}"
            raise RuntimeError(f"haproxy -c refused the configuration:\n{refused}")
        with self.haproxy_log.open("a") as out:
            self.haproxy = subprocess.Popen(
                [binary, "-f", str(self.config), "-db"], stdout=out, stderr=subprocess.STDOUT
            )

    def states(self) -> dict[str, str]:
        """Each replica's state as HAProxy's stats page says it (`UP`, `DOWN`, `UP 1/2`...)."""
        answer = httpx.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5)
        answer.raise_for_status()
        rows = csv.DictReader(io.StringIO(answer.text.lstrip("# ")))
        return {
            row["svname"]: row["status"]
            for row in rows
            if row["pxname"] == "parley_replicas" and row["svname"] not in {"FRONTEND", "BACKEND"}
        }

    def served(self) -> dict[str, int]:
        """How many requests HAProxy has sent each replica (its `stot` counter)."""
        answer = httpx.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5)
        rows = csv.DictReader(io.StringIO(answer.text.lstrip("# ")))
        return {
            row["svname"]: int(row["stot"] or 0)
            for row in rows
            if row["pxname"] == "parley_replicas" and row["svname"] not in {"FRONTEND", "BACKEND"}
        }

    def wait_state(self, name: str, state: str, timeout: float = STATE_TIMEOUT) -> None:
        """Wait until HAProxy reports replica `name` in `state` (exactly: `UP` or `DOWN`)."""

        def reached() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return self.states().get(name) == state
            return False

        _wait(f"HAProxy: {name} {state}", reached, timeout, self.haproxy_log)

    def wait_all_up(self, timeout: float = START_TIMEOUT) -> None:
        """Wait until every replica answers `/health` and HAProxy has them all UP."""
        for replica in self.replicas:
            replica.wait_healthy(timeout)
        for replica in self.replicas:
            self.wait_state(replica.name, "UP")

    def heal(self) -> None:
        """Undo every fault: PostgreSQL up, the proxy passing, dead replicas started again."""
        if not self.postgres.up:
            self.postgres.start()
        if self.proxy is not None:
            self.proxy.set_mode("pass")
        for replica in self.replicas:
            if replica.process is None or replica.process.poll() is not None:
                replica.start()
        self.wait_all_up()

    def stop(self) -> None:
        """End everything: replicas, HAProxy, the proxy, PostgreSQL (each bounded)."""
        for replica in self.replicas:  # all told at once: their graceful ends overlap
            if replica.process is not None and replica.process.poll() is None:
                replica.process.terminate()
        for replica in self.replicas:
            with contextlib.suppress(Exception):
                replica.stop()
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            try:
                self.haproxy.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.haproxy.kill()
                self.haproxy.wait(STOP_TIMEOUT)
        if self.proxy is not None:
            self.proxy.close()
        self.postgres.close()


def _replica_env(root: Path, delay: float) -> dict[str, str]:
    # No provider keys (nothing may reach out), none of the machine's PARLEY_* settings (auth,
    # another database), a workspace of its own, this checkout's sources.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("PARLEY_")
    }
    env |= {
        "PARLEY_WORKSPACE": str(root / "workspace"),
        "PARLEY_TEST_DELAY": str(delay),
        # A dead replica's runs are taken over once their lease lapses: short, so the tests
        # (and the fault script) see takeovers in seconds, not half a minute.
        "PARLEY_LEASE_SECONDS": str(LEASE_SECONDS),
        "PYTHONPATH": os.pathsep.join(
            [str(_ROOT / "src"), str(_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    return env


@contextlib.contextmanager
def cluster(
    root: Path, *, replicas: int = 3, proxied: bool = False, delay: float = 0.1
) -> Iterator[Cluster]:
    """Start the whole cluster under `root`, yield it when every replica is UP, stop it after.

    `proxied`: replica r1 reaches PostgreSQL through a `FaultProxy` (`Cluster.proxy`).
    `delay`: seconds between the agent's streamed chunks (a run makes ~10 of them).
    """
    require_program("haproxy")
    postgres = Postgres()
    env = _replica_env(root, delay)
    made = Cluster(root, postgres, [], free_port(), free_port())
    try:
        if proxied:
            made.proxy = FaultProxy(postgres.port)
        for index in range(1, replicas + 1):
            url = postgres.url
            if made.proxy is not None and index == 1:
                url = url.replace(f":{postgres.port}/", f":{made.proxy.port}/")
            replica = Replica(f"r{index}", free_port(), url, root, env)
            made.replicas.append(replica)
            replica.start()
        made.start_haproxy()
        made.wait_all_up()
        yield made
    finally:
        made.stop()
