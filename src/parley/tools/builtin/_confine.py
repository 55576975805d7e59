"""Kernel confinement of the code interpreter's worker: Landlock, seccomp, an unprivileged uid.

Standard library only: the worker (`_worker.py`) loads this file from beside itself, before
it runs any code it is sent; parley imports it too, to ask what this kernel offers. Each
measure is enforced by the kernel for the worker and everything it could start, native code
included (`ctypes`, a C extension), which an in-process audit hook cannot promise.

- **Landlock** (Linux 5.13+, `landlock_create_ruleset`): the file system is readable only
  under the given roots, writable only under the work directory; with ABI 4+ no TCP bind or
  connect, with ABI 6+ no signals or abstract UNIX sockets out of the sandbox. The rules
  apply to paths as opened, whatever the route (`dir_fd`, symlinks, `/proc/self/root`); hard
  links and renames out of the work directory are refused (`EXDEV`).
- **seccomp** (a BPF filter, x86-64 and AArch64): system calls no code here needs (mount,
  ptrace, kernel modules, new namespaces, io_uring, another process's descriptors, ...), and
  changing another process's limits, priority, scheduling or memory placement (`prlimit64`,
  `setpriority`, `sched_setaffinity`, ... on any pid but the caller's), fail with EPERM; on
  request also every way to start a process (fork, vfork, execve, clone without
  CLONE_THREAD), to open a socket (`socket`; `socketpair`, which asyncio uses, stays), to
  signal another process, to truncate by path (for Landlock ABIs before 3), and System V IPC
  and message queues (for a worker without an IPC namespace).
- **An unprivileged uid**: a worker started as root switches to its session's own uid
  (`_uids`), so that the kernel applies `RLIMIT_NPROC` to it (it never does to uid 0), file
  permissions protect the rest, and no other session's process is its to signal or change.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import struct
from collections.abc import Iterable

__all__ = [
    "FS_READ",
    "deny_syscalls",
    "drop_root",
    "is_real_root",
    "landlock_abi",
    "restrict_files",
    "seccomp_supported",
]

# -- system calls -----------------------------------------------------------------------------

# Each call's numbers on x86-64 (asm/unistd_64.h) and in the generic table AArch64 uses
# (asm-generic/unistd.h; None: AArch64 has no such call); the seccomp filter checks the
# architecture before the number.
_NUMBERS: dict[str, tuple[int, int | None]] = {
    "fork": (57, None), "vfork": (58, None), "execve": (59, 221), "execveat": (322, 281),
    "clone": (56, 220), "clone3": (435, 435), "socket": (41, 198), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "mount": (165, 40),
    "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51), "swapon": (167, 224),
    "swapoff": (168, 225), "reboot": (169, 142), "sethostname": (170, 161),
    "setdomainname": (171, 162), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "unshare": (272, 97), "setns": (308, 268), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "bpf": (321, 280), "perf_event_open": (298, 241),
    "userfaultfd": (323, 282), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "acct": (163, 89), "quotactl": (179, 60),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171),
    "clock_adjtime": (305, 266), "iopl": (172, None), "ioperm": (173, None), "seccomp": (317, 277),
    "capset": (126, 91), "truncate": (76, 45), "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "process_madvise": (440, 440), "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240), "pidfd_send_signal": (424, 424),
    "landlock_create_ruleset": (444, 444), "landlock_add_rule": (445, 445),
    "landlock_restrict_self": (446, 446), "prlimit64": (302, 261), "setpriority": (141, 140),
    "sched_setparam": (142, 118), "sched_setscheduler": (144, 119), "sched_setaffinity": (203, 122),
    "sched_setattr": (314, 274), "ioprio_set": (251, 30), "migrate_pages": (256, 238),
    "move_pages": (279, 239), "get_robust_list": (274, 100), "pidfd_open": (434, 434),
    "process_mrelease": (448, 448), "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "msgget": (68, 186),
    "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187), "semtimedop": (220, 192),
    "mq_open": (240, 180), "mq_unlink": (241, 181),
}  # fmt: skip
_X86_64 = {name: x86_64 for name, (x86_64, _) in _NUMBERS.items()}
_AARCH64 = {name: aarch64 for name, (_, aarch64) in _NUMBERS.items() if aarch64 is not None}
_TABLES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
_DANGEROUS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "swapon", "swapoff", "reboot", "sethostname", "setdomainname", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "unshare", "setns",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    # io_uring performs opens and connects without the system calls this filter sees.
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # open_by_handle_at opens a file by inode, not by path (the "shocker" escape).
    "open_by_handle_at", "name_to_handle_at", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "acct", "quotactl", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "iopl", "ioperm",
    # Another process's descriptors and memory, by pidfd or by comparison; reaping the
    # memory of a process being killed (an out-of-memory killer's call).
    "kcmp", "pidfd_getfd", "process_madvise", "process_mrelease",
)  # fmt: skip
_PROCESS_CALLS = ("fork", "vfork", "execve", "execveat")
# Signals: their first argument is the target (a pid; a thread id for tkill).
_SIGNAL_CALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Calls that change another process's limits, priority, CPUs or memory placement when their
# first argument names it: allowed for 0 (the caller) and the filtered process's own pid.
# Without this rule one session's code set another's memory limit (issue 18).
_PID_CALLS = (
    "prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr",
    "migrate_pages", "move_pages", "get_robust_list",
)  # fmt: skip
# setpriority and ioprio_set take (which, who): only "a process" (PRIO_PROCESS 0,
# IOPRIO_WHO_PROCESS 1) that is the caller; a process group or a user is refused.
_WHICH_CALLS = {"setpriority": 0, "ioprio_set": 1}
# System V IPC and POSIX message queues: objects that outlive the worker and that any process
# of the machine with the same uid (or a guessed id) reaches; without an IPC namespace
# (`rlimits`) they would join sessions and hold memory no limit of the session counts.
_IPC_CALLS = (
    "shmget", "shmat", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget", "msgsnd",
    "msgrcv", "msgctl", "mq_open", "mq_unlink",
)  # fmt: skip

_PR_SET_SECUREBITS = 28
# NOROOT and NO_SETUID_FIXUP, each locked: uid 0 regains nothing by execve, and changing uid
# leaves the capabilities alone (also for access(2), which otherwise drops them).
_SECUREBITS = 0b1111
_PR_CAPBSET_READ = 23
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_DAC_READ_SEARCH = 2
_CLONE_THREAD = 0x00010000


def _table() -> tuple[int, dict[str, int]] | None:
    return _TABLES.get(platform.machine().lower())


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _call(name: str, *args: object) -> int:
    """A raw system call by name; raises OSError with the kernel's errno."""
    table = _table()
    if table is None:
        raise OSError(38, f"no system call table for {platform.machine()}")
    # Every int as a long: syscall() is variadic, and the kernel reads whole registers.
    values = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    result = int(_libc().syscall(ctypes.c_long(table[1][name]), *values))
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{name}: {os.strerror(number)}")
    return result


