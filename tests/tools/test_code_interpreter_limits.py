"""Limits per code-interpreter session, not per process: memory, processes, disk.

Each attack of issue 18 is tried in the sandbox modes where it applies and with each way the
session's memory and processes are capped: a cgroup per session (this machine: cgroup v1,
as root) and the watchdog (`session_limits="watchdog"`). Children that each stay under
`RLIMIT_AS` but hold more together, memory files (`memfd`) that no address space counts,
threads past the session's share, files past the disk quota (written, copied in, or deleted
and held open): each must be stopped or refused, with a result that says which limit, and
what another session uses must not count against this one. No cgroup may be left behind.
"""

from __future__ import annotations

import asyncio
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from parley.errors import ConfigurationError
from parley.tools import RunContext
from parley.tools.builtin import CodeInterpreter, SandboxLimits, _cgroup
from parley.tools.builtin._limits import Enforcement, check_disk_quota
from parley.tools.builtin._usage import ENTRY_BYTES, disk_usage
from parley.tools.builtin.sandbox import SandboxMode, drops_root
from tests._requires import unavailable
from tests.tools._sandbox_modes import ALL_MODES, make, require_mode, thread_bomb, wait_until

pytestmark = pytest.mark.timeout(180)

MiB = 1024 * 1024
ALICE = RunContext.detached(thread_id="notes", user_id="alice")
BOB = RunContext.detached(thread_id="notes", user_id="bob")
MEMORY = SandboxLimits(wall_time=60, cpu_time=30, memory_bytes=256 * MiB)
DISK = SandboxLimits(wall_time=60, cpu_time=30, disk_bytes=8 * MiB, file_size_bytes=4 * MiB)
BACKENDS = ("cgroup", "watchdog")


def our_cgroups() -> set[Path]:
    """This process's interpreter groups (`parley-<pid>-<n>`) in the v1 hierarchies."""
    try:
        parents = _cgroup._v1_dirs()
    except (_cgroup.CgroupUnavailableError, OSError):
        return set()
    return {path for parent in parents for path in parent.glob(f"parley-{os.getpid()}-*")}


@pytest.fixture(autouse=True)
def no_cgroup_left_behind() -> Iterator[None]:
    before = our_cgroups()
    yield
    assert our_cgroups() <= before


def limits_cfg(backend: str) -> dict[str, Any]:
    """The interpreter's configuration for a backend, if this machine has it."""
    if backend == "cgroup":
        try:
            Enforcement("cgroup").close()
        except ConfigurationError as exc:
            unavailable(
                f"no cgroup for sessions here ({exc})",
                "run as root where cgroup v1 memory and pids hierarchies, or a delegated "
                "cgroup v2, are writable",
            )
    return {"session_limits": backend}


def run(ci: CodeInterpreter, code: str, ctx: RunContext[None] = ALICE, **kwargs: Any) -> Any:
    return ci.run_code(textwrap.dedent(code), ctx=ctx, **kwargs)


# -- memory, all the session's processes together -------------------------------------------

