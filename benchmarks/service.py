"""The HTTP service: its own cost under load, on SQLite and PostgreSQL, beside the service it
replaces (agent-service-toolkit's) and bare FastAPI.

The agents' model is parley's `ScriptedModel` (no LLM, no network), so what is measured is the
service: HTTP, validation, the thread's lock, the store's writes, the run's task and events.
Each server is a uvicorn process of its own on 127.0.0.1 (`_serve.py`, started by this
script), logging as its own command does (an access line a request: the toolkit's uvicorn
writes it before each answer, parley's app after it, `parley serve`'s way). The load comes
from this process, `httpx.AsyncClient`s of one connection each on one event loop; the held
streams of 2.
from a process of their own (`service.py --hold ...`).

1. `POST /invoke` at 1, 16 and 64 concurrent clients, each client on a thread of its own (a
   new one every question, or every `--turns` questions), and rows with every client on ONE
   thread (runs on a thread go one at a time: the cost of that serialization). Requests/s,
   p50 and p99 latency, on SQLite and PostgreSQL side by side with their ratio; the same on
   agent-service-toolkit's own service (`_toolkit_server.py`: its `chatbot` agent, its fake
   model, in the virtualenv `setup.sh` makes for it), once on its SQLite checkpointer
   (`toolkit`, the peer of parley's SQLite) and once on its PostgreSQL one (`toolkit-pg`,
   LangGraph's `AsyncPostgresSaver` on the same PostgreSQL server as parley's, a database of
   its own, its pools `TOOLKIT_PG_POOL` connections each); and on a bare FastAPI app that
   validates a `UserInput` and returns a constant `ChatMessage` (no store, no agent): the
   framework's floor, as a ratio.
2. `/stream` clients held open: N streams of a long answer (a token every `stream_delay`,
   for minutes), N = 16, 32, 64, ... and meanwhile new clients, `PROBE_RATE` a second, each
   streaming a short answer on a connection of its own: their time to first token (request
   sent to the first `token` frame read; the model's first chunk comes at once). The ramp
   stops when the p99 reaches 100 ms or a stream fails: the most streams held open with a
   new client's p99 under 100 ms.
3. Memory per open stream: the server's resident set (`VmRSS`) with N streams open, minus
   its resident set idle before them, over N (a fresh server).

Rows are interleaved (each concurrency runs SQLite, PostgreSQL, the toolkit and bare back to back,
round after round), so drift in the machine's speed falls on all of them. Nothing here is a test:
no figure fails the run. Linux only (`/proc`).

Run: `python benchmarks/service.py [--quick] [--postgres-url URL] [--skip-postgres]
[--toolkit-python PATH] [--require-peers] [--turns N] [--invoke-only]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import platform
import re
import select
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from parley.compat.service_toolkit import ChatMessage, UserInput

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _serve  # noqa: E402  (the server process's side, beside this file)
from _serve import START_TIMEOUT, raise_file_limit  # noqa: E402

TOOLKIT_PYTHON = ROOT / ".venv-bench" / "toolkit" / "bin" / "python"
"""agent-service-toolkit's virtualenv, as `benchmarks/setup.sh .venv-bench` makes it."""
TOOLKIT_AGENT = "chatbot"
"""The toolkit's agent under load: one model call, no tools (its fake model)."""
TOOLKIT_PG_POOL = 10
"""Connections in each of the toolkit's PostgreSQL pools (its saver's and its store's), as
parley's store keeps (`_PG_POOL_SIZE`): its default, 1, would make its every request take
turns on one connection. Env `POSTGRES_MAX_CONNECTIONS_PER_POOL` (its own setting) wins."""

QUESTION = "What is the capital of France?"
ANSWER = "The capital of France is Paris, on the Seine."
INVOKE_CHUNK = 16
"""Characters per streamed chunk of the /invoke agent's answer (3 chunks)."""
TTFT_GOAL = 0.100
"""Seconds: the p99 time to first token a level of held streams must keep under."""
PROBE_RATE = 20.0
"""New streaming clients a second while streams are held (their TTFT is the figure)."""
OPEN_RATE = 200.0
"""Held streams opened a second when a level starts (not all at one instant)."""
LAG_TICK = 0.01
"""Seconds between the load generator's checks of its own event loop's lag."""
HELD_WORDS = 20_000
"""Token frames of a held stream's answer: minutes long, it outlasts any level."""
STOP_TIMEOUT = 20.0
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*: ")


@dataclass(frozen=True)
class Settings:
    """How much to run."""

    invoke_seconds: float
    """Measured seconds of each /invoke row, per round."""
    rounds: int
    concurrency: tuple[int, ...]
    one_thread: tuple[int, ...]
    """Concurrencies that also run with every client on one thread."""
    stream_delay: float
    """Seconds between a held stream's token frames."""
    stream_hold: float
    """Measured seconds of each level of held streams (new clients arriving meanwhile)."""
    stream_levels: tuple[int, ...]
    memory_streams: int
    turns: int = 1
    """Questions per thread before a client starts a new one (1: every question a new thread)."""


