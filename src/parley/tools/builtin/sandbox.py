"""The code interpreter's sandbox: which isolation this machine offers, and how to enter it.

Three modes, strongest first; `detect_sandbox_mode()` picks the first that works here (it
starts a real worker in each to find out). What the code can do in each:

``bwrap``
    Debian's bubblewrap. The worker has its own mount namespace holding only what it needs,
    read-only: `/usr` and the library directories, the Python installation (its `lib` and
    `bin`, a virtual environment's too) and the worker's two files; its session's directory
    read-write, a fresh `/dev`, `/proc` and an empty `/tmp`. Nothing else of the machine is
    there: not the service's directory (`parley.db`, `.env`), not `$HOME`, not the project
    source, not other sessions. Its own network namespace (loopback only), PID, IPC and UTS
    namespaces; it dies with its parent. Child processes may run (inside the same sandbox),
    as many as `SandboxLimits.processes`.
``unshare``
    util-linux's `unshare`: network, IPC, UTS, PID and mount namespaces (a `/proc` of its
    own: the processes of other sessions and of the machine are not there to see or
    signal; where a new `/proc` is refused, as in containers that mask parts of theirs,
    they are listed but out of reach; where no PID namespace can be made, none), and a user
    namespace when parley does not run as root. In the PID namespace a shell is pid 1 (an
    init ignores signals it has no handler for, the kernel's SIGXCPU too), the supervisor
    pid 2 and the REPL child pid 3. The file system is confined by Landlock: readable only
    under the same paths bubblewrap binds (plus `/proc/self`), writable only under the
    session's directory, whatever the route (`dir_fd`, symlinks, links, renames). seccomp
    refuses starting processes, opening sockets and signalling any process but the code's
    own, for native code (`ctypes`, C extensions) too.
``rlimits``
    No namespaces (for machines that refuse them): the same Landlock and seccomp rules as
    `unshare`. Network access is refused by seccomp (no socket can be opened; `socketpair`,
    which asyncio needs, remains), and so are System V IPC and message queues, which would
    outlive the worker and join sessions.

In every mode a worker started by root switches to a uid of its session's own
(`parley.tools.builtin._uids`; `SANDBOX_USER`, `nobody`, where that is turned off), so the
kernel applies `RLIMIT_NPROC` to it (it never does to root) and no other session's process
is its to signal or change; seccomp refuses system calls no code here needs (mount, ptrace,
kernel modules, new namespaces, io_uring, opening files by handle, ...) and changing another
process's limits, priority or scheduling (`prlimit`, `setpriority`, `sched_setaffinity`,
...). In the weak modes the worker keeps one capability, `CAP_DAC_READ_SEARCH`: its Python
installation and its work directory may be where its user may not look (`/root/.pyenv`, a
workspace under a private folder); Landlock then decides what it may read (without
Landlock, only the guard below does).

What the weak modes leave open: `stat` (the names, sizes and dates of files outside the
allowed paths, though not their contents; in `rlimits`, whether a process id exists), and
the resources of the machine beyond the limits below.

Without Landlock (Linux before 5.13) or seccomp (another architecture, another OS), the weak
modes fall back to a guard inside the Python process (an audit hook): it refuses reading
outside the allowed paths, writing outside the work directory, `dir_fd` outside it, sockets,
starting processes and every `ctypes` call. It is Python-level: native code that got past
it would not be stopped. Use that fallback for a model's ordinary code on your own machine,
never to contain hostile code; parley logs a warning when it is in use.

In every mode the worker is two processes: a supervisor that holds parley's pipes and runs
no code it is sent, and its REPL child, which runs the cells and holds none of parley's
descriptors (`_worker.py`, `_repl.py`). The supervisor is not dumpable (the code, under the
same uid, cannot open its `/proc/<pid>/mem` or `/fd`), reads the child's replies with a line
limit and checks each, reads stdout, stderr and the changed files itself, and on a cancel
interrupts the cell (SIGINT), then kills it after a short grace. The seccomp rules above are
the child's (its own-pid rules name it); the supervisor's filter refuses the same and more
(it starts no process, opens no socket) and lets signals reach its child alone. Parley
reads the supervisor with a line limit and a strict schema (`_protocol.py`), and never
follows a link in the work directory, which the code writes (`_hostfs.py`).

Resource limits (`setrlimit`) apply in every mode: CPU seconds per call (`RLIMIT_CPU`),
address space per process (`RLIMIT_AS`, so an allocation past it raises `MemoryError`), the
size of any file written (`RLIMIT_FSIZE`, lowered before each call to what remains of the
session's disk quota), processes and threads (`RLIMIT_NPROC`, counting the supervisor) and
no core files; the wall time of each call is enforced from outside by killing the worker
(its REPL child first, so that the supervisor reports the cell's output). Memory and
processes are also capped for the whole session, supervisor and child and the code's
children together, by a cgroup or else a watchdog, and its directory by a disk quota
(`parley.tools.builtin._limits`).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from parley.errors import ConfigurationError
from parley.tools.builtin import _confine

__all__ = [
    "SANDBOX_USER",
    "SandboxLimits",
    "SandboxMode",
    "available_sandbox_modes",
    "describe_sandbox",
    "detect_sandbox_mode",
    "kernel_confinement",
    "sandbox_command",
    "worker_environment",
]

logger = logging.getLogger("parley.tools")

SandboxMode = Literal["bwrap", "unshare", "rlimits"]
"""How the worker is isolated, strongest first."""

SANDBOX_USER = 65534
"""The uid and gid (`nobody`) a worker started by root switches to."""

_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)
WORKER_FILES = (
    Path(__file__).with_name("_worker.py"),
    Path(__file__).with_name("_repl.py"),
    Path(__file__).with_name("_confine.py"),
    Path(__file__).with_name("_guard.py"),
)
_SYSTEM = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib", "/lib", "/lib64", "/lib32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/fonts")
_SHARED = ("/usr/share/zoneinfo", "/sys/devices/system/cpu")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@dataclass(frozen=True)
class SandboxLimits:
    """The resources one interpreter session may use.

    Args:
        wall_time: Seconds a call may run before the worker is killed.
        cpu_time: CPU seconds a call may use (`RLIMIT_CPU`, raised before each call).
        session_cpu_time: CPU seconds a whole session may use before it is killed.
        memory_bytes: Memory of the whole session, all its processes together (a cgroup, or
            a watchdog that stops the call past it), and address space of each process
            (`RLIMIT_AS`: past it allocations fail with MemoryError).
        file_size_bytes: The largest file the code may write (`RLIMIT_FSIZE`).
        processes: Processes and threads the session may add to those of its sandbox (its
            cgroup's task cap, or the watchdog's; `RLIMIT_NPROC` of its uid).
        output_chars: Characters of stdout and of stderr kept per call (head and tail).
        disk_bytes: What the session's directory may hold in total (None: no quota). Past
            it writes fail and a call that keeps writing is stopped; nothing is deleted.
    """

    wall_time: float = 30.0
    cpu_time: int = 30
    session_cpu_time: int = 600
    memory_bytes: int = 1024 * 1024 * 1024
    file_size_bytes: int = 64 * 1024 * 1024
    processes: int = 64
    output_chars: int = 20_000
    disk_bytes: int | None = 1024 * 1024 * 1024

    def __post_init__(self) -> None:
        sizes = {"memory_bytes": self.memory_bytes, "file_size_bytes": self.file_size_bytes}
        sizes.update(
            processes=self.processes, disk_bytes=1 if self.disk_bytes is None else self.disk_bytes
        )
        wrong = [name for name, value in sizes.items() if value < 1]
        if wrong:
            raise ConfigurationError(
                f"SandboxLimits: {', '.join(wrong)} must be positive (disk_bytes may be None)"
            )

    def to_json(self) -> dict[str, Any]:
        """The limits as the worker reads them."""
        return asdict(self)


@functools.cache
def kernel_confinement() -> bool:
    """Whether this kernel confines the weak modes itself (Landlock and seccomp)."""
    return sys.platform.startswith("linux") and (
        _confine.landlock_abi() >= 1 and _confine.seccomp_supported()
    )


def drops_root() -> bool:
    """Whether workers switch to `SANDBOX_USER` (parley runs as the real root)."""
    return sys.platform.startswith("linux") and _confine.is_real_root()


def _prefix_paths() -> list[str]:
    """The Python installation: each prefix's `lib` and `bin`.

    Never the prefix itself, which may be a project directory holding a virtual environment.
    """
    found: list[str] = []
    for prefix in dict.fromkeys((sys.base_prefix, sys.base_exec_prefix, sys.prefix)):
        for part in ("lib", "lib64", "bin", "pyvenv.cfg"):
            path = os.path.join(prefix, part)
            if os.path.lexists(path) and path not in found:
                found.append(path)
    return found


def read_paths() -> list[str]:
    """What the worker may read in every mode: Python, system libraries, its own files."""
    paths = [*_prefix_paths(), *_SYSTEM, *_ETC, *_SHARED, *map(str, WORKER_FILES)]
    return [path for path in paths if os.path.lexists(path)]


def device_paths() -> list[str]:
    """The device files the worker may read and write."""
    return list(_DEVICES)


def _ancestors(paths: list[str]) -> list[str]:
    """Every parent directory of the paths, shallowest first."""
    parents = {str(parent) for path in paths for parent in Path(path).parents}
    parents.discard("/")
    return sorted(parents, key=lambda p: (p.count("/"), p))


def _bwrap_mounts(work_dir: Path) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):  # a merged /usr: keep the link, not a second copy
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    binds = [p for p in read_paths() if not p.startswith(("/usr/", "/lib", "/sys/"))]
    wd = str(work_dir)
    # bubblewrap makes missing parents mode 0700, which `nobody` could not cross.
    for parent in _ancestors([*binds, wd]):
        if parent != "/tmp":
            args += ["--perms", "0755", "--dir", parent]
    for path in binds:
        args += ["--ro-bind", path, path]
    # The sandbox's own tmpfs mounts hold RAM: nothing may be written there.
    return [*args, "--bind", wd, wd, "--remount-ro", "/tmp", "--remount-ro", "/", "--chdir", wd]


def _bwrap_args(work_dir: Path) -> list[str]:
    namespaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    namespaces.append("--unshare-cgroup-try")
    if drops_root():
        # Real root: no user namespace, so the worker can switch to `nobody` itself (a
        # namespace made by root maps only root, whom RLIMIT_NPROC never stops). It keeps
        # what that takes, and what entering a work directory `nobody` owns takes; the
        # worker drops them all before it runs any code.
        caps = ["--cap-drop", "ALL"]
        for cap in ("SETUID", "SETGID", "SETPCAP", "DAC_READ_SEARCH"):
            caps += ["--cap-add", f"CAP_{cap}"]
    else:
        namespaces.append("--unshare-user")
        caps = ["--cap-drop", "ALL"]
    return [
        "bwrap",
        *namespaces,
        *_bwrap_mounts(work_dir),
        "--die-with-parent",
        "--new-session",
        *caps,
        "--",
    ]


# The PID namespace's first process (its init) ignores every signal it has no handler for,
# the kernel's SIGXCPU at the CPU limit too: a shell is that init, the worker its child.
_INIT = ["/bin/sh", "-c", '"$@"; exit $?', "sh"]
# Strongest first: a PID namespace with its own /proc (so a mount namespace) hides every
# other process; without --mount-proc (a container that masks parts of /proc refuses a new
# one) other processes are listed but out of reach; without a PID namespace, as before.
_UNSHARE_SETS = (
    ["--net", "--ipc", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc"],
    ["--net", "--ipc", "--uts", "--pid", "--fork", "--kill-child"],
    ["--net", "--ipc", "--uts"],
)


def _unshare_prefix(namespaces: list[str]) -> list[str]:
    if drops_root():
        return ["unshare", *namespaces, "--"]
    # Not root: a user namespace first, for the right to make the others; it also drops the
    # capabilities of the initial namespace, so the network namespace cannot be left.
    return ["unshare", "--user", "--map-root-user", *namespaces, "--"]


@functools.cache
def _unshare_args() -> list[str]:
    """The strongest set of namespaces `unshare` makes on this machine (tried once)."""
    for namespaces in _UNSHARE_SETS[:-1]:
        command = [*_unshare_prefix(namespaces), "/bin/true"]
        try:
            done = subprocess.run(command, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return [*_unshare_prefix(namespaces), *_INIT]
        logger.info("unshare %s: %s", " ".join(namespaces), done.stderr.decode().strip())
    return _unshare_prefix(_UNSHARE_SETS[-1])


def sandbox_command(mode: SandboxMode, work_dir: Path, argv: list[str]) -> list[str]:
    """The command that runs `argv` in `work_dir` under `mode`."""
    if mode == "bwrap":
        return [*_bwrap_args(work_dir), *argv]
    if mode == "unshare":
        return [*_unshare_args(), *argv]
    return list(argv)


def worker_environment(work_dir: Path) -> dict[str, str]:
    """A clean environment for the worker: none of the parent's variables (keys) leak in."""
    scratch = work_dir / ".parley"
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work_dir),
        "TMPDIR": str(scratch / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(scratch / "matplotlib"),
        "XDG_CACHE_HOME": str(scratch / "cache"),  # fontconfig's, under bubblewrap
        # One thread per numerical library: threads count against RLIMIT_NPROC and each
        # reserves address space counted by RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def describe_sandbox(mode: SandboxMode) -> str:
    """What the code can reach in `mode` on this machine, for logs and people."""
    if mode == "bwrap":
        return (
            "bubblewrap: the code sees only the Python installation, system libraries and "
            "its conversation's directory (read-write); no network; child processes run "
            "inside the sandbox"
        )
    if not kernel_confinement():
        return (
            f"{mode}: no Landlock or seccomp on this system, so only a Python-level guard "
            "refuses reads outside the Python installation, writes outside the "
            "conversation's directory, network, processes and ctypes; native code could get "
            "past it: do not run untrusted code"
        )
    isolation = "no namespaces"
    if mode == "unshare":
        pid = " and PID" if "--pid" in _unshare_args() else ""
        isolation = f"network, IPC{pid} namespaces"
    return (
        f"{mode} ({isolation}, Landlock, seccomp): the code reads only the Python "
        "installation and its conversation's directory, writes only there; no network; "
        "no child processes"
    )


def model_note(mode: SandboxMode) -> str:
    """What the tool's description tells the model about the sandbox (limits aside)."""
    children = (
        "Child processes are allowed."
        if mode == "bwrap"
        else "Starting other programs (subprocess, os.system) is not allowed."
    )
    return (
        "There is no network access. Files can be read and written only in the current "
        f"directory (the conversation's files); the Python libraries are readable. {children}"
    )


def _probe(mode: SandboxMode) -> bool:
    from parley.tools.builtin._process import probe_worker  # noqa: PLC0415  (a cycle)

    failure = probe_worker(mode)
    if failure:
        logger.info("sandbox mode %s is unavailable: %s", mode, failure)
    return failure is None


@functools.cache
def available_sandbox_modes() -> tuple[SandboxMode, ...]:
    """The modes that work on this machine, strongest first (probed once per process)."""
    if not sys.platform.startswith("linux"):
        return ("rlimits",)
    return tuple(mode for mode in _MODES if mode == "rlimits" or _probe(mode))


def detect_sandbox_mode(requested: str = "auto") -> SandboxMode:
    """The mode to use: the strongest available for `"auto"`, else the one named.

    Raises:
        ConfigurationError: The name is unknown, or that mode does not work here.
    """
    if requested not in (*_MODES, "auto"):
        raise ConfigurationError(
            f"unknown sandbox mode {requested!r}; choose auto, {', '.join(_MODES)}"
        )
    available = available_sandbox_modes()
    if requested == "auto":
        mode = available[0]
        if mode != "bwrap":
            logger.warning(
                "code_interpreter: bubblewrap is not available; weaker sandbox: %s",
                describe_sandbox(mode),
            )
        return mode
    for mode in available:
        if mode == requested:
            return mode
    raise ConfigurationError(
        f"sandbox mode {requested!r} does not work on this machine; "
        f"available: {', '.join(available)}"
    )
