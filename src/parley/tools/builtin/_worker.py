"""The code interpreter's worker: a small Python REPL spoken to in JSON lines.

Run as a script (`python -I -B _worker.py`), standard library only, so it starts fast and
imports nothing of parley; it loads its two siblings, `_confine.py` (the kernel's measures)
and `_guard.py` (the audit hook), by path. The parent writes one configuration line, then one
request per cell; the worker answers each with one line. Before it answers the configuration
it confines itself, in this order: resource limits, the unprivileged uid, Landlock, seccomp,
the audit hook; no code it is sent runs before. Its own protocol streams are private copies
of fds 0 and 1: the code's fd 1 and 2 are redirected to files per cell, so output from C code
and child processes is captured too and can never corrupt the protocol.

    -> {"limits": {...}, "guard": {"writes": bool, "network": bool, "processes": bool,
        "strict": bool}, "identity": [uid, gid, keep_read_search] | null,
        "read": [...], "landlock": {"read": [...], "write": [...], "devices": [...]} | null,
        "seccomp": {"processes": bool, "sockets": bool, "ipc": bool} | null}
    <- {"ready": true, "pid": ..., "layers": {"uid": ..., "landlock": abi, "seccomp": bool}}
    -> {"code": "...", "cpu_time": 30, "file_size": bytes | absent}
    <- {"stdout": ..., "stderr": ..., "error": ..., "result": ..., "images": [...],
        "files": [...]}
"""

from __future__ import annotations

import ast
import base64
import builtins
import importlib.util
import io
import json
import linecache
import math
import os
import resource
import signal
import sys
import tempfile
import traceback
import warnings
from types import ModuleType
from typing import IO, Any

SCRATCH = ".parley"
_MAX_FILES = 50
_MAX_RESULT = 2000


# -- limits -----------------------------------------------------------------------------------