DEFAULT = Settings(
    # Short slots, many rounds: the servers of a row are measured within seconds of each
    # other, so the machine's drift (a shared VM's speed moved 20-40% within a minute here)
    # falls on all of them alike. Two rounds of 4 s put a row's ratio anywhere in +-0.3x.
    invoke_seconds=1.0,
    rounds=8,
    concurrency=(1, 16, 64),
    one_thread=(16, 64),
    stream_delay=0.03,
    stream_hold=4.0,
    stream_levels=(16, 32, 64, 128, 256, 512, 1024),
    memory_streams=256,
)
QUICK = Settings(
    invoke_seconds=2.0,
    rounds=1,
    concurrency=(1, 16, 64),
    one_thread=(64,),
    stream_delay=0.03,
    stream_hold=2.0,
    stream_levels=(16, 32, 64, 128, 256, 512),
    memory_streams=128,
)


# -- the server process ------------------------------------------------------------------------


def _endless_model(text: str, *, chunk_size: int, chunk_delay: float = 0.0) -> Any:
    """A scripted model that answers `text` to every call, forever, keeping no record.

    Its first chunk comes at once; `chunk_delay` separates the others, so a held stream is slow
    but its first token is the service's latency alone.
    """
    from parley.models.testing import ScriptedModel  # noqa: PLC0415 - server process only

    class Endless(ScriptedModel):
        def _next(self, request: Any) -> Any:
            self.steps.append(text)
            return super()._next(request)

        async def _stream(self, request: Any) -> AsyncIterator[Any]:
            first = True
            for delta in self._deltas(self._next(request)):
                if self.chunk_delay and not first:
                    await asyncio.sleep(self.chunk_delay)
                first = False
                yield delta

    model = Endless(stream=True, chunk_size=chunk_size, chunk_delay=chunk_delay)
    model.requests = deque(maxlen=0)  # type: ignore[assignment]  # record nothing
    return model


def parley_app(database_url: str, stream_delay: float) -> Any:
    """The service with two agents: `fast` (the default) and `hold` (a long, slow answer)."""
    from parley.agents import Agent  # noqa: PLC0415
    from parley.service import create_app  # noqa: PLC0415

    word = "word "  # one chunk a word
    agents = [
        Agent("fast", _endless_model(ANSWER, chunk_size=INVOKE_CHUNK)),
        Agent(
            "hold",
            _endless_model(word * HELD_WORDS, chunk_size=len(word), chunk_delay=stream_delay),
        ),
    ]
    return create_app(parley_settings(database_url), agents=agents)


def parley_settings(database_url: str) -> Any:
    """The service's settings here: its defaults, but the database and the busy timeout."""
    from parley.service import ServiceSettings  # noqa: PLC0415

    # A thread busy with one run waits for it; the one-thread rows queue up to 64 runs.
    return ServiceSettings(database_url=database_url, busy_timeout=120.0)


def bare_app() -> Any:
    """FastAPI alone: `POST /invoke` validates a `UserInput` and answers a constant message."""
    from fastapi import FastAPI  # noqa: PLC0415

    app = FastAPI()
    answer = ChatMessage(type="ai", content=ANSWER, run_id="run_0")

    @app.post("/invoke")
    async def invoke(body: UserInput) -> ChatMessage:
        return answer

    return app


def serve(kind: str, database_url: str, stream_delay: float) -> None:
    """`--serve`: serve an app as `parley serve` would (its uvicorn options: log level `info`,
    the app's access log; parley's INFO lines on stderr), on 127.0.0.1, until stdin closes."""
    if kind == "bare":
        _serve.serve(bare_app(), log_level="info")
        return
    from parley.service.cli import uvicorn_options  # noqa: PLC0415 - server process only

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("parley").addHandler(handler)
    logging.getLogger("parley").setLevel(logging.INFO)
    options = uvicorn_options(parley_settings(database_url))
    _serve.serve(parley_app(database_url, stream_delay), **options)


# -- the client's side: servers, their CPU and memory -------------------------------------------


class Child:
    """A process of this script's, whose CPU time and resident set can be read."""

    process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def rss(self) -> int:
        """Its resident set, in bytes (`VmRSS`)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def cpu(self) -> float:
        """Its CPU time so far, in seconds (user + system)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    log: Path | None = None
    """Where its stderr goes (None: this process's)."""

    env: dict[str, str] | None = None
    """Its environment (None: this process's)."""

    def _start(self, command: list[str], timeout: float) -> str:
        """Start it; the first line it prints (empty if none came in `timeout`)."""
        with contextlib.ExitStack() as stack:
            stderr = stack.enter_context(self.log.open("ab")) if self.log else None
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=ROOT,
                env=self.env,
            )
        return self._line(timeout)

    def errors_logged(self) -> tuple[int, str]:
        """How many requests it logged as failed (its 500s), and the first one's exception."""
        if self.log is None or not self.log.exists():
            return 0, ""
        lines = self.log.read_text(errors="replace").splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("unexpected error on")]
        if not starts:
            return 0, ""
        first = lines[starts[0] : starts[1] if len(starts) > 1 else len(lines)]
        raised = [line for line in first if _EXCEPTION_LINE.match(line)]
        return len(starts), (raised[-1] if raised else first[0]).strip()

    def _line(self, timeout: float) -> str:
        assert self.process is not None
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        return self.process.stdout.readline().decode() if ready else ""

    def _stop(self) -> None:
        """Close its stdin (its signal to end) and wait for it, killing it if it lingers."""
        if self.process is None:
            return
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)


