"""One session of the code interpreter cannot touch another's processes, in every sandbox mode.

Alice's code knows the pid of bob's worker (its host pid: the worst case, as if it had
guessed it) and tries to change bob's memory limit, priority, CPUs, scheduling and I/O
priority, and to stop it. Each try must fail, and bob's worker must be as it was: its limits
and nice value unchanged, its next cell able to use its memory. Where parley runs as root
each session has a uid of its own (`_uids`): kept across restarts, never shared by two live
sessions, moved (files and all) when a process already runs as it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter
from parley.tools.builtin._uids import DEFAULT_LOCK_DIR, UidRange
from parley.tools.builtin.sandbox import SANDBOX_USER, SandboxMode, drops_root
from tests._requires import unavailable
from tests.tools._sandbox_modes import ALL_MODES, make, require_mode

pytestmark = pytest.mark.timeout(120)

ALICE = RunContext.detached(thread_id="notes", user_id="alice")
BOB = RunContext.detached(thread_id="notes", user_id="bob")
CAROL = RunContext.detached(thread_id="notes", user_id="carol")

ATTACK = """
import ctypes, json, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
results = {{}}
def attempt(name, call):
    try:
        call()
        results[name] = "DONE"
    except OSError as exc:
        results[name] = type(exc).__name__
def native(result):
    if result < 0:
        raise OSError(ctypes.get_errno(), "native call")
