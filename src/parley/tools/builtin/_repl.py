"""The code interpreter's REPL child: the one process that runs the cells.

Standard library only; the supervisor (`_worker.py`) loads it by path and calls
`child_main` in the child it forks, after the shared confinement (limits, the session's
uid). Before it reads a cell, the child keeps only its own descriptors (0: /dev/null; 1 and
2: the supervisor's capture files; 3 and 4: its requests and replies), so nothing the code
can reach speaks to parley; then it confines itself further (Landlock and seccomp of its own,
whose own-pid rules name this process; the audit hook).

    <- {"ready": {"landlock": abi, "seccomp": bool}}
    -> {"cell": n, "code": "...", "cpu_time": 30, "file_size": bytes | null}
    -> {"interrupt": n}
    <- {"cell": n, "error": ..., "result": ..., "images": [...]}

Before each cell the child sets its own limits for it (resource limits are per process):
CPU seconds from now, and the largest file it may write (`RLIMIT_FSIZE`, what remains of
the session's disk quota). The supervisor reads stdout, stderr and the changed files
itself. An interrupt (a cancelled run) comes as a line, then SIGINT: SIGINT raises
KeyboardInterrupt in a running cell and is ignored outside one, and a cell about to start
finds the line and stops before its first statement, so an interrupt is never lost between
the two nor taken for the next cell's.
"""

from __future__ import annotations

import ast
import base64
import builtins
import ctypes
import fcntl
import functools
import io
import json
import linecache
import math
import os
import resource
import select
import signal
import sys
import traceback
import warnings
from collections import deque
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any, NoReturn

REQUESTS, REPLIES = 3, 4
_MAX_RESULT = 2000
_IMAGE_BYTES = 24 * 1024 * 1024  # base64 figures per cell: the reply line must stay bounded
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


class _Cell:
    """Whether a cell is running: only then does SIGINT interrupt."""

    running = False


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    if _Cell.running:
        raise KeyboardInterrupt


# -- limits ------------------------------------------------------------------------------------


def _set_soft(kind: int, value: int | None) -> None:
    """Set a soft limit to `value`, at most the hard one (None: the hard one)."""
    _soft, hard = resource.getrlimit(kind)
    if value is None or (hard != resource.RLIM_INFINITY and value > hard):
        value = hard
    resource.setrlimit(kind, (value, hard))


def budget_cpu(seconds: int) -> None:
    """Allow `seconds` more CPU time from now (the soft limit; the hard one is the session's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _set_soft(resource.RLIMIT_CPU, math.ceil(usage.ru_utime + usage.ru_stime + seconds))


def budget_file_size(size: int | None) -> None:
    """Let this cell write files up to `size` bytes (what remains of the disk quota).

    The soft limit only: the hard one stays the per-file cap, and parley's watch, not this,
    holds the quota against code that raises it again. None: the per-file cap.
    """
    _set_soft(resource.RLIMIT_FSIZE, None if size is None else int(size))


# -- running a cell ----------------------------------------------------------------------------


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _user_traceback(exc: BaseException) -> str:
    """The traceback from the cell's first frame on (none for a syntax error)."""
    summary = traceback.TracebackException.from_exception(exc)
    frames = list(summary.stack)
    first = next((i for i, f in enumerate(frames) if f.filename.startswith("<cell-")), None)
    kept = [] if first is None else [f for f in frames[first:] if f.filename != __file__]
    summary.stack = traceback.StackSummary.from_list(kept)
    return "".join(summary.format())


def _compile_cell(code: str, filename: str) -> tuple[Any, Any]:
    """The cell's statements, and its last expression (to show its value) if it ends in one."""
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = compile(ast.Expression(final.value), filename, "eval")
    return compile(tree, filename, "exec"), last


def execute(
    code: str, namespace: dict[str, Any], filename: str, interrupted: Callable[[], bool]
) -> tuple[str | None, str | None]:
    """Run a cell in the namespace; returns (error traceback, repr of the last expression).

    An interrupt asked for before the cell began (`interrupted()`, checked once SIGINT would
    reach it) stops it before its first line.
    """
    try:
        _Cell.running = True
        try:
            if interrupted():
                raise KeyboardInterrupt
            body, last = _compile_cell(code, filename)
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
        finally:
            _Cell.running = False
    except BaseException as exc:  # the user's code may raise anything, even SystemExit
        return _user_traceback(exc), None
    if value is None:
        return None, None
    namespace["_"] = value
    text = repr(value)
    return None, text if len(text) <= _MAX_RESULT else text[:_MAX_RESULT] + " [...]"


def figures() -> list[str]:
    """Open matplotlib figures as base64 PNG, then closed (only if the code used pyplot)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    images: list[str] = []
    size = 0
    numbers = list(pyplot.get_fignums())
    for number in numbers:
        buffer = io.BytesIO()
        pyplot.figure(number).savefig(buffer, format="png", bbox_inches="tight")
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        if size + len(image) > _IMAGE_BYTES:
            left = len(numbers) - len(images)
            sys.stderr.write(f"({left} figure(s) not returned: over {_IMAGE_BYTES} bytes)\n")
            break
        size += len(image)
        images.append(image)
    pyplot.close("all")
    return images


def run_cell(
    request: dict[str, Any], namespace: dict[str, Any], interrupted: Callable[[], bool]
) -> dict[str, Any]:
    """Run one request and build the reply (the supervisor adds the output and files)."""
    cell = int(request["cell"])
    budget_cpu(int(request["cpu_time"]))
    budget_file_size(request.get("file_size"))
    error, result = execute(str(request["code"]), namespace, f"<cell-{cell}>", interrupted)
    try:
        images = figures()
    except Exception as exc:  # a broken figure must not lose the cell's output
        images, error = [], (error or "") + f"\n(saving figures failed: {exc!r})"
    _flush()
    return {"cell": cell, "error": error, "result": result, "images": images}


# -- the child ---------------------------------------------------------------------------------


def _prctl(option: int, value: int) -> None:
    """Linux's prctl; nothing elsewhere."""
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    if prctl is not None:
        prctl(option, ctypes.c_ulong(value), 0, 0, 0)