class Server(Child, contextlib.AbstractContextManager["Server"]):
    """A server process on 127.0.0.1 (`_serve.py`'s); it stops when its stdin closes.

    `invoke` is the path of its `POST /invoke`.
    """

    def __init__(
        self,
        kind: str,
        database_url: str,
        settings: Settings,
        log: Path | None = None,
        *,
        command: list[str] | None = None,
        invoke: str = "/invoke",
    ) -> None:
        self.kind = kind
        self.log = log
        self.invoke = invoke
        self.command = command or [
            sys.executable,
            str(Path(__file__).resolve()),
            "--serve",
            kind,
            "--database-url",
            database_url,
            "--stream-delay",
            str(settings.stream_delay),
        ]
        self.url = ""

    @classmethod
    def toolkit(cls, python: Path, database: Path | str, settings: Settings, log: Path) -> Server:
        """agent-service-toolkit's own service (`_toolkit_server.py`), in its virtualenv.

        `database`: its SQLite file, or a PostgreSQL URL (its PostgreSQL checkpointer).
        """
        where = ["--database", str(database)]
        kind = "toolkit"
        if isinstance(database, str):
            where, kind = ["--postgres-url", database], "toolkit-pg"
        command = [str(python), str(HERE / "_toolkit_server.py"), *where]
        server = cls(kind, "", settings, log, command=command, invoke=f"/{TOOLKIT_AGENT}/invoke")
        if kind == "toolkit-pg":
            pool = str(TOOLKIT_PG_POOL)
            server.env = {"POSTGRES_MAX_CONNECTIONS_PER_POOL": pool, **os.environ}
        return server

    def __enter__(self) -> Server:
        line = self._start(self.command, START_TIMEOUT)
        if not line.startswith("PORT "):
            self._stop()
            said = self.log.read_text(errors="replace")[-2000:] if self.log else ""
            raise SystemExit(
                f"the {self.kind} server did not start within {START_TIMEOUT:g} s "
                f"(its first line: {line!r}); the end of its log:\n{said}"
            )
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()


class Holder(Child, contextlib.AbstractContextManager["Holder"]):
    """A `--hold` process: `n` streams held open on a server, from a process of their own.

    So that reading their frames does not delay this process's loop, which times new clients.
    """

    def __init__(self, url: str, n: int) -> None:
        self.command = [sys.executable, str(Path(__file__).resolve()), "--hold", url, str(n)]
        self.n = n
        self.errors = 0

    def __enter__(self) -> Holder:
        line = self._start(self.command, self.n / OPEN_RATE + 120)
        if not line.startswith("OPEN "):
            self._stop()
            raise SystemExit(f"the streams were not held: {line!r}")
        self.errors = int(line.split()[1])
        return self

    def frames(self) -> tuple[int, int]:
        """Frames read so far over all the streams, and streams failed so far."""
        assert self.process is not None
        assert self.process.stdin is not None
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()
        _, frames, errors = self._line(30).split()
        return int(frames), int(errors)

    def __exit__(self, *exc: object) -> None:
        self._stop()


@dataclass
class Load:
    """What a measured stretch of load did."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    frames: int = 0
    lags: list[float] = field(default_factory=list)
    """How late this process's event loop woke up, every `LAG_TICK` (held streams only)."""
    holder_cpu: float = 0.0

    def add(self, other: Load) -> None:
        self.seconds += other.seconds
        self.latencies += other.latencies
        self.errors += other.errors
        self.server_cpu += other.server_cpu
        self.client_cpu += other.client_cpu
        self.frames += other.frames

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def quantile(self, q: float) -> float:
        return _quantile(self.latencies, q)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def cpu_of(server: Child, load: Load) -> Iterator[None]:
    """Add the server's and this process's CPU seconds over the block to `load`."""
    server_before, client_before = server.cpu(), time.process_time()
    try:
        yield
    finally:
        load.server_cpu += server.cpu() - server_before
        load.client_cpu += time.process_time() - client_before


_TLS = ssl.create_default_context()  # unused on http://, but each client would load its own