CHILDREN = """
import subprocess, sys
hold = (
    "x = bytearray(96 * 1024 * 1024)\\n"
    "x[::4096] = b'x' * len(x[::4096])\\n"
    "print('held', flush=True)\\n"
    "import time\\n"
    "time.sleep(30)"
)
children = [subprocess.Popen([sys.executable, '-c', hold]) for _ in range(4)]
print('exit codes', [child.wait() for child in children])
"""
MEMORY_FILES = """
import os, time
print('started', flush=True)
files = []
for number in range(8):
    fd = os.memfd_create(f'hold{number}')
    for _ in range(48):
        os.write(fd, b'x' * (1024 * 1024))
    files.append(fd)
print('held', len(files) * 48, 'MiB', flush=True)
time.sleep(30)
print('not stopped')
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_children_holding_memory_together_are_stopped(backend: str, tmp_path: Path) -> None:
    # Four children of 96 MiB each: under RLIMIT_AS (256 MiB) each, 384 MiB together.
    mode = require_mode("bwrap")
    with make(mode, tmp_path, MEMORY, **limits_cfg(backend)) as ci:
        stopped = run(ci, CHILDREN)
        assert stopped.error is not None, stopped.stdout
        assert stopped.error.startswith("Stopped: the conversation's processes together used")
        assert "memory than its limit" in stopped.error
        assert "256 MiB" in stopped.error
        after = run(ci, "print('back')")
        assert after.stdout == "back\n"
        assert after.notice is not None
        assert "more memory than its limit" in after.notice


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_memory_files_past_the_session_limit_are_stopped(
    name: SandboxMode, backend: str, tmp_path: Path
) -> None:
    # memfd pages belong to no address space: 384 MiB of them passed RLIMIT_AS unseen.
    with make(require_mode(name, kernel=True), tmp_path, MEMORY, **limits_cfg(backend)) as ci:
        stopped = run(ci, MEMORY_FILES)
        assert "not stopped" not in stopped.stdout
        assert stopped.stdout.startswith("started\n")  # the output it made is kept
        assert stopped.error is not None
        assert "more memory than its limit (" in stopped.error


@pytest.mark.parametrize("name", ALL_MODES)
def test_one_sessions_memory_does_not_count_against_anothers(
    name: SandboxMode, tmp_path: Path
) -> None:
    with make(require_mode(name, kernel=True), tmp_path, MEMORY) as ci:
        assert run(ci, "held = bytearray(160 * 1024 * 1024)", ctx=BOB).error is None
        mine = run(ci, "mine = bytearray(160 * 1024 * 1024)\nlen(mine)")
        assert mine.error is None, mine.error
        assert run(ci, "len(held)", ctx=BOB).result == str(160 * MiB)


# -- processes and threads --------------------------------------------------------------------

HOLD_THREADS = """
import threading
release = threading.Event()
held = [threading.Thread(target=release.wait, daemon=True) for _ in range({count})]
for thread in held:
    thread.start()
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ALL_MODES)
def test_threads_are_counted_per_session(name: SandboxMode, backend: str, tmp_path: Path) -> None:
    if not drops_root():
        unavailable("the process cap per session needs a uid per session (root)", "run as root")
    # Address space for glibc's malloc arena per thread (64 MiB each): RLIMIT_NPROC must stop
    # the bomb, not RLIMIT_AS.
    limits = SandboxLimits(wall_time=60, cpu_time=30, processes=16, memory_bytes=2048 * MiB)
    with make(require_mode(name, kernel=True), tmp_path, limits, **limits_cfg(backend)) as ci:
        assert run(ci, "1").result == "1"  # alice's worker starts before bob's threads
        assert run(ci, HOLD_THREADS.format(count=10), ctx=BOB).error is None
        bomb = run(ci, thread_bomb(cap=100, stack_kib=256))
        assert bomb.error is None, bomb.error
        # Its own 16 but the worker itself: bob's 10 are his, not taken from alice's share.
        assert 12 <= int(bomb.result) <= 16


def test_the_watchdog_stops_a_session_past_its_processes_when_the_uid_is_shared(
    tmp_path: Path,
) -> None:
    # Without a uid per session RLIMIT_NPROC counts every session's threads: alice's was set
    # while bob (of another interpreter, allowed 40) ran 30, so once they end she could start
    # far more than her 8. The watchdog counts hers alone.
    mode = require_mode("rlimits")
    cfg = {**limits_cfg("watchdog"), "session_uids": False}
    many = SandboxLimits(wall_time=60, cpu_time=30, processes=40, memory_bytes=4096 * MiB)
    few = SandboxLimits(wall_time=60, cpu_time=30, processes=8, memory_bytes=2048 * MiB)
    with make(mode, tmp_path / "bob", many, **cfg) as bobs, make(mode, tmp_path, few, **cfg) as ci:
        assert run(bobs, HOLD_THREADS.format(count=30), ctx=BOB).error is None
        assert run(ci, "1").result == "1"
        assert run(bobs, "release.set()\nfor t in held:\n    t.join()", ctx=BOB).error is None
        stopped = run(
            ci,
            """
            import threading, time
            threading.stack_size(256 * 1024)
            release, started = threading.Event(), []
            try:
                while len(started) < 14:
                    thread = threading.Thread(target=release.wait, args=(30,), daemon=True)
                    thread.start()
                    started.append(thread)
            except RuntimeError:
                pass
            print('started', len(started), flush=True)
            time.sleep(30)
            print('not stopped')
            """,
        )
        assert stopped.error is not None, stopped.stdout
        assert "ran more processes and threads than its limit" in stopped.error
        assert "of 8)" in stopped.error


