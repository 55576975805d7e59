"""A document parser process: reads documents it is sent, under limits, and answers their text.

Started by `_doc_pool.py` as `python -I -B _doc_worker.py`; it imports nothing of parley and
loads its siblings `_doc_formats.py` (the readers) and `_confine.py` (the kernel's measures)
by their paths. Standard library only, apart from the formats' libraries.

The protocol, over its stdin and stdout, is frames: an 8-byte big-endian length, then that
many bytes. The parent's first frame is the configuration (JSON: `path`, `memory_bytes`,
`identity`, `landlock`, `seccomp`, `idle_exit`); the worker answers `{"ready": true,
"layers": {...}}` once it is confined. Then each request is two frames, a header (JSON:
`name`, `kind`, `limits`, `cpu_seconds`) and the document's bytes, and each answer one frame:
`{"ok": true, "kind", "sections", "note", "peak"}` or `{"ok": false, "error": "format" |
"missing" | "memory" | "crash", ...}`. Descriptors 0 and 1 are copied away for the protocol
and pointed at /dev/null, so a library that prints cannot corrupt it.

Its limits (`setrlimit`): address space (`memory_bytes`: past it allocations fail with
MemoryError, answered as `memory`, after which the worker exits), CPU seconds per document
(the soft limit raised before each; past it the kernel ends the worker with SIGXCPU), no file
written (`RLIMIT_FSIZE` 0), no core file, few descriptors. Where parley runs as root the
worker becomes `nobody`; where the kernel offers them, Landlock lets it read only Python's
files and seccomp refuses new processes, sockets and signals to others. It exits when its
input closes or after `idle_exit` seconds without a request.
"""

from __future__ import annotations

import gc
import importlib.util
import io
import json
import math
import os
import resource
import select
import struct
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

_LENGTH = struct.Struct(">Q")
_CONFIG_BYTES = 1 << 20
_HEADER_BYTES = 1 << 20
_MESSAGE_CHARS = 2000
_FILES = 64


def read_exact(fd: int, size: int) -> bytes | None:
    """Exactly `size` bytes from `fd`; None at end of input."""
    parts: list[bytes] = []
    left = size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, most: int) -> bytes | None:
    """One frame's body (None at end of input); a frame longer than `most` ends the worker."""
    head = read_exact(fd, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > most:
        raise SystemExit(f"a frame of {size} bytes, more than {most}")
    return read_exact(fd, size)


def encode(message: dict[str, Any]) -> bytes:
    """A JSON message as a frame (text as UTF-8, lone surrogates kept: `surrogatepass`)."""
    body = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _LENGTH.pack(len(body)) + body


def write_frame(fd: int, frame: bytes) -> None:
    """Send a frame made by `encode`."""
    data = memoryview(frame)
    while data:
        data = data[os.write(fd, data) :]


def _sibling(name: str) -> ModuleType:
    """Load a module that lives beside this script (registered, as dataclasses need)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_parley_doc{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def apply_limits(memory_bytes: int) -> dict[str, Any]:
    """The limits that hold for the worker's life (CPU is set per document).

    Each the kernel refuses (macOS has no `RLIMIT_AS` to speak of) is said in the answer,
    for the parent to log, rather than keeping the worker from starting.
    """
    refused: dict[str, Any] = {}
    for name, value in (
        ("RLIMIT_AS", memory_bytes),
        ("RLIMIT_CORE", 0),
        ("RLIMIT_FSIZE", 0),
        ("RLIMIT_NOFILE", _FILES),
    ):
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError) as exc:
            refused[name] = f"{type(exc).__name__}: {exc}"
    return refused


def confine(config: dict[str, Any]) -> dict[str, Any]:
    """Apply the kernel's measures the parent asked for; what was applied (or why not)."""
    kernel = _sibling("_confine")
    layers: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[Any], object]]] = [
        ("identity", lambda v: kernel.drop_root(v[0], v[1], keep_read_search=bool(v[2]))),
        ("landlock", lambda v: kernel.restrict_files(v, [], [])),
        ("seccomp", lambda v: kernel.deny_syscalls(processes=True, sockets=True, signals=True)),
    ]
    for name, step in steps:
        value = config.get(name)
        if not value:
            continue
        try:
            step(value)
            layers[name] = True
        except OSError as exc:  # the parent logs it: parsing goes on with the other measures
            layers[name] = f"{type(exc).__name__}: {exc}"
    layers["uid"] = os.getuid()
    return layers