@contextlib.asynccontextmanager
async def clients(n: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`n` clients of one connection each.

    Not one client with a pool of `n`: httpx's pool serializes its callers (64 callers on one
    client made 100 req/s where 64 clients make 900, against bare FastAPI).
    """
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(120.0, connect=30.0)
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                httpx.AsyncClient(limits=limits, timeout=timeout, verify=_TLS)
            )
            for _ in range(n)
        ]


# -- 1. POST /invoke ------------------------------------------------------------------------------


async def invoke_load(
    server: Server, n: int, seconds: float, *, one_thread: bool, turns: int
) -> Load:
    """`n` clients posting /invoke back to back for `seconds` (after a warm-up)."""
    prefix = uuid.uuid4().hex[:8]
    counts = [0] * n
    shared = [0]
    load = Load()
    url = f"{server.url}{server.invoke}"

    def thread_of(i: int) -> str:
        if one_thread:  # a new thread every `clients` questions: in flight, all on one
            shared[0] += 1
            return f"{prefix}-all-{(shared[0] - 1) // max(turns, n)}"
        counts[i] += 1
        return f"{prefix}-{i}-{(counts[i] - 1) // turns}"

    async def one(http: httpx.AsyncClient, i: int) -> tuple[float, bool]:
        body = {"message": QUESTION, "thread_id": thread_of(i)}
        started = time.perf_counter()
        response = await http.post(url, json=body)
        return time.perf_counter() - started, response.status_code == 200

    async with clients(n) as https:
        await asyncio.gather(*(one(http, i) for i, http in enumerate(https)))  # connect, warm
        stop = time.perf_counter() + seconds

        async def client(http: httpx.AsyncClient, i: int) -> None:
            while time.perf_counter() < stop:
                latency, ok = await one(http, i)
                if ok:
                    load.latencies.append(latency)
                else:
                    load.errors += 1

        with cpu_of(server, load):
            started = time.perf_counter()
            await asyncio.gather(*(client(http, i) for i, http in enumerate(https)))
            load.seconds = time.perf_counter() - started
    return load


@dataclass
class InvokeRow:
    clients: int
    one_thread: bool
    loads: dict[str, Load]
    """By server label."""


async def invoke_figures(servers: dict[str, Server], settings: Settings) -> list[InvokeRow]:
    rows = [InvokeRow(c, False, {}) for c in settings.concurrency]
    rows += [InvokeRow(c, True, {}) for c in settings.one_thread]
    labels = list(servers)
    for round_ in range(settings.rounds):
        for row in rows:
            shift = round_ % len(labels)
            for label in [*labels[shift:], *labels[:shift]]:
                if row.one_thread and label in PEERS:
                    continue  # no threads there; the toolkit does not queue a thread's runs
                load = await invoke_load(
                    servers[label],
                    row.clients,
                    settings.invoke_seconds,
                    one_thread=row.one_thread,
                    turns=settings.turns,
                )
                row.loads.setdefault(label, Load()).add(load)
    return rows


PEERS = ("toolkit", "toolkit-pg", "bare")
"""Servers beside parley's, in the order of their columns."""
PEER_DATABASE = {"toolkit": "sqlite", "toolkit-pg": "postgres"}
"""The parley server a peer on a database is compared with (the one on the same database);
a peer not named here (bare) is compared with each."""


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def _ratio_pairs(labels: list[str]) -> list[tuple[str, str]]:
    """The ratios a row shows: each of parley's databases over SQLite, then over each peer
    (a toolkit's over the parley server on its database)."""
    ours = [label for label in labels if label not in PEERS]
    pairs = [(label, "sqlite") for label in ours if label != "sqlite"]
    return pairs + [
        (label, peer)
        for peer in PEERS
        if peer in labels
        for label in ours
        if PEER_DATABASE.get(peer, label) == label
    ]


def _invoke_header(labels: list[str]) -> str:
    header = f"{'clients':>7} {'threads':<8}" + "".join(f"{label:>25}" for label in labels)
    return header + "".join(f"{f'{a}/{b}':>17}" for a, b in _ratio_pairs(labels))


def _ratios(row: InvokeRow, labels: list[str]) -> str:
    cells = ""
    for a, b in _ratio_pairs(labels):
        over, under = row.loads.get(a), row.loads.get(b)
        ratio = f"{over.rate / under.rate:.2f}x" if over and under and under.rate else "-"
        cells += f"{ratio:>17}"
    return cells


def report_invoke(rows: list[InvokeRow], labels: list[str], settings: Settings) -> None:
    print(
        f"POST /invoke, {settings.rounds} round(s) of {settings.invoke_seconds:g} s per row; "
        "req/s, latency p50 and p99 in ms"
    )
    header = _invoke_header(labels)
    print(header)
    print(f"{'':>7} {'':<8}" + f"{'req/s':>10}{'p50':>7}{'p99':>8}" * len(labels))
    print("-" * len(header))
    for row in rows:
        line = f"{row.clients:>7} {'one' if row.one_thread else 'own':<8}"
        for label in labels:
            load = row.loads.get(label)
            if load is None:
                line += f"{'-':>25}"
            else:
                p50, p99 = _ms(load.quantile(0.5)), _ms(load.quantile(0.99))
                line += f"{load.rate:>10.0f}{p50:>7}{p99:>8}"
        print(line + _ratios(row, labels))
    errors = {
        f"{r.clients}/{'one' if r.one_thread else 'own'}/{label}": load.errors
        for r in rows
        for label, load in r.loads.items()
        if load.errors
    }
    print(f"(failed requests: {errors or 'none'})")
    every = "every question" if settings.turns == 1 else f"every {settings.turns} questions"
    print(
        f"threads: own = each client on a thread of its own (a new one {every}); one = every "
        "client on one thread, whose runs go one at a time (a new one every "
        f"max({settings.turns}, clients) questions, so the history stays short)"
    )
    print(
        "CPU over the measured time, % of one core: server / load generator; and the "
        "server's CPU a request, in ms (what other work on the machine moves least)"
    )
    for row in rows:
        cells = "   ".join(
            f"{label}: {load.server_cpu / load.seconds:>4.0%} / "
            f"{load.client_cpu / load.seconds:>4.0%} "
            f"({load.server_cpu / max(1, len(load.latencies)) * 1e3:.2f})"
            for label, load in row.loads.items()
        )
        print(f"{row.clients:>7} {'one' if row.one_thread else 'own':<8} {cells}")
    print()