def _prctl(option: int, value: int = 0) -> None:
    if _libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl({option}): {os.strerror(number)}")


def no_new_privs() -> None:
    """Forbid gaining privileges through execve (required before Landlock and seccomp)."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)


# -- Landlock -----------------------------------------------------------------------------------

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
FS_READ = _EXECUTE | _READ_FILE | _READ_DIR
"""Landlock rights to read files and list directories (and map libraries)."""
_DEVICE = _READ_FILE | _WRITE_FILE | _IOCTL_DEV
_NET_TCP = 0b11  # BIND_TCP | CONNECT_TCP
_SCOPES = 0b11  # ABSTRACT_UNIX_SOCKET | SIGNAL


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("fs", ctypes.c_uint64),
        ("net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 12 bytes
    _fields_ = [
        ("allowed", ctypes.c_uint64),
        ("parent_fd", ctypes.c_int32),
    ]


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 without Landlock."""
    try:
        return _call("landlock_create_ruleset", None, 0, 1)  # 1: the ABI version
    except (OSError, AttributeError):
        return 0


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _ruleset(abi: int) -> int:
    attr = _RulesetAttr(
        fs=_fs_rights(abi),
        net=_NET_TCP if abi >= 4 else 0,
        scoped=_SCOPES if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct grew with the ABI
    return _call("landlock_create_ruleset", ctypes.byref(attr), size, 0)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # nothing there: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneath(allowed=rights, parent_fd=fd)
        _call("landlock_add_rule", ruleset, 1, ctypes.byref(rule), 0)  # 1: PATH_BENEATH
    finally:
        os.close(fd)


def restrict_files(read: Iterable[str], write: Iterable[str], devices: Iterable[str]) -> int:
    """Confine this process (and its future children) to the given paths; returns the ABI.

    Args:
        read: Files and directory trees that may be read (and mapped as libraries).
        write: Directory trees where anything may be done (the work directory).
        devices: Device files that may be read and written (`/dev/null`).

    Raises:
        OSError: The kernel has no Landlock, or refused the rules.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(38, "Landlock is not available in this kernel")
    everything = _fs_rights(abi)
    ruleset = _ruleset(abi)
    try:
        for path in read:
            _allow(ruleset, path, FS_READ & everything)
        for path in devices:
            _allow(ruleset, path, _DEVICE & everything)
        for path in write:
            _allow(ruleset, path, everything)
        no_new_privs()
        _call("landlock_restrict_self", ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


# -- seccomp ------------------------------------------------------------------------------------

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38


class _Program(ctypes.Structure):
    _fields_ = [
        ("len", ctypes.c_ushort),
        ("filter", ctypes.c_void_p),
    ]


def seccomp_supported() -> bool:
    """Whether this machine's architecture has a filter here (Linux on x86-64 or AArch64)."""
    return _table() is not None and os.path.exists("/proc/self/status")


_Instruction = tuple[int, str | int, str | int, int]


def _targets(own_pid: int, *, signals: bool, child: int) -> dict[str, list[_Instruction]]:
    """The blocks that check a call's target: each ends in `allow` or `deny`."""
    # Offsets 16 and 24: the low halves of seccomp_data.args[0] and args[1]. A pid is an int,
    # and the kernel reads only those 32 bits of the register.
    caller: list[_Instruction] = [
        (_LD_ABS, 0, 0, 24),
        (_JEQ, "allow", 0, 0),
        (_JEQ, "allow", "deny", own_pid),
    ]
    blocks: dict[str, list[_Instruction]] = {
        "pid": [(_LD_ABS, 0, 0, 16), (_JEQ, "allow", 0, 0), (_JEQ, "allow", "deny", own_pid)],
    }
    for name, which in _WHICH_CALLS.items():
        blocks[name] = [(_LD_ABS, 0, 0, 16), (_JEQ, 0, "deny", which), *caller]
    if signals:  # a signal goes through only to this very process (and its child, if named)
        others: list[_Instruction] = [(_JEQ, "allow", "deny", child)] if child else []
        blocks["self"] = [
            (_LD_ABS, 0, 0, 16),
            (_JEQ, "allow", 0 if child else "deny", own_pid),
            *others,
        ]
    return blocks


def _filter(
    arch: int,
    numbers: dict[str, int],
    denied_names: list[str],
    *,
    processes: bool,
    own_pid: int,
    signals: bool,
    child: int = 0,
) -> bytes:
    """The BPF program: labels are resolved into the relative jumps BPF takes."""
    code: list[_Instruction] = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 0, "deny", arch),  # another ABI (i386 on x86-64): refuse everything
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == _TABLES["x86_64"][0]:
        code.append((_JGE, "deny", 0, 0x40000000))  # the x32 ABI's numbers
    code += [(_JEQ, "deny", 0, numbers[name]) for name in denied_names if name in numbers]
    code += [(_JEQ, "pid", 0, numbers[name]) for name in _PID_CALLS]
    code += [(_JEQ, name, 0, numbers[name]) for name in _WHICH_CALLS]
    if signals:
        code += [(_JEQ, "self", 0, numbers[name]) for name in (*_SIGNAL_CALLS, "pidfd_open")]
    if processes:
        # clone3 hides its flags in memory a filter cannot read: ENOSYS makes glibc fall
        # back to clone, whose flags it can (threads pass CLONE_THREAD, processes do not).
        code.append((_JEQ, "enosys", 0, numbers["clone3"]))
        code.append((_JEQ, 0, "allow", numbers["clone"]))
        code.append((_LD_ABS, 0, 0, 16))  # the low half of seccomp_data.args[0]
        code.append((_JSET, "allow", "deny", _CLONE_THREAD))
    code.append((_RET, 0, 0, _ALLOW))  # every other call
    labels: dict[str, int] = {}
    for label, block in _targets(own_pid, signals=signals, child=child).items():
        labels[label] = len(code)
        code += block
    # BPF jumps only forward: the verdicts come last.
    labels.update(allow=len(code), deny=len(code) + 1, enosys=len(code) + 2)
    code += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | _EPERM), (_RET, 0, 0, _ERRNO | _ENOSYS)]
    out = bytearray()
    for index, (op, true, false, k) in enumerate(code):
        jt = labels[true] - index - 1 if isinstance(true, str) else true
        jf = labels[false] - index - 1 if isinstance(false, str) else false
        if not (0 <= jt <= 255 and 0 <= jf <= 255):  # BPF's conditional jumps are 8 bits
            raise ValueError(f"seccomp filter too long: a jump of {max(jt, jf)} at {index}")
        out += struct.pack("HBBI", op, jt, jf, k)
    return bytes(out)


