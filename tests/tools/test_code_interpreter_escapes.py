"""Every way out of the code interpreter's sandbox we know of, tried in every mode.

The world the code runs in is a served agent's: a project directory that is the service's
working directory, holding `parley.db` (every user's threads) and `.env` (its keys), with
the workspace inside it (`./workspace`, Qwen-Agent's layout); bob's thread has a secret file;
a process of the service's user runs beside it with a key in its environment. Alice's code
then tries to read those, write outside her directory, reach the network, start processes
(also through `ctypes`, which raises no audit event for what it calls), exhaust processes,
threads and memory, and signal the service's process. Each attempt must fail, and the test
checks the result, not the message: the secret did not come out, the file was not written,
the server saw no connection, the victim still runs.

Modes: `bwrap`, `unshare` and `rlimits` as this machine runs them (Landlock and seccomp
under the weak ones), and `rlimits-guard`: `rlimits` on a kernel without Landlock or
seccomp, where only the worker's Python-level guard stands.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import subprocess
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter, Execution, SandboxLimits
from parley.tools.builtin import _process as worker_process
from parley.tools.builtin.sandbox import SandboxMode
from tests.tools._sandbox_modes import make, require_mode, thread_bomb

pytestmark = pytest.mark.timeout(120)

MODES = ("bwrap", "unshare", "rlimits", "rlimits-guard")
# Address space enough for glibc's per-thread malloc arenas (64 MiB each): the thread bomb
# must meet RLIMIT_NPROC, not RLIMIT_AS.
LIMITS = SandboxLimits(wall_time=30, cpu_time=20, memory_bytes=2 * 1024**3, processes=24)
BOB = RunContext.detached(thread_id="B", user_id="bob")


@dataclass
class World:
    """The service's machine as alice's code finds it."""

    mode: SandboxMode
    project: Path
    ci: CodeInterpreter
    victim: subprocess.Popen[bytes]
    secrets: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    @property
    def db(self) -> Path:
        return self.project / "parley.db"

    @property
    def bob_dir(self) -> Path:
        return self.ci.work_dir("B", user_id="bob")

    def run(self, code: str) -> Execution:
        """Alice's code, each time in a thread of its own (a clean interpreter)."""
        self.runs += 1
        ctx = RunContext.detached(thread_id=f"A{self.runs}", user_id="alice")
        return self.ci.run_code(textwrap.dedent(code), ctx=ctx)

    def fingerprint(self) -> dict[str, str]:
        """What must not change: the project's files and bob's."""
        files = [self.db, self.project / ".env", self.bob_dir / "secret.txt"]
        return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _project(root: Path, secrets: dict[str, str]) -> Path:
    project = root / "project"
    project.mkdir()
    with sqlite3.connect(project / "parley.db") as db:
        db.execute("create table api_keys (user text, hash text)")
        db.execute("insert into api_keys values ('alice', ?)", (secrets["db"],))
    db.close()
    (project / ".env").write_text(f"OPENAI_API_KEY={secrets['env']}\n")
    return project