# -- 2. held streams -------------------------------------------------------------------------------


class StreamError(Exception):
    """A stream answered other than 200, or sent an error frame, or ended before [DONE]."""


@dataclass
class Tally:
    """Frames read across streams."""

    frames: int = 0


async def one_stream(
    http: httpx.AsyncClient,
    url: str,
    agent: str,
    *,
    on_first: asyncio.Event | None = None,
    tally: Tally | None = None,
) -> float:
    """Stream one answer to its end; the time from the request to its first token frame."""
    body = {"message": QUESTION, "stream_tokens": True}
    started = time.perf_counter()
    first = 0.0
    async with http.stream("POST", f"{url}/{agent}/stream", json=body) as response:
        if response.status_code != 200:
            raise StreamError(f"status {response.status_code}")
        async for line in response.aiter_lines():
            if not line:
                continue
            if tally is not None:
                tally.frames += 1
            if line == "data: [DONE]":
                return first
            if not first and line.startswith('data: {"type":"token"'):
                first = time.perf_counter() - started
                if on_first is not None:
                    on_first.set()
            elif line.startswith('data: {"type":"error"'):
                raise StreamError(line[:200])
    raise StreamError("the stream ended before [DONE]")


async def settle(server: Server, timeout: float = 60.0) -> None:
    """Wait until the server is idle (under a tenth of a core for a quarter second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = server.cpu()
        await asyncio.sleep(0.25)
        if server.cpu() - before < 0.025:
            return


async def loop_lag(lags: list[float]) -> None:
    """Record, until cancelled, how much later than asked this event loop wakes a sleeper.

    A TTFT is read by this process too: when its own loop lags, part of the figure is the
    load generator's, not the server's.
    """
    while True:
        started = time.perf_counter()
        await asyncio.sleep(LAG_TICK)
        lags.append(time.perf_counter() - started - LAG_TICK)


async def held_streams(server: Server, n: int, settings: Settings) -> Load:
    """`n` streams held open (by a `Holder`); the TTFTs of new clients arriving meanwhile.

    Once every held stream has its first token the window opens: `PROBE_RATE` new clients a
    second for `stream_hold` seconds, each a client and a connection of its own streaming the
    `fast` agent's short answer. Then the held streams are dropped (their runs cancelled) and
    the server left to settle.
    """
    load = Load()  # seconds: the measured window

    async def probe() -> None:
        timeout = httpx.Timeout(60.0, connect=30.0)
        async with httpx.AsyncClient(timeout=timeout, verify=_TLS) as http:
            try:
                load.latencies.append(await one_stream(http, server.url, "fast"))
            except (StreamError, httpx.HTTPError):
                load.errors += 1

    with Holder(server.url, n) as holder:
        load.errors += holder.errors
        if not holder.errors:
            frames, _ = holder.frames()
            holder_cpu = holder.cpu()
            lag = asyncio.create_task(loop_lag(load.lags))
            with cpu_of(server, load):
                started = time.perf_counter()
                probes = []
                for k in range(int(settings.stream_hold * PROBE_RATE)):
                    await asyncio.sleep(max(0.0, started + k / PROBE_RATE - time.perf_counter()))
                    probes.append(asyncio.create_task(probe()))
                await asyncio.gather(*probes)
                load.seconds = time.perf_counter() - started
            lag.cancel()
            load.holder_cpu = holder.cpu() - holder_cpu
            after, errors = holder.frames()
            load.frames = after - frames
            load.errors += errors
    await settle(server)
    return load


def hold(url: str, n: int) -> None:
    """`--hold`: keep `n` streams of the `hold` agent open until stdin closes.

    Prints `OPEN <failed>` once each stream has its first token (or failed), then, for every
    line read from stdin, `FRAMES <frames read> <failed>`.
    """
    raise_file_limit()

    async def main() -> None:
        tally = Tally()
        failed = 0
        opened = [asyncio.Event() for _ in range(n)]

        async def one(http: httpx.AsyncClient, i: int) -> None:
            nonlocal failed
            await asyncio.sleep(i / OPEN_RATE)  # not all at one instant
            try:
                await one_stream(http, url, "hold", on_first=opened[i], tally=tally)
            except (StreamError, httpx.HTTPError):
                failed += 1
                opened[i].set()

        async with clients(n) as https:
            tasks = [asyncio.create_task(one(http, i)) for i, http in enumerate(https)]
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(e.wait() for e in opened)), timeout=n / OPEN_RATE + 60
                )
            except TimeoutError:
                failed += sum(not e.is_set() for e in opened)
            print(f"OPEN {failed}", flush=True)
            while await asyncio.to_thread(sys.stdin.readline):
                print(f"FRAMES {tally.frames} {failed}", flush=True)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


@dataclass
class Level:
    streams: int
    load: Load
    tries: int = 1


def _met(load: Load) -> bool:
    return not load.errors and bool(load.latencies) and load.quantile(0.99) < TTFT_GOAL


async def stream_figures(server: Server, settings: Settings) -> list[Level]:
    """Levels of held streams, up to the first that misses the goal.

    A level that misses it without a failed stream runs once more, and the better of the two
    stands: other work on the machine can stall a few of 80 new clients.
    """
    levels = []
    for n in settings.stream_levels:
        level = Level(n, await held_streams(server, n, settings))
        if not _met(level.load) and not level.load.errors:
            again = await held_streams(server, n, settings)
            level.tries = 2
            if _met(again) or (
                not again.errors and again.quantile(0.99) < level.load.quantile(0.99)
            ):
                level.load = again
        levels.append(level)
        if not _met(level.load):
            break
    return levels


def report_streams(label: str, levels: list[Level], settings: Settings) -> None:
    print(
        f"/stream on {label}: N streams held open, a token frame every "
        f"{settings.stream_delay * 1e3:g} ms each; meanwhile {PROBE_RATE:g} new clients a "
        f"second for {settings.stream_hold:g} s, each streaming a short answer: their TTFT in ms"
    )
    header = (
        f"{'held':>6}{'tries':>6}{'new':>6}{'TTFT p50':>10}{'p90':>8}{'p99':>8}{'errors':>8}"
        f"{'frames/s':>10}{'server CPU':>12}{'holder CPU':>12}{'client CPU':>12}"
        f"{'client lag p99':>16}"
    )
    print(header)
    print("-" * len(header))
    held = 0
    for level in levels:
        load = level.load
        if _met(load):
            held = level.streams
        if not load.seconds:  # the held streams did not all open: nothing measured
            print(f"{level.streams:>6}{level.tries:>6}{'-':>6}{'-':>10}{'-':>8}{'-':>8}", end="")
            print(f"{load.errors:>8}")
            continue
        seconds = load.seconds
        print(
            f"{level.streams:>6}{level.tries:>6}{len(load.latencies):>6}"
            f"{_ms(load.quantile(0.5)):>10}"
            f"{_ms(load.quantile(0.9)):>8}{_ms(load.quantile(0.99)):>8}"
            f"{load.errors:>8}{load.frames / seconds:>10.0f}"
            f"{load.server_cpu / seconds:>12.0%}{load.holder_cpu / seconds:>12.0%}"
            f"{load.client_cpu / seconds:>12.0%}{_ms(_quantile(load.lags, 0.99)):>16}"
        )
    last = levels[-1] if levels else None
    ran_out = last is not None and last.streams == held
    why = "the ramp's last level still met it" if ran_out else "the next level did not"
    print(
        f"=> {label}: at most {held} streams held open with a new client's p99 TTFT "
        f"< {TTFT_GOAL * 1e3:.0f} ms ({why})"
    )
    if last is not None and last.load.errors:
        print(
            f"(errors: streams that failed, held or new; at {last.streams} held, "
            f"{last.load.errors} failed: see the server's errors at the end)"
        )
    print(
        f"(tries: a level that missed ran twice, the better stands; new: clients measured, "
        f"so the p99 of {int(settings.stream_hold * PROBE_RATE)} is about the slowest; "
        "frames/s: the held streams' frames read in the window; "
        "CPU: % of one core in the "
        "window: the server, the process holding the streams, the one timing new clients; "
        "client lag: how late that last one's loop ran, in ms, a share of each TTFT that is "
        "not the server's)\n"
    )


# -- 3. memory per open stream ---------------------------------------------------------------------


async def memory_per_stream(server: Server, n: int) -> tuple[int, int]:
    """The server's RSS idle and with `n` open streams (each past its first token)."""
    async with clients(20) as https:
        for http in https:  # warm: imports, caches, the pools
            await http.post(f"{server.url}/invoke", json={"message": QUESTION})
            await one_stream(http, server.url, "fast")
    await settle(server)
    idle = server.rss()
    with Holder(server.url, n) as holder:
        if holder.errors:
            raise SystemExit(f"{holder.errors} of {n} streams failed to open")
        await asyncio.sleep(1.0)
        busy = statistics.median([server.rss() for _ in range(5)])
    return idle, int(busy)


