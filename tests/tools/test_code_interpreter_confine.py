"""Each kernel measure of the worker's confinement, alone (`_confine`: seccomp, Landlock, uid).

The sandbox tests run them together, where one layer may hide another's gap (Landlock's
signal scope and the seccomp signal rule both stop a kill); here each runs by itself in a
fresh Python process, which then tries what it must refuse and what it must still allow.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from parley.tools.builtin import _confine
from tests._process import run_python
from tests._requires import unavailable

pytestmark = pytest.mark.timeout(60)

CONFINE = Path(_confine.__file__)
PRELUDE = f"""
import ctypes, errno, json, os, socket, threading, importlib.util
spec = importlib.util.spec_from_file_location("confine", {str(CONFINE)!r})
confine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(confine)
out = {{}}
def attempt(name, call):
    try:
        call()
        out[name] = "ok"
    except OSError as exc:
        out[name] = errno.errorcode.get(exc.errno, str(exc.errno))
"""


def confined(body: str, *, cwd: Path) -> dict[str, Any]:
    """Run `body` after the prelude in a new Python; the `out` it filled."""
    script = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    done = run_python(script, "-I", cwd=cwd, timeout=30)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture
def seccomp() -> None:
    if not sys.platform.startswith("linux") or not _confine.seccomp_supported():
        unavailable("seccomp filters need Linux on x86-64 or AArch64", "")


@pytest.fixture
def landlock() -> None:
    if _confine.landlock_abi() < 1:
        unavailable("this kernel has no Landlock (Linux 5.13+, CONFIG_SECURITY_LANDLOCK)", "")


@pytest.mark.usefixtures("seccomp")
def test_seccomp_refuses_processes_but_not_threads(tmp_path: Path) -> None:
    out = confined(
        """
        confine.deny_syscalls(processes=True, sockets=False)
        attempt("fork", os.fork)
        attempt("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
        libc = ctypes.CDLL(None, use_errno=True)
        attempt("libc fork", lambda: libc.fork() >= 0 or (_ for _ in ()).throw(
            OSError(ctypes.get_errno(), "fork")))
        thread = threading.Thread(target=lambda: None)
        attempt("thread", lambda: (thread.start(), thread.join()))
        """,
        cwd=tmp_path,
    )
    assert out == {"fork": "EPERM", "spawn": "EPERM", "libc fork": "EPERM", "thread": "ok"}


@pytest.mark.usefixtures("seccomp")
def test_seccomp_refuses_sockets_but_not_socket_pairs(tmp_path: Path) -> None:
    out = confined(
        """
        confine.deny_syscalls(processes=False, sockets=True)
        attempt("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        attempt("unix", lambda: socket.socket(socket.AF_UNIX))
        attempt("pair", socket.socketpair)
        """,
        cwd=tmp_path,
    )
    assert out == {"inet": "EPERM", "unix": "EPERM", "pair": "ok"}


@pytest.mark.usefixtures("seccomp")
def test_seccomp_lets_signals_reach_only_the_process_itself(tmp_path: Path) -> None:
    with subprocess.Popen(["sleep", "60"]) as victim:
        out = confined(
            f"""
            import signal
            confine.deny_syscalls(processes=False, sockets=False, signals=True)
            attempt("other", lambda: os.kill({victim.pid}, signal.SIGKILL))
            libc = ctypes.CDLL(None, use_errno=True)
            attempt("libc other", lambda: libc.kill({victim.pid}, 9) == 0 or (_ for _ in ()).throw(
                OSError(ctypes.get_errno(), "kill")))
            attempt("group", lambda: os.killpg(os.getpgid(0), 0))
            attempt("self", lambda: os.kill(os.getpid(), 0))
            attempt("thread", lambda: signal.pthread_kill(threading.get_ident(), 0))
            """,
            cwd=tmp_path,
        )
        assert victim.poll() is None
        victim.kill()
    assert out == {
        "other": "EPERM",
        "libc other": "EPERM",
        "group": "EPERM",
        "self": "ok",
        "thread": "ok",
    }


@pytest.mark.usefixtures("seccomp")
def test_seccomp_refuses_new_namespaces_io_uring_and_path_truncation(tmp_path: Path) -> None:
    victim = tmp_path / "keep.txt"
    victim.write_text("kept")
    out = confined(
        f"""
        confine.deny_syscalls(processes=False, sockets=False, truncate=True)
        libc = ctypes.CDLL(None, use_errno=True)
        def raw(*args):
            if libc.syscall(*args) < 0:
                raise OSError(ctypes.get_errno(), "syscall")
        table = confine._table()[1]
        attempt("unshare", lambda: raw(table["unshare"], 0x10000000))  # CLONE_NEWUSER
        params = ctypes.create_string_buffer(120)
        attempt("io_uring", lambda: raw(table["io_uring_setup"], 1, params))
        attempt("truncate", lambda: os.truncate({str(victim)!r}, 0))
        with open("mine", "w") as mine:
            attempt("ftruncate", lambda: os.ftruncate(mine.fileno(), 0))
        """,
        cwd=tmp_path,
    )
    assert out == {"unshare": "EPERM", "io_uring": "EPERM", "truncate": "EPERM", "ftruncate": "ok"}
    assert victim.read_text() == "kept"


@pytest.mark.usefixtures("landlock")
def test_landlock_confines_reads_and_writes_whatever_the_route(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("s3cret")
    readable = [sys.base_prefix, sys.prefix, "/usr/lib", "/lib", "/lib64", str(CONFINE)]
    out = confined(
        f"""
        confine.restrict_files({readable!r}, [{str(work)!r}], ["/dev/null"])
        attempt("read outside", lambda: open({str(outside / "secret")!r}).read())
        attempt("list outside", lambda: os.listdir({str(outside)!r}))
        fd = os.open({str(outside)!r}, os.O_PATH)
        attempt("dir_fd write", lambda: os.open("new", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
        attempt("write inside", lambda: open({str(work / "ok")!r}, "w").write("x"))
        attempt("link out", lambda: os.link({str(work / "ok")!r}, {str(outside / "ok")!r}))
        attempt("rename out", lambda: os.rename({str(work / "ok")!r}, {str(outside / "ok")!r}))
        os.symlink({str(outside / "secret")!r}, {str(work / "link")!r})
        attempt("through symlink", lambda: open({str(work / "link")!r}).read())
        attempt("read python", lambda: open(os.__file__).read())
        attempt("null", lambda: open("/dev/null", "w").write("x"))
        """,
        cwd=work,
    )
    assert out == {
        "read outside": "EACCES",
        "list outside": "EACCES",
        "dir_fd write": "EACCES",
        "write inside": "ok",
        "link out": "EACCES",
        "rename out": "EACCES",
        "through symlink": "EACCES",
        "read python": "ok",
        "null": "ok",
    }
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_root_becomes_nobody_with_at_most_the_right_to_read(tmp_path: Path) -> None:
    if not _confine.is_real_root():
        unavailable("switching to nobody needs parley to run as root", "run the tests as root")
    out = confined(
        """
        confine.drop_root(65534, 65534, keep_read_search=True)
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        out["uid"] = status["Uid"].split()
        out["caps"] = [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")]
        attempt("setuid back", lambda: os.setuid(0))
        """,
        cwd=tmp_path,
    )
    assert out["uid"] == ["65534"] * 4
    only_read_search = f"{1 << 2:016x}"  # CAP_DAC_READ_SEARCH
    assert out["caps"] == [only_read_search, only_read_search, only_read_search, "0" * 16]
    assert out["setuid back"] == "EPERM"


def test_root_becomes_nobody_with_no_capability_at_all(tmp_path: Path) -> None:
    if not _confine.is_real_root():
        unavailable("switching to nobody needs parley to run as root", "run the tests as root")
    out = confined(
        """
        confine.drop_root(65534, 65534, keep_read_search=False)
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        out["caps"] = [status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd")]
        out["groups"] = os.getgroups()
        """,
        cwd=tmp_path,
    )
    assert out == {"caps": ["0" * 16] * 3, "groups": []}


# The calls Python has no wrapper for, by number (the test's own table, not the filter's).
NUMBERS = {
    "x86_64": {
        "sched_setattr": 314, "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279,
        "get_robust_list": 274, "pidfd_open": 434, "shmget": 29, "shmat": 30, "msgget": 68,
        "semget": 64,
    },
    "aarch64": {
        "sched_setattr": 274, "ioprio_set": 30, "migrate_pages": 238, "move_pages": 239,
        "get_robust_list": 100, "pidfd_open": 434, "shmget": 194, "shmat": 196, "msgget": 186,
        "semget": 190,
    },
}.get(platform.machine().lower(), {})  # fmt: skip
OTHERS = f"""
import resource
libc = ctypes.CDLL(None, use_errno=True)
table = {NUMBERS!r}
def raw(name, *args):
    values = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    if libc.syscall(ctypes.c_long(table[name]), *values) < 0:
        raise OSError(ctypes.get_errno(), name)
IDLE_IO = 3 << 13  # IOPRIO_CLASS_IDLE
attr = ctypes.create_string_buffer(struct.pack("IIQiI", 48, 3, 0, 0, 0) + bytes(24))  # BATCH
mask = ctypes.c_ulong(1)
head, size = ctypes.c_void_p(), ctypes.c_size_t()
"""


# A uid no process runs as: a group-wide call the filter let through would touch nothing.
NOBODY_AT_ALL = 2_147_000_123


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the same user (in a process group of its own) that must be left alone."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def scheduling_of(pid: int) -> tuple[str, list[str], set[int]]:
    """A process's limits, priority, nice value, policy and CPUs (what the calls change)."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    scheduling = [stat[15], stat[16], stat[37], stat[38]]  # priority nice rt_priority policy
    return Path(f"/proc/{pid}/limits").read_text(), scheduling, os.sched_getaffinity(pid)


@pytest.mark.usefixtures("seccomp")
def test_seccomp_refuses_changing_another_process_and_allows_the_process_itself(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    pid = victim.pid
    before = scheduling_of(pid)
    out = confined(
        "import struct\n"
        + OTHERS
        + textwrap.dedent(
            f"""
            V = {pid}
            confine.deny_syscalls(processes=False, sockets=False)
            attempt("prlimit", lambda: resource.prlimit(V, resource.RLIMIT_AS, (1 << 25,) * 2))
            attempt("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, V, 19))
            attempt("setpriority user", lambda: os.setpriority(os.PRIO_USER, {NOBODY_AT_ALL}, 19))
            attempt("setpriority group", lambda: os.setpriority(os.PRIO_PGRP, V, 19))
            attempt("affinity", lambda: os.sched_setaffinity(V, {{0}}))
            attempt("scheduler", lambda: os.sched_setscheduler(V, os.SCHED_BATCH,
                                                               os.sched_param(0)))
            attempt("param", lambda: os.sched_setparam(V, os.sched_param(0)))
            attempt("setattr", lambda: raw("sched_setattr", V, attr, 0))
            attempt("ioprio", lambda: raw("ioprio_set", 1, V, IDLE_IO))
            attempt("ioprio user", lambda: raw("ioprio_set", 3, {NOBODY_AT_ALL}, IDLE_IO))
            attempt("ioprio group", lambda: raw("ioprio_set", 2, V, IDLE_IO))
            attempt("migrate", lambda: raw("migrate_pages", V, 64, ctypes.byref(mask),
                                           ctypes.byref(mask)))
            attempt("move", lambda: raw("move_pages", V, 0, None, None, None, 0))
            attempt("robust list", lambda: raw("get_robust_list", V, ctypes.byref(head),
                                               ctypes.byref(size)))
            attempt("own: prlimit 0", lambda: resource.prlimit(0, resource.RLIMIT_NOFILE))
            attempt("own: prlimit pid", lambda: resource.prlimit(os.getpid(),
                                                                 resource.RLIMIT_NOFILE))
            attempt("own: setrlimit", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
            attempt("own: nice", lambda: os.nice(1))
            attempt("own: setpriority pid", lambda: os.setpriority(os.PRIO_PROCESS,
                                                                   os.getpid(), 2))
            attempt("own: affinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
            attempt("own: ioprio", lambda: raw("ioprio_set", 1, 0, IDLE_IO))
            attempt("own: robust list", lambda: raw("get_robust_list", 0, ctypes.byref(head),
                                                    ctypes.byref(size)))
            """
        ),
        cwd=tmp_path,
    )
    after = scheduling_of(pid)
    others = {name: result for name, result in out.items() if not name.startswith("own:")}
    assert others == dict.fromkeys(others, "EPERM")
    assert len(others) == 14
    assert {name: result for name, result in out.items() if name.startswith("own:")} == {
        "own: prlimit 0": "ok",
        "own: prlimit pid": "ok",
        "own: setrlimit": "ok",
        "own: nice": "ok",
        "own: setpriority pid": "ok",
        "own: affinity": "ok",
        "own: ioprio": "ok",
        "own: robust list": "ok",
    }
    assert after == before  # its limits, nice value, policy, CPUs: all as they were


@pytest.mark.usefixtures("seccomp")
def test_seccomp_refuses_pidfds_of_others_and_on_request_system_v_ipc(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    out = confined(
        f"""
        libc = ctypes.CDLL(None, use_errno=True)
        table = confine._table()[1]
        def raw(name, *args):
            result = libc.syscall(ctypes.c_long(table[name]), *map(ctypes.c_long, args))
            if result < 0:
                raise OSError(ctypes.get_errno(), name)
            return result
        confine.deny_syscalls(processes=False, sockets=False, signals=True, ipc=True)
        attempt("pidfd other", lambda: raw("pidfd_open", {victim.pid}, 0))
        attempt("pidfd own", lambda: os.close(raw("pidfd_open", os.getpid(), 0)))
        attempt("shmget", lambda: raw("shmget", 0, 4096, 0o1600))  # IPC_PRIVATE
        attempt("msgget", lambda: raw("msgget", 0, 0o1600))
        attempt("semget", lambda: raw("semget", 0, 1, 0o1600))
        attempt("shmat", lambda: raw("shmat", 0, 0, 0))
        """,
        cwd=tmp_path,
    )
    assert out == {
        "pidfd other": "EPERM",
        "pidfd own": "ok",
        "shmget": "EPERM",
        "msgget": "EPERM",
        "semget": "EPERM",
        "shmat": "EPERM",
    }


@pytest.mark.usefixtures("seccomp")
def test_seccomp_lets_signals_reach_the_named_child_and_no_other_process(
    tmp_path: Path, victim: subprocess.Popen[bytes]
) -> None:
    # The supervisor's filter: it signals its REPL child, and nothing else but itself; it
    # starts no process, opens no socket, truncates no path, uses no System V IPC.
    out = confined(
        f"""
        import signal, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        confine.deny_syscalls(
            processes=True, sockets=True, signals=True, truncate=True, ipc=True, child=child.pid
        )
        attempt("child", lambda: os.kill(child.pid, 0))
        attempt("self", lambda: os.kill(os.getpid(), 0))
        attempt("other", lambda: os.kill({victim.pid}, 0))
        attempt("fork", lambda: os.fork())
        attempt("socket", lambda: socket.socket(socket.AF_UNIX).close())
        open("file", "w").close()
        attempt("truncate", lambda: os.truncate("file", 0))
        attempt("kill child", lambda: os.kill(child.pid, signal.SIGKILL))
        child.wait()
        """,
        cwd=tmp_path,
    )
    assert out == {
        "child": "ok",
        "self": "ok",
        "other": "EPERM",
        "fork": "EPERM",
        "socket": "EPERM",
        "truncate": "EPERM",
        "kill child": "ok",
    }
    assert victim.poll() is None