def _lower(kind: int, value: int) -> None:
    """Set a limit to `value`, or as close as the current hard limit allows."""
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply_limits(limits: dict[str, Any]) -> None:
    """Apply the resource limits to this process (its children inherit them)."""
    _lower(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    _lower(resource.RLIMIT_FSIZE, int(limits["file_size_bytes"]))
    _lower(resource.RLIMIT_NPROC, int(limits["processes"]))
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_CPU, int(limits["session_cpu_time"]))
    # A write past RLIMIT_FSIZE then fails with EFBIG instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def budget_cpu(seconds: int) -> None:
    """Allow `seconds` more CPU time from now (the soft limit; the hard one is the session's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def budget_file_size(size: int | None) -> None:
    """Let this call write files up to `size` bytes (what remains of the disk quota).

    The soft limit only: the hard one stays the per-file cap, and the host's watch, not this,
    is what holds the quota against code that raises it again.
    """
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    soft = hard if size is None else size
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


# -- running a cell ---------------------------------------------------------------------------


class Capture:
    """Redirects fds 1 and 2 to files for one cell, and reads them back (head and tail)."""

    def __init__(self, directory: str, limit: int) -> None:
        self.limit = limit
        # Closed by read(), after the cell.
        self.files = [tempfile.TemporaryFile(dir=directory) for _ in range(2)]  # noqa: SIM115
        self.saved = [os.dup(1), os.dup(2)]

    def __enter__(self) -> Capture:
        _flush()
        for fd, file in zip((1, 2), self.files, strict=True):
            os.dup2(file.fileno(), fd)
        return self

    def __exit__(self, *exc: object) -> None:
        _flush()
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        for fd, saved in zip((1, 2), self.saved, strict=True):
            os.dup2(saved, fd)
            os.close(saved)

    def read(self) -> list[str]:
        """The captured stdout and stderr, cut in the middle past the limit."""
        texts = [_read_bounded(file, self.limit) for file in self.files]
        for file in self.files:
            file.close()
        return texts


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _read_bounded(file: IO[bytes], limit: int) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    if size <= limit:
        return file.read().decode("utf-8", "replace")
    head = file.read(limit // 2).decode("utf-8", "replace")
    file.seek(size - limit // 2)
    tail = file.read().decode("utf-8", "replace")
    return f"{head}\n[... {size - limit} bytes cut ...]\n{tail}"


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


def execute(code: str, namespace: dict[str, Any], filename: str) -> tuple[str | None, str | None]:
    """Run a cell in the namespace; returns (error traceback, repr of the last expression)."""
    try:
        body, last = _compile_cell(code, filename)
        exec(body, namespace)
        value = eval(last, namespace) if last is not None else None
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
    images = []
    for number in pyplot.get_fignums():
        buffer = io.BytesIO()
        pyplot.figure(number).savefig(buffer, format="png", bbox_inches="tight")
        images.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    pyplot.close("all")
    return images


def snapshot(root: str) -> dict[str, tuple[int, int]]:
    """Files under the work directory (but the scratch folder) with size and mtime."""
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != SCRATCH)
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            found[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
            if len(found) > 10_000:
                return found
    return found


def changed_files(before: dict[str, tuple[int, int]], root: str) -> list[str]:
    """Files created or modified since `before`."""
    after = snapshot(root)
    return sorted(path for path, stat in after.items() if before.get(path) != stat)[:_MAX_FILES]


def run_cell(
    request: dict[str, Any], namespace: dict[str, Any], number: int, config: dict[str, Any]
) -> dict[str, Any]:
    """Run one request and build the reply."""
    root = os.getcwd()
    before = snapshot(root)
    budget_cpu(int(request.get("cpu_time", config["limits"]["cpu_time"])))
    budget_file_size(request.get("file_size"))
    capture = Capture(config["scratch"], int(config["limits"]["output_chars"]))
    with capture:
        error, result = execute(str(request["code"]), namespace, f"<cell-{number}>")
        try:
            images = figures()
        except Exception as exc:  # a broken figure must not lose the cell's output
            images, error = [], (error or "") + f"\n(saving figures failed: {exc!r})"
    stdout, stderr = capture.read()
    return {
        "stdout": stdout,
        "stderr": stderr,
        "error": error,
        "result": result,
        "images": images,
        "files": changed_files(before, root),
    }


# -- the loop ---------------------------------------------------------------------------------


def _protocol_streams() -> tuple[IO[str], IO[str]]:
    """Private copies of stdin and stdout for the protocol; the code gets /dev/null and stderr."""
    reader = os.fdopen(os.dup(0), "r", encoding="utf-8")
    writer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return reader, writer


def _send(writer: IO[str], message: dict[str, Any]) -> None:
    writer.write(json.dumps(message) + "\n")
    writer.flush()


def _sibling(name: str) -> ModuleType:
    """Load a module that lives beside this script (the worker runs with `-I`: no sys.path)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_parley_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def confine(config: dict[str, Any], root: str) -> dict[str, Any]:
    """Apply the kernel's measures the parent asked for; what was applied."""
    kernel = _sibling("_confine")
    layers: dict[str, Any] = {}
    identity = config.get("identity")
    if identity:
        uid, gid, keep_read_search = identity
        kernel.drop_root(int(uid), int(gid), keep_read_search=bool(keep_read_search))
    layers["uid"] = os.getuid()
    landlock = config.get("landlock")
    abi = 0
    if landlock:
        write = [*landlock["write"], root]
        abi = layers["landlock"] = kernel.restrict_files(
            landlock["read"], write, landlock["devices"]
        )
    seccomp = config.get("seccomp")
    if seccomp:
        # Where processes are refused the worker signals only itself; older Landlock ABIs
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


def _prepare(config: dict[str, Any]) -> dict[str, Any]:
    root = os.getcwd()
    apply_limits(config["limits"])
    layers = confine(config, root)
    scratch = os.path.join(root, SCRATCH)
    config["scratch"] = os.path.join(scratch, "tmp")
    for path in (config["scratch"], os.path.join(scratch, "matplotlib")):
        os.makedirs(path, exist_ok=True)
    guard = config.get("guard") or {}
    if any(guard.values()):
        checks = _sibling("_guard")
        if guard.get("strict"):
            checks.refuse_dir_fd_opens(root)
        sys.addaudithook(checks.make_guard(root, config.get("read") or [], guard))
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    sys.dont_write_bytecode = True
    # As in a notebook, modules the code writes in its work directory can be imported.
    sys.path.insert(0, root)
    return layers


def main() -> int:
    """Serve requests until the parent closes stdin."""
    reader, writer = _protocol_streams()
    config = json.loads(reader.readline())
    layers = _prepare(config)
    _send(writer, {"ready": True, "pid": os.getpid(), "layers": layers})
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    number = 0
    while line := reader.readline():
        number += 1
        _send(writer, run_cell(json.loads(line), namespace, number, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