def deny_syscalls(
    *,
    processes: bool,
    sockets: bool,
    signals: bool = False,
    truncate: bool = False,
    ipc: bool = False,
    child: int = 0,
) -> None:
    """Install the seccomp filter on every thread of this process (and its children).

    Always refused: the dangerous calls (module docstring), and changing another process's
    resource limits, priority, scheduling, CPU affinity, I/O priority or memory placement
    (`prlimit64`, `setpriority`, `sched_set*`, `ioprio_set`, `migrate_pages`, `move_pages`;
    also `get_robust_list`): those pass only for pid 0 or this process's own pid, and
    `setpriority` / `ioprio_set` only for a single process, never a group or a user. A
    child (under bubblewrap) may name itself only as 0, and a thread only itself as 0.

    Args:
        processes: Also refuse fork, vfork, execve and clone without CLONE_THREAD.
        sockets: Also refuse `socket()` (every family: no network, no UNIX socket).
        signals: Also refuse signals to any process but this one (what Landlock's signal
            scope does from ABI 6 on; `pidfd_send_signal` is refused outright, `pidfd_open`
            for any process but this one).
        truncate: Also refuse `truncate()` by path (Landlock governs it from ABI 3 on;
            `ftruncate` of a file opened for writing stays).
        ipc: Also refuse System V IPC and POSIX message queues (for a worker without an IPC
            namespace of its own).
        child: With `signals`, the one other process that signals (and `pidfd_open`) may
            reach: the supervisor's REPL child.

    Raises:
        OSError: No filter for this architecture, or the kernel refused it.
    """
    table = _table()
    if table is None:
        raise OSError(38, f"no seccomp filter for {platform.machine()}")
    names = list(_DANGEROUS)
    if processes:
        names += _PROCESS_CALLS
    if sockets:
        names.append("socket")
    if signals:
        names.append("pidfd_send_signal")
    if truncate:
        names.append("truncate")
    if ipc:
        names += _IPC_CALLS
    program = _filter(
        table[0],
        table[1],
        names,
        processes=processes,
        own_pid=os.getpid(),
        signals=signals,
        child=child if signals else 0,
    )
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len=len(program) // 8, filter=ctypes.addressof(buffer))
    no_new_privs()
    # SECCOMP_SET_MODE_FILTER (1) with SECCOMP_FILTER_FLAG_TSYNC (1): every thread at once.
    _call("seccomp", 1, 1, ctypes.byref(fprog))