# -- disk -------------------------------------------------------------------------------------

FILL = """
import time
print('started', flush=True)
written = 0
for number in range(6):
    with open(f'part{number}.bin', 'wb') as part:
        part.write(b'x' * (3 * 1024 * 1024))
    written += 1
print('written', written, flush=True)
for _ in range(300):
    time.sleep(0.1)
print('not stopped')
"""
HIDDEN = """
import tempfile, time
held = []
for _ in range(5):
    hidden = tempfile.TemporaryFile(dir='.')  # unlinked at once: no directory shows it
    hidden.write(b'x' * (3 * 1024 * 1024))
    hidden.flush()
    held.append(hidden)
print('holding', len(held) * 3, 'MiB', flush=True)
for _ in range(300):
    time.sleep(0.1)
print('not stopped')
"""


@pytest.mark.parametrize("name", ALL_MODES)
def test_writing_past_the_disk_quota_stops_the_call_and_keeps_the_files(
    name: SandboxMode, tmp_path: Path
) -> None:
    with make(require_mode(name, kernel=True), tmp_path, DISK) as ci:
        stopped = run(ci, FILL)
        assert "not stopped" not in stopped.stdout
        assert stopped.stdout.startswith("started\n")
        assert stopped.error is not None
        assert "passed their disk quota (8 MiB)" in stopped.error
        kept = sorted(p.name for p in ci.workspace.for_context(ALICE).glob("part*.bin"))
        assert len(kept) >= 3  # nothing stored was deleted


@pytest.mark.parametrize("name", ["bwrap", "rlimits"])
def test_deleted_files_held_open_count_against_the_quota(name: SandboxMode, tmp_path: Path) -> None:
    with make(require_mode(name, kernel=True), tmp_path, DISK) as ci:
        stopped = run(ci, HIDDEN)
        assert "not stopped" not in stopped.stdout
        assert stopped.error is not None
        assert "passed their disk quota" in stopped.error


@pytest.mark.parametrize("name", ALL_MODES)
def test_a_file_larger_than_what_remains_of_the_quota_fails(
    name: SandboxMode, tmp_path: Path
) -> None:
    limits = SandboxLimits(disk_bytes=8 * MiB, file_size_bytes=16 * MiB)
    with make(require_mode(name, kernel=True), tmp_path, limits) as ci:
        first = run(ci, "open('six.bin', 'wb').write(b'x' * (6 * 1024 * 1024))")
        assert first.error is None, first.error
        second = run(ci, "open('three.bin', 'wb').write(b'x' * (3 * 1024 * 1024))")
        assert second.error is not None
        assert "File too large" in second.error


def test_a_directory_over_its_quota_says_so_and_deleting_makes_room(tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path, DISK) as ci:
        work_dir = ci.workspace.for_context(ALICE)
        (work_dir / "old.bin").write_bytes(b"x" * (10 * MiB))  # left from before the quota
        over = run(ci, "print('hi')")
        assert over.stdout == "hi\n"
        assert over.notice is not None
        assert "over their disk quota of 8 MiB" in over.notice
        more = run(ci, "open('more.bin', 'wb').write(b'x' * (2 * 1024 * 1024))")
        assert more.error is not None
        assert "File too large" in more.error
        freed = run(ci, "import os\nos.remove('old.bin')\nos.remove('more.bin')")
        assert freed.error is None, freed.error
        again = run(ci, "open('more.bin', 'wb').write(b'x' * (2 * 1024 * 1024))")
        assert again.error is None, again.error
        assert again.notice is None


def test_files_copied_in_past_the_quota_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    names = [f"data{number}.bin" for number in range(4)]
    for name in names:
        (shared / name).write_bytes(b"x" * (3 * MiB))
    with make(require_mode("rlimits"), tmp_path / "ws", DISK, file_roots=[str(shared)]) as ci:
        copied = ci.run_code(
            "import os\nsorted(f for f in os.listdir() if f.endswith('.bin'))",
            files=[(shared / name).as_uri() for name in names],
            ctx=ALICE,
        )
        assert copied.result == "['data0.bin', 'data1.bin']"
        assert copied.notice is not None
        for name in names[2:]:
            assert f"{name} (3 MiB would take this conversation's files past their" in (
                copied.notice
            )