@pytest.fixture(scope="module", params=MODES)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    name: str = request.param
    guard = name == "rlimits-guard"
    mode = require_mode("rlimits" if guard else name, kernel=not guard)
    secrets = {k: f"{k}-secret-{uuid.uuid4().hex}" for k in ("db", "env", "bob", "process")}
    project = _project(tmp_path_factory.mktemp(name), secrets)
    victim = subprocess.Popen(
        ["sleep", "600"], cwd=project, env={"PATH": os.environ["PATH"], "KEY": secrets["process"]}
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        if guard:
            patch.setattr(worker_process, "kernel_confinement", lambda: False)
        ci = make(mode, project / "workspace", LIMITS, max_sessions=4)
        try:
            written = ci.run_code(f"open('secret.txt', 'w').write({secrets['bob']!r})", ctx=BOB)
            assert written.error is None, written.error
            yield World(mode, project, ci, victim, secrets)
        finally:
            ci.close()
            victim.kill()
            victim.wait()


def attempt(body: str) -> str:
    """Code that tries `body` and prints `refused: ...` if it raised."""
    return (
        "try:\n"
        + textwrap.indent(textwrap.dedent(body).strip(), "    ")
        + "\n    print('NOT REFUSED')\n"
        "except BaseException as exc:\n"
        "    print('refused:', type(exc).__name__, exc)\n"
    )


def assert_nothing_leaked(world: World, run: Execution) -> None:
    seen = "\n".join(filter(None, (run.stdout, run.stderr, run.error, run.result, run.notice)))
    for name, secret in world.secrets.items():
        assert secret not in seen, f"the {name} secret came out"
    assert "root:x:0:0" not in seen  # /etc/passwd; /etc/shadow's `root:` lines too


def assert_refused(world: World, run: Execution) -> None:
    assert_nothing_leaked(world, run)
    assert "refused:" in run.stdout, (run.stdout, run.error)
    assert "NOT REFUSED" not in run.stdout


# -- reading what is not the conversation's ---------------------------------------------------

READS: dict[str, Callable[[World], str]] = {
    "the database": lambda w: f"print(open({str(w.db)!r}, 'rb').read())",
    "the database, relative to the work directory": lambda w: (
        "print(open('../../../parley.db', 'rb').read())"
    ),
    "the database through sqlite3": lambda w: (
        f"import sqlite3\nprint(sqlite3.connect({str(w.db)!r}).execute("
        "'select * from api_keys').fetchall())"
    ),
    ".env": lambda w: f"print(open({str(w.project / '.env')!r}).read())",
    "another session's file": lambda w: f"print(open({str(w.bob_dir / 'secret.txt')!r}).read())",
    "another session's file, relative": lambda w: "print(open('../../bob/B/secret.txt').read())",
    "/etc/shadow": lambda w: "print(open('/etc/shadow').read())",
    "/etc/passwd": lambda w: "print(open('/etc/passwd').read())",
    "a symlink to the database": lambda w: (
        f"import os\nos.symlink({str(w.db)!r}, 'db-link')\nprint(open('db-link', 'rb').read())"
    ),
    "a hard link to the database": lambda w: (
        f"import os\nos.link({str(w.db)!r}, 'db-hard')\nprint(open('db-hard', 'rb').read())"
    ),
    "the database through /proc/self/root": lambda w: (
        f"print(open('/proc/self/root{w.db}', 'rb').read())"
    ),
    "the database through a process's cwd": lambda w: (
        f"print(open('/proc/{w.victim.pid}/cwd/parley.db', 'rb').read())"
    ),
    "a process's environment": lambda w: f"print(open('/proc/{w.victim.pid}/environ').read())",
    "the database through a dir_fd": lambda w: (
        f"import os\nfd = os.open({str(w.project)!r}, os.O_PATH)\n"
        "print(os.read(os.open('parley.db', os.O_RDONLY, dir_fd=fd), 100000))"
    ),
    "the database through ctypes' open": lambda w: (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = libc.open({str(w.db).encode()!r}, 0)\n"
        "assert fd >= 0, ctypes.get_errno()\n"
        "buffer = ctypes.create_string_buffer(100000)\n"
        "print(buffer.raw[: libc.read(fd, buffer, 100000)])"
    ),
}


@pytest.mark.parametrize("target", READS)
def test_reading_outside_the_conversation_fails(world: World, target: str) -> None:
    run = world.run(attempt(READS[target](world)))
    assert_refused(world, run)


def test_listing_the_project_or_another_session_shows_nothing(world: World) -> None:
    run = world.run(
        f"""
        import os
        for folder in ({str(world.project)!r}, {str(world.bob_dir)!r}, '../../bob/B', '../..'):
            try:
                print(folder, sorted(os.listdir(folder)))
            except OSError as exc:
                print(folder, 'refused:', exc)
        """
    )
    assert run.error is None, run.error
    for name in ("parley.db", ".env", "secret.txt", "'bob'"):
        assert name not in run.stdout


def test_its_own_files_folders_and_python_libraries_still_work(world: World) -> None:
    run = world.run(
        """
        import json, os, shutil
        import numpy
        os.makedirs('a/b')
        open('a/b/f.json', 'w').write(json.dumps({'a': 1}))
        os.rename('a/b/f.json', 'a/g.json')
        os.symlink('g.json', 'a/link')
        shutil.copytree('a', 'c', symlinks=True)
        shutil.rmtree('a')
        print(json.load(open('c/link')), sorted(os.listdir('c')), numpy.arange(4).sum())
        """
    )
    assert run.error is None, run.error
    assert run.stdout == "{'a': 1} ['b', 'g.json', 'link'] 6\n"


# -- writing outside the work directory ---------------------------------------------------------

WRITES: dict[str, Callable[[World, str], str]] = {
    "open": lambda w, t: f"open({str(w.project / t)!r}, 'w').write('x')",
    "open, relative": lambda w, t: f"open('../../../{t}', 'w').write('x')",
    "/tmp": lambda w, t: f"open('/tmp/{t}', 'w').write('x')",
    "os.open with a dir_fd": lambda w, t: (
        f"import os\nfd = os.open({str(w.project)!r}, os.O_PATH)\n"
        f"os.write(os.open({t!r}, os.O_CREAT | os.O_WRONLY, dir_fd=fd), b'x')"
    ),
    "open with an opener using a dir_fd": lambda w, t: (
        f"import os\nfd = os.open({str(w.project)!r}, os.O_PATH)\n"
        f"open({t!r}, 'w', opener=lambda p, f: os.open(p, f, dir_fd=fd)).write('x')"
    ),
    "os.rename out": lambda w, t: (
        f"import os\nopen('made', 'w').write('x')\nos.rename('made', {str(w.project / t)!r})"
    ),
    "os.rename to a dir_fd": lambda w, t: (
        f"import os\nfd = os.open({str(w.project)!r}, os.O_PATH)\nopen('made', 'w').write('x')\n"
        f"os.rename('made', {t!r}, dst_dir_fd=fd)"
    ),
    "os.mkdir with a dir_fd": lambda w, t: (
        f"import os\nfd = os.open({str(w.project)!r}, os.O_PATH)\nos.mkdir({t!r}, dir_fd=fd)"
    ),
    "a symlinked directory": lambda w, t: (
        f"import os\nos.symlink({str(w.project)!r}, 'proj')\nopen('proj/{t}', 'w').write('x')"
    ),
    "another session's directory": lambda w, t: f"open({str(w.bob_dir / t)!r}, 'w').write('x')",
    "ctypes' open": lambda w, t: (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = libc.open({str(w.project / t).encode()!r}, 0o101, 0o644)\n"
        "assert fd >= 0, ctypes.get_errno()"
    ),
}


@pytest.mark.parametrize("route", WRITES)
def test_writing_outside_the_work_directory_fails(world: World, route: str) -> None:
    before = world.fingerprint()
    target = f"pwned-{uuid.uuid4().hex[:8]}"
    run = world.run(attempt(WRITES[route](world, target)))
    assert_refused(world, run)
    for folder in (world.project, world.bob_dir, Path("/tmp")):
        assert not (folder / target).exists()
    assert world.fingerprint() == before


@pytest.mark.parametrize(
    "change",
    [
        "import os\nos.truncate({db!r}, 0)",
        "import os\nos.remove({db!r})",
        "import os\nos.chmod({db!r}, 0o777)",
        "import shutil\nshutil.rmtree({bob!r})",
    ],
    ids=["truncate", "remove", "chmod", "rmtree"],
)
def test_changing_the_database_or_another_session_fails(world: World, change: str) -> None:
    before = world.fingerprint()
    mode_before = world.db.stat().st_mode
    run = world.run(attempt(change.format(db=str(world.db), bob=str(world.bob_dir))))
    assert_refused(world, run)
    assert world.fingerprint() == before
    assert world.db.stat().st_mode == mode_before


# -- the network ----------------------------------------------------------------------------------


TCP_CONNECTS = {
    "socket": "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)",
    "ctypes": """
        import ctypes, socket, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)
        assert fd >= 0, ('socket', ctypes.get_errno())
        address = struct.pack('=H', 2) + struct.pack('!H4s8x', {port},
                                                     socket.inet_aton('127.0.0.1'))
        assert libc.connect(fd, address, 16) == 0, ('connect', ctypes.get_errno())
        """,
}
"""A TCP connection to a port of this machine: through Python's socket module, and straight
through libc's calls (what no check in Python would see)."""


@pytest.mark.parametrize("how", sorted(TCP_CONNECTS))
def test_a_tcp_connection_to_this_machine_fails(world: World, how: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        run = world.run(attempt(TCP_CONNECTS[how].format(port=port)))
        assert_refused(world, run)
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.accept()


def test_a_datagram_to_this_machine_never_arrives(world: World) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        run = world.run(
            attempt(
                "import socket\n"
                f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'hi', "
                f"('127.0.0.1', {port}))"
            )
        )
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.recv(10)
        # Under bubblewrap the datagram leaves into the sandbox's own loopback: not refused,
        # but it never reaches the machine's.
        if world.mode != "bwrap":
            assert_refused(world, run)


def test_a_unix_socket_of_the_machine_cannot_be_reached(world: World, tmp_path: Path) -> None:
    path = world.project / f"svc-{uuid.uuid4().hex[:6]}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        run = world.run(
            attempt(f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})")
        )
        assert_refused(world, run)
        server.settimeout(0.3)
        with pytest.raises(TimeoutError):
            server.accept()
    path.unlink()