def _keep_only(requests: int, replies: int, stdout: int, stderr: int) -> None:
    """Keep descriptors 0-4 (see the module) and close every other one."""
    sources = (os.open(os.devnull, os.O_RDONLY), requests, replies, stdout, stderr)
    # Copies above 4 first: moving one into place must not close another still to move.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in sources]
    for source, target in zip(high, (0, REQUESTS, REPLIES, 1, 2), strict=True):
        os.dup2(source, target)
    for fd in (REQUESTS, REPLIES):
        os.set_inheritable(fd, False)  # a program the code starts does not get them
    os.closerange(REPLIES + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def confine(config: dict[str, Any], root: str, kernel: ModuleType) -> dict[str, Any]:
    """Landlock and seccomp for this process, as the parent asked; what was applied."""
    layers: dict[str, Any] = {}
    landlock = config.get("landlock")
    abi = 0
    if landlock:
        write = [*landlock["write"], root]
        abi = layers["landlock"] = kernel.restrict_files(
            landlock["read"], write, landlock["devices"]
        )
    seccomp = config.get("seccomp")
    if seccomp:
        # Where processes are refused the code signals only itself; older Landlock ABIs
        # leave path truncation ungoverned.
        kernel.deny_syscalls(
            processes=bool(seccomp["processes"]),
            sockets=bool(seccomp["sockets"]),
            signals=bool(seccomp["processes"]),
            truncate=bool(landlock) and abi < 3,
            ipc=bool(seccomp.get("ipc")),
        )
        layers["seccomp"] = True
    return layers


def _prepare(config: dict[str, Any], root: str, kernel: ModuleType, guard: ModuleType) -> Any:
    layers = confine(config, root, kernel)
    checks = config.get("guard") or {}
    if any(checks.values()):
        if checks.get("strict"):
            guard.refuse_dir_fd_opens(root)
        sys.addaudithook(guard.make_guard(root, config.get("read") or [], checks))
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    sys.dont_write_bytecode = True
    # As in a notebook, modules the code writes in its work directory can be imported.
    sys.path.insert(0, root)
    return layers


def _send(message: dict[str, Any]) -> None:
    data = memoryview((json.dumps(message) + "\n").encode())
    while data:
        data = data[os.write(REPLIES, data) :]


class Requests:
    """The supervisor's lines: cells to run, and interrupts of a cell."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.cells: deque[dict[str, Any]] = deque()
        self.interrupts: set[int] = set()
        self.closed = False

    def _read(self, *, wait: bool) -> None:
        if self.closed or (not wait and not select.select([REQUESTS], [], [], 0)[0]):
            return
        chunk = os.read(REQUESTS, 1 << 16)
        self.closed = not chunk
        self.buffer += chunk
        if b"\n" not in chunk:  # a long cell comes in many reads: split it once, at its end
            return
        *lines, rest = self.buffer.split(b"\n")
        self.buffer = bytearray(rest)
        for line in lines:
            message = json.loads(line)
            if "interrupt" in message:
                self.interrupts.add(int(message["interrupt"]))
            else:
                self.cells.append(message)

    def next_cell(self) -> dict[str, Any] | None:
        """The next cell to run; None once the pipe ends."""
        while not self.cells:
            if self.closed:
                return None
            self._read(wait=True)
        cell = self.cells.popleft()
        self.interrupts &= {int(cell["cell"])}  # an interrupt of an earlier cell came late
        return cell

    def interrupted(self, cell: int) -> bool:
        """Whether the supervisor has asked, in line, to interrupt `cell` (without waiting)."""
        self._read(wait=False)
        return cell in self.interrupts


def serve(namespace: dict[str, Any]) -> None:
    """Run cells until the supervisor closes the requests."""
    requests = Requests()
    while (request := requests.next_cell()) is not None:
        check = functools.partial(requests.interrupted, int(request["cell"]))
        _send(run_cell(request, namespace, check))


def child_main(
    config: dict[str, Any],
    parent: int,
    fds: tuple[int, int, int, int],
    dumpable: int,
    kernel: ModuleType,
    guard: ModuleType,
) -> NoReturn:
    """The REPL child, just forked: keep its descriptors, confine itself, serve; never returns.

    Args:
        config: The worker's configuration (see `_worker.py`).
        parent: The supervisor's pid.
        fds: Its requests, its replies, the stdout and the stderr capture files.
        dumpable: What `PR_SET_DUMPABLE` was before the supervisor cleared it.
        kernel: `_confine`, loaded by the supervisor.
        guard: `_guard`, loaded by the supervisor.
    """
    code = 1
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor gone, the cells go too
        if os.getppid() != parent:  # it went before that took hold
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, _on_interrupt)
        _keep_only(*fds)
        _prctl(_PR_SET_DUMPABLE, dumpable)  # its own /proc as before; the supervisor's stays shut
        layers = _prepare(config, os.getcwd(), kernel, guard)
        _send({"ready": layers})
        serve({"__name__": "__main__", "__builtins__": builtins})
        code = 0
    except BaseException:
        traceback.print_exc()  # to the stderr capture, which the supervisor passes on
        _flush()
    os._exit(code)