def report_memory(idle: int, busy: int, n: int) -> None:
    per = (busy - idle) / n
    print(
        f"memory per open stream (a fresh SQLite server, VmRSS): idle {idle / 2**20:.1f} MiB, "
        f"with {n} open streams {busy / 2**20:.1f} MiB: {per / 1024:.1f} KiB a stream\n"
    )


# -- PostgreSQL ------------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres(args: argparse.Namespace) -> Iterator[tuple[str, str] | None]:
    """A PostgreSQL database for the run, and where it comes from; None to skip it.

    The URL given (`--postgres-url`, env `PARLEY_BENCH_POSTGRES_URL`) gets a fresh database
    made and dropped on its server if its role may; else a throwaway cluster is made the way
    the tests make theirs (`tests/_external.py`).
    """
    if args.skip_postgres:
        yield None
        return
    sys.path.insert(0, str(ROOT))  # tests._external: the tests' cluster and databases
    from tests._external import _Cluster, _postgres_bin, fresh_database  # noqa: PLC0415

    given = args.postgres_url or os.environ.get("PARLEY_BENCH_POSTGRES_URL")
    if given:
        from sqlalchemy.engine import make_url  # noqa: PLC0415

        url = make_url(given)
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+asyncpg")
        server_url = url.render_as_string(hide_password=False)
        try:
            database = fresh_database(server_url)
            fresh = database.__enter__()
        except Exception as exc:  # no CREATEDB: use the database as given
            print(f"(could not make a fresh database, {type(exc).__name__}: using the one given)")
            yield server_url, "the server given"
            return
        try:
            yield fresh, "the server given, a fresh database"
        finally:
            database.__exit__(None, None, None)
        return
    bin_dir = _postgres_bin()
    if bin_dir is None:
        print("(PostgreSQL skipped: no initdb/pg_ctl; pass --postgres-url)\n")
        yield None
        return
    cluster = _Cluster(bin_dir)
    try:
        yield cluster.start(), f"a throwaway cluster ({bin_dir.parent.name}, fsync off)"
    finally:
        cluster.stop()