@pytest.mark.parametrize("name", ["localhost", "example.com"])
def test_name_lookups_fail(world: World, name: str) -> None:
    # `localhost` resolves from /etc/hosts on any machine: a lookup that works unconfined.
    run = world.run(attempt(f"import socket\nprint(socket.getaddrinfo({name!r}, 443))"))
    assert_refused(world, run)


# -- processes ----------------------------------------------------------------------------------

PROCESSES: dict[str, Callable[[World, str], str]] = {
    "subprocess": lambda w, m: (
        f"import subprocess\nsubprocess.run(['sh', '-c', 'touch {m}; cat {w.db}'], check=True)"
    ),
    "os.system": lambda w, m: f"import os\nassert os.system('touch {m}; cat {w.db}') == 0",
    "os.fork": lambda w, m: (
        f"import os\npid = os.fork()\nif pid == 0:\n    open({m!r}, 'w').close()\n"
        "    os._exit(0)\nos.waitpid(pid, 0)"
    ),
    "os.posix_spawn": lambda w, m: (
        f"import os\nos.waitpid(os.posix_spawn('/usr/bin/touch', ['touch', {m!r}], {{}}), 0)"
    ),
    "_posixsubprocess.fork_exec": lambda w, m: (
        "import _posixsubprocess, os\n"
        "r, w = os.pipe()\n"
        "_posixsubprocess.fork_exec([b'/usr/bin/touch', "
        f"{m.encode()!r}], [b'/usr/bin/touch'], True, (w,), None, None, -1, -1, -1, -1, -1, "
        "-1, r, w, True, False, -1, None, None, None, -1, None, False)"
    ),
    "ctypes system": lambda w, m: (
        "import ctypes\nlibc = ctypes.CDLL(None)\n"
        f"assert libc.system(b'touch {m}; cat {w.db}') == 0"
    ),
    "ctypes fork": lambda w, m: (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\npid = libc.fork()\n"
        f"if pid == 0:\n    open({m!r}, 'w').close()\n    libc._exit(0)\n"
        "assert pid > 0, ctypes.get_errno()\nos.waitpid(pid, 0)"
    ),
    "ctypes execve": lambda w, m: (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"argv = (ctypes.c_char_p * 4)(b'/bin/sh', b'-c', b'touch {m}; cat {w.db}', None)\n"
        "libc.execve(b'/bin/sh', argv, (ctypes.c_char_p * 1)(None))\n"
        "raise OSError(ctypes.get_errno(), 'execve failed')"
    ),
}