def test_one_sessions_files_do_not_count_against_anothers(tmp_path: Path) -> None:
    limits = SandboxLimits(disk_bytes=8 * MiB, file_size_bytes=16 * MiB)
    with make(require_mode("rlimits"), tmp_path, limits) as ci:
        for ctx in (ALICE, BOB):
            written = run(ci, "open('six.bin', 'wb').write(b'x' * (6 * 1024 * 1024))", ctx=ctx)
            assert written.error is None, written.error
            assert written.notice is None


def test_the_quota_check_counts_what_is_there_without_following_links(tmp_path: Path) -> None:
    work_dir = tmp_path / "work"
    (work_dir / "sub").mkdir(parents=True)
    (work_dir / "sub" / "data.bin").write_bytes(b"x" * (2 * MiB))
    os.link(work_dir / "sub" / "data.bin", work_dir / "hard.bin")  # counted once
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x" * (50 * MiB))
    (work_dir / "link").symlink_to(outside)  # the link, never what it names
    (work_dir / "folder-link").symlink_to(tmp_path)
    os.mkfifo(work_dir / "fifo")  # never opened (that would block)
    deep = work_dir
    for _ in range(300):  # deeper than any descriptor-per-level walk could hold
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "deep.bin").write_bytes(b"x" * MiB)
    used = disk_usage(work_dir)
    assert 3 * MiB <= used < 3 * MiB + 310 * ENTRY_BYTES + 64 * 1024
    assert disk_usage(work_dir, stop_at=MiB) > MiB
    limits = SandboxLimits(disk_bytes=8 * MiB)
    assert check_disk_quota(work_dir, MiB, limits) is None
    refusal = check_disk_quota(work_dir, 4 * MiB, limits)
    assert refusal is not None
    assert "past their disk quota" in refusal


# -- the cgroups and the description ----------------------------------------------------------


@pytest.mark.parametrize("name", ["bwrap", "rlimits"])
def test_a_sessions_cgroup_goes_when_the_session_ends_and_all_with_close(
    name: SandboxMode, tmp_path: Path
) -> None:
    ci = make(require_mode(name), tmp_path, MEMORY, idle_timeout=3, **limits_cfg("cgroup"))
    tree = ci.enforcement.tree
    assert tree is not None

    def groups() -> list[str]:
        return sorted(p.name for p in tree.pids_dir.iterdir() if p.is_dir())

    try:
        for ctx in (ALICE, BOB):
            assert run(ci, "1", ctx=ctx).result == "1"
        assert len(groups()) == 2
        asyncio.run(ci.end_session("alice", "notes"))
        assert len(groups()) == 1
        wait_until(lambda: groups() == [], "the idle session's cgroup is removed")
        assert run(ci, "2", ctx=BOB).result == "2"
        assert len(groups()) == 1
    finally:
        ci.close()
    assert not tree.pids_dir.exists()
    assert not tree.memory_dir.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_description_says_what_is_enforced_per_session(backend: str, tmp_path: Path) -> None:
    with make(require_mode("rlimits"), tmp_path, DISK, **limits_cfg(backend)) as ci:
        text = ci.model_description
        assert "1 GiB of memory for all of this conversation's processes together" in text
        assert "and 1 GiB per process" in text
        assert "8 MiB of files in total, 4 MiB per file" in text
        assert "64 processes and threads" in text
        watched = "(checked several times a second)" in text
        assert watched == (backend == "watchdog")
        assert ci.enforcement.kind in ci.sandbox_description
        assert ci.enforcement.kind.startswith(backend)  # "cgroup v1" here


def test_limits_that_cannot_hold_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no cgroup for sessions"):
        make("rlimits", tmp_path, session_limits="cgroup", cgroup_parent=str(tmp_path / "none"))
    with pytest.raises(ConfigurationError, match="session_limits must be auto, cgroup or"):
        make("rlimits", tmp_path, session_limits="docker")
    with pytest.raises(ConfigurationError, match="disk_bytes must be positive"):
        SandboxLimits(disk_bytes=0)