B = {pid}
attempt("prlimit", lambda: resource.prlimit(B, resource.RLIMIT_AS, (1 << 25, 1 << 25)))
limit = (ctypes.c_ulong * 2)(1 << 25, 1 << 25)
attempt("native prlimit", lambda: native(libc.prlimit(B, 9, limit, None)))  # RLIMIT_AS
attempt("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, B, 19))
attempt("sched_setaffinity", lambda: os.sched_setaffinity(B, {{0}}))
attempt("sched_setscheduler", lambda: os.sched_setscheduler(B, os.SCHED_IDLE, os.sched_param(0)))
attempt("sched_setparam", lambda: os.sched_setparam(B, os.sched_param(0)))
attempt("ioprio_set", lambda: native(libc.syscall({ioprio_set}, 1, B, 3 << 13)))  # IDLE class
attempt("SIGSTOP", lambda: os.kill(B, signal.SIGSTOP))
print(json.dumps(results))
"""
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}


@pytest.fixture(params=ALL_MODES)
def mode(request: pytest.FixtureRequest) -> SandboxMode:
    """Each mode with Landlock and seccomp (the `ci` of tests/tools/conftest.py runs in it)."""
    return require_mode(request.param, kernel=True)


def worker_pid(work_dir: Path) -> int:
    """The host pid of the Python worker running in `work_dir` (under any sandbox).

    Where the worker forks the process that runs the code, that child (the deepest match).
    """
    found: dict[int, int] = {}  # pid -> parent
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            if argv[0] == sys.executable.encode() and os.readlink(f"/proc/{name}/cwd") == str(
                work_dir
            ):
                stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
                found[int(name)] = int(stat[1])
        except (OSError, ValueError, IndexError):
            continue
    deepest = [pid for pid in found if pid not in found.values()]
    assert len(deepest) == 1, f"workers in {work_dir}: {found}"
    return deepest[0]


def state_of(pid: int) -> tuple[str, list[str], set[int]]:
    """What the attack would change: limits, priority, nice, policy, the CPUs."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    scheduling = [stat[15], stat[16], stat[37], stat[38]]  # priority nice rt_priority policy
    return Path(f"/proc/{pid}/limits").read_text(), scheduling, os.sched_getaffinity(pid)


def uid_of(ci: CodeInterpreter, ctx: RunContext[None]) -> int:
    result = ci.run_code("import os\nos.getuid()", ctx=ctx).result
    assert result is not None
    return int(result)


def require_root() -> None:
    if not drops_root():
        unavailable("a uid per session needs parley to run as root", "run the tests as root")


def test_one_sessions_code_cannot_change_stop_or_limit_anothers_worker(
    ci: CodeInterpreter,
) -> None:
    bob = ci.run_code("kept = 'bob'", ctx=BOB)
    assert bob.error is None, bob.error
    pid = worker_pid(ci.workspace.for_context(BOB))
    before = state_of(pid)
    machine = os.uname().machine
    code = ATTACK.format(pid=pid, ioprio_set=IOPRIO_SET.get(machine, -1))
    run = ci.run_code(textwrap.dedent(code), ctx=ALICE)
    assert run.error is None, run.error
    results = json.loads(run.stdout)
    assert len(results) == 8
    assert [name for name, result in results.items() if result == "DONE"] == []
    assert state_of(pid) == before
    after = ci.run_code("len(bytearray(200 * 1024 * 1024)), kept", ctx=BOB)
    assert after.error is None, after.error
    assert after.result == "(209715200, 'bob')"
    assert after.notice is None  # the same worker, never stopped


@pytest.mark.parametrize("name", ["bwrap", "unshare"])
def test_another_sessions_processes_are_not_there_to_see(name: SandboxMode, tmp_path: Path) -> None:
    with make(require_mode(name, kernel=True), tmp_path / "ws") as ci:
        ci.run_code("1", ctx=BOB)
        pid = worker_pid(ci.workspace.for_context(BOB))
        run = ci.run_code(f"import os\nos.path.exists('/proc/{pid}'), os.getpid()", ctx=ALICE)
        assert run.error is None, run.error
        seen, own = (run.result or "").strip("()").split(", ")
        assert seen == "False"
        assert int(own) < 10  # a PID namespace of its own: the worker is among its first


def test_each_session_runs_as_a_uid_of_its_own_kept_across_restarts(
    mode: SandboxMode, tmp_path: Path
) -> None:
    require_root()
    with make(mode, tmp_path / "ws") as ci:
        alice, bob = uid_of(ci, ALICE), uid_of(ci, BOB)
        assert alice != bob
        assert alice in UidRange()
        assert bob in UidRange()
        work_dir = ci.workspace.for_context(ALICE)
        assert work_dir.stat().st_uid == alice
        ci.run_code("open('mine.txt', 'w').write('x')", ctx=ALICE)
        assert (work_dir / "mine.txt").stat().st_uid == alice
        crashed = ci.run_code("import os\nos._exit(3)", ctx=ALICE)
        assert crashed.error is not None
        assert uid_of(ci, ALICE) == alice
    with make(mode, tmp_path / "ws") as again:  # another interpreter, as after a restart
        assert uid_of(again, ALICE) == alice
        assert uid_of(again, BOB) == bob


def test_without_session_uids_every_worker_runs_as_nobody(tmp_path: Path) -> None:
    require_root()
    with make(require_mode("rlimits"), tmp_path / "ws", session_uids=False) as ci:
        assert uid_of(ci, ALICE) == uid_of(ci, BOB) == SANDBOX_USER


def small_range(size: int) -> list[int]:
    """A range of its own for one test (other tests' uids, other runs' locks stay apart)."""
    return [random.randrange(100_000_000, 1_000_000_000), size]


def test_two_live_sessions_never_share_a_uid(tmp_path: Path) -> None:
    require_root()
    first, size = small_range(2)
    with make(require_mode("rlimits"), tmp_path / "ws", session_uids=[first, size]) as ci:
        alice, bob = uid_of(ci, ALICE), uid_of(ci, BOB)
        assert {alice, bob} == {first, first + 1}
        refused = ci.run_code("1", ctx=CAROL)
        assert refused.error is not None
        assert "no uid is free" in refused.error
        asyncio.run(ci.end_session("alice", "notes"))
        assert uid_of(ci, CAROL) == alice
        assert uid_of(ci, BOB) == bob  # bob kept his


def test_a_session_whose_uid_runs_a_process_moves_to_a_free_one_with_its_files(
    tmp_path: Path,
) -> None:
    require_root()
    uids = small_range(8)
    host = tmp_path / "host.txt"
    host.write_text("the host's")
    planted = (
        "import os\n"
        "open('kept.txt', 'w').write('kept')\n"
        "os.mkdir('sub')\n"
        "open('sub/f.txt', 'w').write('1')\n"
        f"os.symlink({str(host)!r}, 'link')"
    )
    with make(require_mode("rlimits"), tmp_path / "ws", session_uids=uids) as ci:
        taken = uid_of(ci, ALICE)
        assert ci.run_code(planted, ctx=ALICE).error is None
        work_dir = ci.workspace.for_context(ALICE)
    stray = subprocess.Popen(["sleep", "60"], user=taken, group=taken)
    try:
        with make("rlimits", tmp_path / "ws", session_uids=uids) as ci:
            moved = uid_of(ci, ALICE)
            run = ci.run_code(
                "open('kept.txt', 'a').write('+')\nopen('sub/f.txt').read()", ctx=ALICE
            )
    finally:
        stray.kill()
        stray.wait()
    assert moved != taken
    assert moved in UidRange(*uids)
    assert run.error is None, run.error
    assert run.result == "'1'"
    for path in (work_dir, work_dir / "kept.txt", work_dir / "sub", work_dir / "sub" / "f.txt"):
        assert path.lstat().st_uid == moved, path
    assert (work_dir / "link").lstat().st_uid == moved  # the link itself, never its target
    assert host.stat().st_uid == 0
    assert host.read_text() == "the host's"


HOLD_LOCK = """
import fcntl, os, time
fd = os.open({path!r}, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def test_a_uids_lock_file_lives_as_long_as_its_session(tmp_path: Path) -> None:
    require_root()
    first, size = small_range(3)
    lock = {uid: DEFAULT_LOCK_DIR / str(uid) for uid in range(first, first + size)}
    DEFAULT_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock[first].touch()  # left by a parley that was killed: no process holds it
    holder = subprocess.Popen(  # another parley process's live session holds this one
        [sys.executable, "-c", HOLD_LOCK.format(path=str(lock[first + 1]))],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"locked\n"
        with make(require_mode("rlimits"), tmp_path / "ws", session_uids=[first, size]) as ci:
            assert not lock[first].exists()  # removed as the interpreter started
            alice, bob = uid_of(ci, ALICE), uid_of(ci, BOB)
            assert {alice, bob} == {first, first + 2}  # the held uid is passed over
            assert lock[alice].exists()
            assert lock[bob].exists()
            asyncio.run(ci.end_session("alice", "notes"))
            assert not lock[alice].exists()
            assert lock[bob].exists()
        assert not lock[bob].exists()
        assert lock[first + 1].exists()  # another process's, held: left alone
    finally:
        holder.kill()
        holder.communicate()
        lock[first + 1].unlink(missing_ok=True)