@pytest.mark.parametrize("route", PROCESSES)
def test_starting_a_process_fails_outside_bubblewrap_and_stays_inside_it(
    world: World, route: str
) -> None:
    marker = f"started-{uuid.uuid4().hex[:8]}"
    run = world.run(attempt(PROCESSES[route](world, marker)))
    assert_nothing_leaked(world, run)
    started = list((world.ci.root / "alice").glob(f"*/{marker}"))
    if world.mode == "bwrap":
        # Children run, inside the same sandbox: the database is not there to read.
        assert run.error is None or "stopped" in run.error or "exited" in run.error
    else:
        assert_refused(world, run)
        assert started == []


def test_a_fork_bomb_is_stopped_and_the_machine_is_unharmed(world: World) -> None:
    # Bounded even if nothing stopped it: at most 500 children with 3 descendants each,
    # every one gone within seconds. Under bubblewrap RLIMIT_NPROC must stop it long before.
    run = world.run(
        """
        import os, time
        made, failure = 0, None
        while made < 500:
            try:
                pid = os.fork()
            except OSError as exc:
                failure = exc
                break
            if pid == 0:
                for _ in range(2):
                    try:
                        os.fork()
                    except OSError:
                        break
                time.sleep(3)
                os._exit(0)
            made += 1
        print('forked', made, 'then refused:', type(failure).__name__ if failure else None)
        """
    )
    assert_nothing_leaked(world, run)
    assert "then refused: " in run.stdout, (run.stdout, run.error)
    assert "then refused: None" not in run.stdout
    forked = int(run.stdout.split()[1])
    assert forked < 500
    if world.mode != "bwrap":
        assert forked == 0
    assert subprocess.run(["true"], check=False).returncode == 0
    assert world.ci.run_code("6 * 7", ctx=BOB).result == "42"


