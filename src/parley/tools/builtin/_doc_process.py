"""One document parser process (`_doc_worker.py`), seen from parley's side.

It is started with an empty environment, `-I -B`, in its own session; its first message
tells it its memory limit and how to confine itself (`config`: the uid, the Landlock paths,
seccomp), and it answers when it is ready. Requests and answers are frames: an 8-byte
big-endian length, then that many bytes (JSON, or the document's bytes). An answer is read
with a deadline and a length cap: past either, the process is killed. `ParserPool` keeps these
processes; nothing here decides when to start or end one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import mimetypes
import os
import select
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parley.errors import ToolExecutionError
from parley.tools.builtin import _confine
from parley.tools.builtin.sandbox import SANDBOX_USER, drops_root, read_paths

__all__ = [
    "WORKER_SCRIPT",
    "AnswerReader",
    "FilePayload",
    "ParserProcess",
    "Payload",
    "ProcessStoppedError",
    "close_all",
    "config",
]

logger = logging.getLogger("parley.tools")

WORKER_SCRIPT = Path(__file__).with_name("_doc_worker.py")
_LENGTH = struct.Struct(">Q")
_START_SECONDS = 30.0
_READY_BYTES = 64 * 1024
_ONE_WRITE = 1024 * 1024
_TOOL = "doc_parser"
# openpyxl's `MimeTypes()` reads the system's tables once (`mimetypes.init`).
_MIME_TYPES = [f for f in mimetypes.knownfiles if os.path.isfile(f)]
# Nothing of the parent's environment (keys, tokens) reaches a parser.
_ENVIRONMENT = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_SIGNALS = {
    signal.SIGXCPU: "used more CPU time than it may",
    signal.SIGXFSZ: "tried to write a file",
    signal.SIGSEGV: "crashed (a segmentation fault)",
    signal.SIGABRT: "crashed (aborted)",
}


@dataclass(frozen=True)
class FilePayload:
    """An open regular file to send as the document, `size` bytes from its start."""

    fd: int
    size: int


Payload = bytes | FilePayload


class ProcessStoppedError(Exception):
    """The process is gone or was killed (why it was killed is its `killed`)."""


def _describe_exit(code: int | None) -> str:
    if code is None or code >= 0:
        return f"ended unexpectedly (exit status {code})"
    number = -code
    if number == signal.SIGKILL:
        return "was killed by the system (out of memory?)"
    known = _SIGNALS.get(signal.Signals(number)) if number in signal.valid_signals() else None
    return known or f"was ended by signal {number}"


class ParserProcess:
    """One parser process, used by one call at a time.

    Raises:
        ToolExecutionError: It could not be started (said in the log, with its stderr).
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # until it is ready: why it could not start
                env=_ENVIRONMENT,
                cwd="/",
                start_new_session=True,  # a terminal's Ctrl-C is the parent's to handle
            )
        except OSError as exc:
            logger.warning("cannot start a document parser process: %r", exc)
            raise ToolExecutionError(
                f"the document parser process could not start: {exc.strerror}", tool_name=_TOOL
            ) from None
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN)
        self.killed: str | None = None
        self.documents = 0
        self.last_used = time.monotonic()
        try:
            self._send(json.dumps(dict(config)).encode())
            ready = self.receive(time.monotonic() + _START_SECONDS, _READY_BYTES)
        except ProcessStoppedError:
            self.kill("start")
            end = self.describe_end()
            logger.warning("a document parser process %s as it started: %s", end, self._errors())
            raise ToolExecutionError(
                f"the document parser process could not start: it {end} (see the log)",
                tool_name=_TOOL,
            ) from None
        finally:
            assert self.proc.stderr is not None
            self.proc.stderr.close()  # ready: the worker's stderr is /dev/null from now on
        self.layers: dict[str, Any] = ready.get("layers", {})

    def _errors(self) -> str:
        """The end of what the worker wrote to stderr before it was ready."""
        assert self.proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            return self.proc.stderr.read(64 * 1024).decode(errors="replace")[-4000:]
        return ""

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    def _send(self, body: bytes | memoryview) -> None:
        self._write(_LENGTH.pack(len(body)))
        self._write(body)

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._in, view) :]
        except OSError:  # EPIPE: it died
            raise ProcessStoppedError from None

    def _send_file(self, payload: FilePayload) -> None:
        """The file's bytes, never all in this process: `sendfile`, else a block at a time."""
        self._write(_LENGTH.pack(payload.size))
        offset = 0
        while offset < payload.size:
            left = payload.size - offset
            try:
                sent = os.sendfile(self._in, payload.fd, offset, left)
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    raise ProcessStoppedError from None
                # No sendfile to a pipe here (macOS sends only to sockets).
                block = os.pread(payload.fd, min(left, 1 << 20), offset)
                self._write(block)
                sent = len(block)
            if sent == 0:  # the file shrank while it was sent
                self.kill("shrunk")
                raise ProcessStoppedError
            offset += sent

    def send(self, header: dict[str, Any], payload: Payload) -> None:
        """Send a request and its document (a small one in one write: one wake-up)."""
        head = json.dumps(header).encode()
        if isinstance(payload, FilePayload):
            self._send(head)
            self._send_file(payload)
        elif len(payload) <= _ONE_WRITE:
            self._write(
                b"".join([_LENGTH.pack(len(head)), head, _LENGTH.pack(len(payload)), payload])
            )
        else:
            self._send(head)
            self._send(payload)

    def _read(self, size: int, deadline: float) -> bytes:
        parts: list[bytes] = []
        left = size
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill("timeout")
                raise ProcessStoppedError
            # poll, not select: a server's descriptors may number past select's 1024.
            if not self._poll.poll(remaining * 1000):
                continue
            chunk = os.read(self._out, min(left, 1 << 20))
            if not chunk:
                raise ProcessStoppedError
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def receive(self, deadline: float, most: int) -> dict[str, Any]:
        """The next answer; kills the worker past `deadline` or when longer than `most`."""
        (size,) = _LENGTH.unpack(self._read(_LENGTH.size, deadline))
        if size > most:
            self.kill("too long")
            raise ProcessStoppedError
        answer: dict[str, Any] = json.loads(
            self._read(size, deadline).decode("utf-8", "surrogatepass")
        )
        return answer

    @property
    def out_fd(self) -> int:
        """The descriptor its answers come on."""
        return self._out

    def read_ready(self) -> bytes:
        """What it has written (the descriptor is readable: this does not block).

        Raises:
            ProcessStoppedError: It closed its output (it died, or was killed).
        """
        try:
            chunk = os.read(self._out, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            raise ProcessStoppedError
        return chunk

    def kill(self, why: str) -> None:
        """Kill the process now (its memory goes with it); `why` is kept for the error."""
        if self.killed is None:
            self.killed = why
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def alive(self) -> bool:
        """Whether it runs and was not killed."""
        return self.killed is None and self.proc.poll() is None

    def describe_end(self) -> str:
        """How it ended, reaped (waits for it)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return _describe_exit(self.proc.returncode)

    def close(self) -> None:
        """Let it exit (its input closes); kill it if it does not at once."""
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill("close")
            self.proc.wait(timeout=10)


class AnswerReader:
    """An answer put together from what the process writes, as it comes (on a loop)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.too_long = False
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> dict[str, Any] | None:
        """Add what came; the answer once whole, else None.

        Raises:
            ProcessStoppedError: The answer announces more than `most` bytes.
        """
        self._buffer += chunk
        if len(self._buffer) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(self._buffer)
        if size > self.most:
            self.too_long = True
            raise ProcessStoppedError
        if len(self._buffer) < _LENGTH.size + size:
            return None
        body = bytes(self._buffer[_LENGTH.size : _LENGTH.size + size])
        answer: dict[str, Any] = json.loads(body.decode("utf-8", "surrogatepass"))
        return answer


def config(memory_bytes: int, idle_seconds: float) -> dict[str, Any]:
    """A process's first message: its memory limit, and how it confines itself."""
    landlock = sys.platform.startswith("linux") and _confine.landlock_abi() >= 1
    paths = [p for p in sys.path if isinstance(p, str) and p and os.path.exists(p)]
    return {
        "path": paths,
        "memory_bytes": memory_bytes,
        # Like the code interpreter's weak modes: `nobody`, reading Python where `nobody` may
        # not look (under /root) through CAP_DAC_READ_SEARCH, bounded by Landlock.
        "identity": [SANDBOX_USER, SANDBOX_USER, True] if drops_root() else None,
        # /proc/self: its own peak memory (VmHWM).
        "landlock": [*read_paths(), *paths, *_MIME_TYPES, str(WORKER_SCRIPT.parent), "/proc/self"]
        if landlock
        else None,
        "seccomp": _confine.seccomp_supported(),
        # Well after the parent stops using it, so that it never exits under a request.
        "idle_exit": 2 * idle_seconds + 30,
    }


def close_all(workers: list[ParserProcess]) -> None:
    """Close each process (they exit as their input closes)."""
    for worker in workers:
        worker.close()