@contextlib.contextmanager
def database_beside(url: str) -> Iterator[str]:
    """A fresh database on the server of `url` (dropped after), or `url`'s own if none can be
    made: the toolkit's tables are named unlike parley's."""
    from tests._external import fresh_database  # noqa: PLC0415 - sys.path set by `postgres`

    try:
        database = fresh_database(url)
        fresh = database.__enter__()
    except Exception as exc:
        print(f"(the toolkit shares parley's database: {type(exc).__name__} making its own)")
        yield url
        return
    try:
        yield fresh
    finally:
        database.__exit__(None, None, None)


def _postgres_about(url: str) -> str:
    """The server's version and its `max_connections`."""

    async def ask() -> str:
        from sqlalchemy import text  # noqa: PLC0415
        from sqlalchemy.ext.asyncio import create_async_engine  # noqa: PLC0415

        engine = create_async_engine(url)
        try:
            async with engine.connect() as connection:
                version = (await connection.execute(text("SHOW server_version"))).scalar()
                most = (await connection.execute(text("SHOW max_connections"))).scalar()
                return f"{version}, max_connections {most}"
        finally:
            await engine.dispose()

    return asyncio.run(ask())


# -- main ------------------------------------------------------------------------------------------


def _versions() -> str:
    names = ("parley", "fastapi", "starlette", "uvicorn", "httpx", "sqlalchemy", "aiosqlite")
    return f"{_serve.versions(names)}; {_checkout()}"