# -- identity -----------------------------------------------------------------------------------


def is_real_root() -> bool:
    """Whether this process is uid 0 of the initial user namespace (not a mapped root)."""
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as lines:
            first = lines.readline().split()
    except OSError:
        return True
    return first[:2] == ["0", "0"] and int(first[2]) > 1


def _capset(mask: int) -> None:
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = struct.pack("6I", mask, mask, 0, 0, 0, 0)  # effective, permitted, inheritable x2
    _call("capset", ctypes.c_char_p(header), ctypes.c_char_p(data))


def drop_root(uid: int, gid: int, *, keep_read_search: bool) -> None:
    """Become `uid`/`gid` with no supplementary groups and no capabilities.

    Args:
        uid: The user to become.
        gid: Its group.
        keep_read_search: Keep only CAP_DAC_READ_SEARCH (read and traverse any directory),
            for a worker whose interpreter lives where that user may not look (`/root`);
            Landlock then decides what it may read.
    """
    keep = {_CAP_DAC_READ_SEARCH} if keep_read_search else set()
    with open("/proc/sys/kernel/cap_last_cap") as text:
        last = int(text.read())
    for cap in range(last + 1):
        if cap not in keep and _libc().prctl(_PR_CAPBSET_READ, cap, 0, 0, 0) == 1:
            _prctl(_PR_CAPBSET_DROP, cap)
    _libc().prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if keep:
        _prctl(_PR_SET_SECUREBITS, _SECUREBITS)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _capset(sum(1 << cap for cap in keep))