def test_a_thread_bomb_stops_at_the_process_limit(world: World) -> None:
    run = world.run(thread_bomb(cap=2000, stack_kib=64))
    assert run.error is None, run.error
    # RLIMIT_NPROC stopped it: the 2,000 cap (or RLIMIT_AS, ~12,000 such threads) did not.
    assert run.result is not None
    assert int(run.result) < 2000


def test_a_memory_hog_gets_memory_error_and_the_session_survives(world: World) -> None:
    ctx = RunContext.detached(thread_id="memory", user_id="alice")
    world.ci.run_code("kept = 7", ctx=ctx)
    run = world.ci.run_code("hog = bytearray(4 * 1024 ** 3)", ctx=ctx)
    assert "MemoryError" in str(run.error)
    assert world.ci.run_code("kept", ctx=ctx).result == "7"


@pytest.mark.parametrize(
    "how",
    [
        "import os, signal\nos.kill({pid}, signal.SIGKILL)",
        "import ctypes\nassert ctypes.CDLL(None, use_errno=True).kill({pid}, 9) == 0, "
        "ctypes.get_errno()",
    ],
    ids=["os.kill", "ctypes kill"],
)
def test_signalling_a_process_of_the_machine_fails(world: World, how: str) -> None:
    run = world.run(attempt(how.format(pid=world.victim.pid)))
    assert_refused(world, run)
    assert world.victim.poll() is None  # still running