def _cpu_budget(seconds: int) -> None:
    """Allow `seconds` more CPU seconds from now; past them the kernel sends SIGXCPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = math.ceil(usage.ru_utime + usage.ru_stime)
    resource.setrlimit(resource.RLIMIT_CPU, (used + seconds, resource.RLIM_INFINITY))


def _limits(formats: ModuleType, header: dict[str, Any]) -> Any:
    given = header["limits"]
    return formats.ReadLimits(
        max_rows=int(given["max_rows"]),
        max_pages=int(given["max_pages"]),
        max_chars=int(given["max_chars"]),
        unpacked={str(k): int(v) for k, v in given["unpacked"].items()},
    )


def _sections(extracted: Any) -> list[list[Any]]:
    """Each section as [kind, number, title, item kinds ("t"/"T"), texts]: few bytes each."""
    return [
        [
            section.kind,
            section.number,
            section.title,
            "".join("T" if item.kind == "table" else "t" for item in section.items),
            [item.text for item in section.items],
        ]
        for section in extracted.sections
    ]


def _peak() -> int:
    """The most memory this process has held resident (VmHWM), in bytes; 0 if unknown.

    Not `ru_maxrss`: Linux carries it across `execve`, so a worker started by a large
    parent would start at the parent's peak.
    """
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def parse(formats: ModuleType, header: dict[str, Any], data: bytes) -> dict[str, Any]:
    """Read one document; the answer to send."""
    try:
        extracted = formats.read_document(
            io.BytesIO(data), str(header["name"]), header.get("kind"), _limits(formats, header)
        )
    except formats.MissingLibraryError as exc:
        return {"ok": False, "error": "missing", "package": exc.package, "extra": exc.extra}
    except formats.FormatError as exc:
        # The peak tells a library's "unknown error" when it was an allocation that failed.
        message = str(exc)[:_MESSAGE_CHARS]
        return {"ok": False, "error": "format", "message": message, "peak": _peak()}
    return {
        "ok": True,
        "kind": extracted.kind,
        "sections": _sections(extracted),
        "note": extracted.note,
        "peak": _peak(),
    }


def serve(source: int, sink: int, formats: ModuleType, idle_exit: float) -> None:
    """Answer requests until the input closes, a parse runs out of memory, or idleness."""
    while True:
        ready, _, _ = select.select([source], [], [], idle_exit)
        if not ready:
            return
        header_bytes = read_frame(source, _HEADER_BYTES)
        if header_bytes is None:
            return
        header = json.loads(header_bytes)
        data = read_frame(source, int(header["size"]))
        if data is None:
            return
        _cpu_budget(int(header["cpu_seconds"]))
        try:
            frame = encode(parse(formats, header, data))
        except MemoryError:
            frame = b""
        del data
        if not frame:  # out of the try: what the parse held is freed before answering
            gc.collect()
            write_frame(sink, encode({"ok": False, "error": "memory"}))
            return  # its heap may be left in pieces: a fresh worker takes the next document
        write_frame(sink, frame)


def main() -> None:
    source, sink = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    os.dup2(quiet, 0)
    os.dup2(quiet, 1)
    config_bytes = read_frame(source, _CONFIG_BYTES)
    if config_bytes is None:
        return
    config = json.loads(config_bytes)
    sys.path[:] = [str(p) for p in config["path"]]
    formats = _sibling("_doc_formats")
    refused = apply_limits(int(config["memory_bytes"]))
    layers = {**confine(config), **refused}
    os.dup2(quiet, 2)  # the parent stops reading it once ready
    write_frame(sink, encode({"ready": True, "layers": layers}))
    try:
        serve(source, sink, formats, float(config["idle_exit"]))
    except Exception:  # a bug here, not in a document: said to the parent, which logs it
        crash = {"ok": False, "error": "crash", "message": traceback.format_exc()[-4000:]}
        write_frame(sink, encode(crash))


if __name__ == "__main__":
    main()