def _checkout() -> str:
    """The commit the code measured is at (an editable install's version says when it was
    installed, not what runs), and whether it has changes not committed."""
    try:
        head = _git("rev-parse", "--short=12", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"commit {head}" + (" with changes not committed" if changed else "")


def _git(*args: str) -> str:
    """What `git` prints for `args` in this checkout."""
    command = ["git", "-C", str(ROOT), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


def _machine() -> str:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({model}), "
        f"{memory:.0f} GiB; python {sys.version.split()[0]}"
    )


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _server_stack() -> str:
    parts = []
    for module, name in (("uvloop", "uvloop"), ("httptools", "httptools")):
        try:
            __import__(module)
            parts.append(f"{name} installed (uvicorn picks it)")
        except ImportError:
            parts.append(f"no {name}")
    return "; ".join(parts)


_TOOLKIT_NAMES = (
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "psycopg",
    "langchain-core",
    "fastapi",
    "uvicorn",
    "uvloop",
    "httptools",
)


def toolkit_python(args: argparse.Namespace) -> Path | None:
    """The toolkit's virtualenv's interpreter, with a line saying what it holds; None: none.

    Raises:
        SystemExit: It is missing and `--require-peers` was given.
    """
    python = Path(args.toolkit_python or os.environ.get("PARLEY_BENCH_TOOLKIT_PYTHON") or "")
    # Absolute (not resolved: a virtualenv's python is a symlink that must stay one): the
    # toolkit's processes start in other folders.
    python = (python if str(python) not in ("", ".") else TOOLKIT_PYTHON).absolute()
    if not python.exists():
        note = (
            f"agent-service-toolkit skipped: no {python} (make it with "
            "`bash benchmarks/setup.sh --toolkit .venv-bench`, or pass --toolkit-python)"
        )
        if args.require_peers:
            raise SystemExit(note)
        print(f"({note})")
        return None
    ask = f"import _serve; print(_serve.versions({_TOOLKIT_NAMES!r}))"
    versions = subprocess.run(
        [str(python), "-c", ask], capture_output=True, text=True, check=True, cwd=HERE
    ).stdout.strip()
    commit_file = python.parent.parent / "agent-service-toolkit" / "COMMIT"
    commit = commit_file.read_text().strip()[:12] if commit_file.exists() else "?"
    print(
        f"agent-service-toolkit {commit} (its `{TOOLKIT_AGENT}` agent, its fake model, "
        "LangGraph's AsyncSqliteSaver, and on PostgreSQL its AsyncPostgresSaver on psycopg "
        f"pools of {os.environ.get('POSTGRES_MAX_CONNECTIONS_PER_POOL', TOOLKIT_PG_POOL)}; "
        f"python {_python_version(python)}): {versions}"
    )
    return python


def _python_version(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter rows, a shorter ramp")
    parser.add_argument("--postgres-url", help="a PostgreSQL server to use (else a throwaway one)")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite and the peers only")
    parser.add_argument(
        "--toolkit-python",
        help="agent-service-toolkit's virtualenv's python (default .venv-bench/toolkit/bin/python)",
    )
    parser.add_argument(
        "--require-peers", action="store_true", help="exit 1 when the toolkit is missing"
    )
    parser.add_argument(
        "--turns", type=int, default=1, help="questions per thread before a new one (default 1)"
    )
    parser.add_argument(
        "--invoke-only", action="store_true", help="the /invoke rows only (no streams, no memory)"
    )
    parser.add_argument("--serve", choices=["parley", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--hold", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--stream-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.database_url, args.stream_delay)
        return 0
    if args.hold:
        hold(args.hold[0], int(args.hold[1]))
        return 0
    raise_file_limit()
    settings = dataclasses.replace(QUICK if args.quick else DEFAULT, turns=max(1, args.turns))
    started = time.perf_counter()
    print(f"{_machine()}; load average {_load_average()} (1, 5, 15 min) at the start")
    print(_versions())
    print(
        "servers: uvicorn on 127.0.0.1, one worker process, logging as their commands do (an "
        "access line a request: uvicorn's before the answer, parley's app's after it); "
        f"parley's: {_server_stack()}"
    )
    toolkit = toolkit_python(args)
    print(
        "caveats: server and load generator share the machine's cores (the CPU lines say who "
        "used what); the load generator is one Python process (httpx), which saturates a core "
        "before a faster server would; the model is scripted and answers at once, so these "
        "are the service's own costs, which a real model's latency hides per request but not "
        "in a busy service\n"
    )
    with tempfile.TemporaryDirectory(prefix="parley-bench-") as tmp, postgres(args) as pg:
        databases = {"sqlite": f"sqlite+aiosqlite:///{tmp}/parley.db"}
        if pg is not None:
            pg_url, where = pg
            databases["postgres"] = pg_url
            print(f"PostgreSQL {_postgres_about(pg_url)}: {where}")
        print(
            "SQLite: a file in a temp dir, WAL, synchronous=NORMAL; PostgreSQL: asyncpg, "
            "each run's thread lock an advisory lock, all of a process's on one connection\n"
        )
        logs = Path(tmp)
        with contextlib.ExitStack() as stack:
            servers = {
                label: stack.enter_context(
                    Server("parley", url, settings, log=logs / f"{label}.log")
                )
                for label, url in databases.items()
            }
            if toolkit is not None:
                checkpoints = logs / "toolkit.db"
                server = Server.toolkit(toolkit, checkpoints, settings, logs / "toolkit.log")
                servers["toolkit"] = stack.enter_context(server)
                if pg is not None:
                    url = stack.enter_context(database_beside(pg[0]))
                    server = Server.toolkit(toolkit, url, settings, logs / "toolkit-pg.log")
                    servers["toolkit-pg"] = stack.enter_context(server)
            servers["bare"] = stack.enter_context(
                Server("bare", "", settings, log=logs / "bare.log")
            )
            rows = asyncio.run(invoke_figures(servers, settings))
            report_invoke(rows, list(servers), settings)
            for label in databases if not args.invoke_only else ():
                levels = asyncio.run(stream_figures(servers[label], settings))
                report_streams(label, levels, settings)
        checked = list(servers.items())
        if not args.invoke_only:
            sqlite_url = f"sqlite+aiosqlite:///{tmp}/memory.db"
            with Server("parley", sqlite_url, settings, log=logs / "memory.log") as fresh:
                idle, busy = asyncio.run(memory_per_stream(fresh, settings.memory_streams))
            report_memory(idle, busy, settings.memory_streams)
            checked.append(("memory", fresh))
        for label, server in checked:
            count, last = server.errors_logged()
            if count:
                print(f"the {label} server answered {count} requests with a 500; the first: {last}")
    print(f"({time.perf_counter() - started:.0f} s; load average {_load_average()} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
