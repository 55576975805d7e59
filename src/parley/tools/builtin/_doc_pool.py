"""Parsing documents in child processes with limits: a small pool of parser processes.

A document from a user or a model may be built to pin whoever parses it: a PDF of 660 KiB
whose pages inflate to millions of text operators took 42 s and 800 MB in the server's own
thread, and went on after the tool's call had timed out. So parley does not parse documents
in its own process (save short text and Markdown files, which are decoded and split at blank
lines: nothing there can inflate, and a round trip would cost more than the reading). Each
document goes to a parser process (`_doc_worker.py`) with an address-space
limit, a CPU limit, no file writes, no new processes, sockets or signals where the kernel
can refuse them, and as `nobody` where parley runs as root; the process is killed at the
document's timeout, or when the call waiting for it is cancelled, and its memory goes with
it. The text comes back bounded: the worker stops reading at the request's page and
character limits, and an answer longer than those limits allow ends the worker.

Starting a Python process and importing a PDF library takes a tenth of a second or more, so
processes are kept: a pool of up to `max_workers`, started on demand, each used for one
document at a time, closed after `idle_seconds` unused, after `max_documents`, or as soon as
a document made it grow past `recycle_bytes` (Python keeps what it once allocated).
A process that dies is replaced by the next document that needs one.

    pool = parser_pool(memory_bytes)          # one pool per memory limit, for the process
    extracted = pool.parse(request, data)      # or: await pool.aparse(request, data)
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import io
import json
import logging
import math
import mimetypes
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parley.errors import MissingDependencyError, ToolExecutionError
from parley.tools.builtin import _confine
from parley.tools.builtin._doc_formats import (
    Extracted,
    FormatError,
    Item,
    ReadLimits,
    Section,
    read_document,
)
from parley.tools.builtin.sandbox import SANDBOX_USER, drops_root, read_paths
from parley.tools.executor import tool_executor

__all__ = [
    "WORKER_SCRIPT",
    "FilePayload",
    "ParseLimitError",
    "ParseRequest",
    "ParserPool",
    "parser_pool",
]

logger = logging.getLogger("parley.tools")

WORKER_SCRIPT = Path(__file__).with_name("_doc_worker.py")
_LENGTH = struct.Struct(">Q")
_START_SECONDS = 30.0
_READY_BYTES = 64 * 1024
_ONE_WRITE = 1024 * 1024
# A request this small fits an empty pipe (64 KiB) whole: written from the loop, it cannot
# block it. Larger ones are written from a thread.
_ON_THE_LOOP = 32 * 1024
_TOOL = "doc_parser"
_INLINE_KINDS = ("text", "markdown")
_INLINE_BYTES = 256 * 1024
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


class ParseLimitError(ToolExecutionError):
    """Parsing a document was stopped: too long, too much memory, or its process died.

    Nothing else was affected; the next document gets a fresh process.
    """


@dataclass(frozen=True)
class ParseRequest:
    """One document to parse.

    Attributes:
        name: Its file name (its extension tells the format; errors name it).
        kind: Its format (`doc_parser.detect_format`), or None to read it as text if it
            looks like text.
        limits: What is read of it.
        timeout: Seconds the parse may take before its process is killed.
    """

    name: str
    kind: str | None
    limits: ReadLimits = field(default_factory=ReadLimits)
    timeout: float = 120.0

    def header(self, size: int) -> dict[str, Any]:
        """The request as the worker reads it."""
        limits = self.limits
        return {
            "name": self.name,
            "kind": self.kind,
            "size": size,
            "cpu_seconds": math.ceil(self.timeout) + 1,
            "limits": {
                "max_rows": limits.max_rows,
                "max_pages": limits.max_pages,
                "max_chars": limits.max_chars,
                "unpacked": dict(limits.unpacked),
            },
        }

    def most_answer_bytes(self) -> int:
        """The longest answer these limits allow.

        JSON: at most 6 bytes a character, each item of at least one character and 4 bytes of
        its own, each section 64 or so.
        """
        limits = self.limits
        return 10 * limits.max_chars + 64 * (limits.max_pages + 1) + 64 * 1024


@dataclass(frozen=True)
class FilePayload:
    """An open regular file to send as the document, `size` bytes from its start."""

    fd: int
    size: int


Payload = bytes | FilePayload


class _StoppedError(Exception):
    """The worker is gone or was killed (the reason is on the worker)."""


class _CancelledError(Exception):
    """The call was cancelled while it waited for a worker."""


def _describe_exit(code: int | None) -> str:
    if code is None or code >= 0:
        return f"ended unexpectedly (exit status {code})"
    number = -code
    if number == signal.SIGKILL:
        return "was killed by the system (out of memory?)"
    known = _SIGNALS.get(signal.Signals(number)) if number in signal.valid_signals() else None
    return known or f"was ended by signal {number}"


class _Worker:
    """One parser process, used by one call at a time."""

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
        except _StoppedError:
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
            raise _StoppedError from None

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
                    raise _StoppedError from None
                # No sendfile to a pipe here (macOS sends only to sockets).
                block = os.pread(payload.fd, min(left, 1 << 20), offset)
                self._write(block)
                sent = len(block)
            if sent == 0:  # the file shrank while it was sent
                self.kill("shrunk")
                raise _StoppedError
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
                raise _StoppedError
            # poll, not select: a server's descriptors may number past select's 1024.
            if not self._poll.poll(remaining * 1000):
                continue
            chunk = os.read(self._out, min(left, 1 << 20))
            if not chunk:
                raise _StoppedError
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def receive(self, deadline: float, most: int) -> dict[str, Any]:
        """The next answer; kills the worker past `deadline` or when longer than `most`."""
        (size,) = _LENGTH.unpack(self._read(_LENGTH.size, deadline))
        if size > most:
            self.kill("too long")
            raise _StoppedError
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
            _StoppedError: It closed its output (it died, or was killed).
        """
        try:
            chunk = os.read(self._out, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            raise _StoppedError
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


class _Framer:
    """An answer put together from what the worker writes, as it comes."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.too_long = False
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> dict[str, Any] | None:
        """Add what came; the answer once whole, else None.

        Raises:
            _StoppedError: The answer announces more than `most` bytes.
        """
        self._buffer += chunk
        if len(self._buffer) < _LENGTH.size:
            return None
        (size,) = _LENGTH.unpack_from(self._buffer)
        if size > self.most:
            self.too_long = True
            raise _StoppedError
        if len(self._buffer) < _LENGTH.size + size:
            return None
        body = bytes(self._buffer[_LENGTH.size : _LENGTH.size + size])
        answer: dict[str, Any] = json.loads(body.decode("utf-8", "surrogatepass"))
        return answer


@dataclass(eq=False)
class _Call:
    """One parse: the worker it holds, and whether it was cancelled."""

    worker: _Worker | None = None
    cancelled: bool = False


def _config(memory_bytes: int, idle_seconds: float) -> dict[str, Any]:
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


def _extracted(answer: Mapping[str, Any]) -> Extracted:
    sections = []
    for kind, number, title, kinds, texts in answer["sections"]:
        items = [
            Item("table" if mark == "T" else "text", text)
            for mark, text in zip(kinds, texts, strict=True)
        ]
        sections.append(Section(kind, number, title, items))
    return Extracted(answer["kind"], sections, answer.get("note"))


class ParserPool:
    """Parser processes under one memory limit, started on demand and reused.

    Args:
        memory_bytes: The address space of each process (`RLIMIT_AS`).
        max_workers: Processes at once; more calls wait for one.
        idle_seconds: A process unused this long is closed at the next call.
        max_documents: A process is closed after this many documents.
        recycle_bytes: A process whose resident memory grew past this is closed after the
            document that grew it.
    """

    def __init__(
        self,
        memory_bytes: int,
        *,
        max_workers: int = 2,
        idle_seconds: float = 60.0,
        max_documents: int = 500,
        recycle_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.memory_bytes = memory_bytes
        self.max_workers = max_workers
        self.idle_seconds = idle_seconds
        self.max_documents = max_documents
        self.recycle_bytes = recycle_bytes
        self._lock = threading.Condition()
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._starting = 0
        self._warned = False
        self.layers: dict[str, Any] = {}
        """How the newest process is confined: `identity`, `landlock`, `seccomp` (True, or
        why not), and `uid`."""

    @property
    def pids(self) -> list[int]:
        """The processes now running, idle or parsing."""
        with self._lock:
            return sorted(w.pid for w in [*self._idle, *self._busy])

    @property
    def busy_pids(self) -> list[int]:
        """The processes parsing a document now."""
        with self._lock:
            return sorted(w.pid for w in self._busy)

    # -- calls ----------------------------------------------------------------------------------

    def parse(self, request: ParseRequest, payload: Payload) -> Extracted:
        """Parse one document in a parser process (blocking).

        Raises:
            ToolExecutionError: The document cannot be read as its format (or no format).
            ParseLimitError: The parse took longer than `request.timeout`, needed more than
                `memory_bytes`, or its process died; the process is gone.
            MissingDependencyError: The format's library is not installed.
        """
        return self._inline(request, payload) or self._parse(_Call(), request, payload)

    async def aparse(self, request: ParseRequest, payload: Payload) -> Extracted:
        """`parse` without blocking the loop; cancelling it kills the process at once.

        A small document given to an idle process is sent and awaited on the loop itself
        (one round trip, no thread). Otherwise the waiting is done on the tools' threads
        (`tool_executor`); either way a cancelled call kills its process, which ends the
        wait at once, so no thread is left parsing for a call that gave up.
        """
        inline = self._inline(request, payload)
        if inline is not None:
            return inline
        if isinstance(payload, bytes) and len(payload) <= _ON_THE_LOOP:
            worker = self._take_idle()
            if worker is not None:
                try:
                    answer = await self._exchange_on_loop(worker, request, payload)
                finally:
                    self._checkin(worker)
                return self._result(request, answer)
        call = _Call()
        job = tool_executor().submit(self._parse, call, request, payload)
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._cancel(call)
            raise

    def _inline(self, request: ParseRequest, payload: Payload) -> Extracted | None:
        """A short text or Markdown file, read here; None for anything else.

        Reading one is decoding it and splitting it at blank lines: linear in its size, with
        nothing to inflate, so a file of at most `_INLINE_BYTES` cannot pin this process,
        and a parser's round trip would cost more than the reading (indexing a folder of
        small notes took half as long again).
        """
        if request.kind not in _INLINE_KINDS:
            return None
        if isinstance(payload, FilePayload):
            if payload.size > _INLINE_BYTES:
                return None
            payload = os.pread(payload.fd, payload.size, 0)
        if len(payload) > _INLINE_BYTES:
            return None
        try:
            return read_document(io.BytesIO(payload), request.name, request.kind, request.limits)
        except FormatError as exc:
            raise ToolExecutionError(str(exc), tool_name=_TOOL) from exc

    def _parse(self, call: _Call, request: ParseRequest, payload: Payload) -> Extracted:
        worker = self._checkout(call)
        try:
            answer = self._exchange(worker, request, payload)
        finally:
            self._checkin(worker)
        return self._result(request, answer)

    def _exchange(self, worker: _Worker, request: ParseRequest, payload: Payload) -> Any:
        size = payload.size if isinstance(payload, FilePayload) else len(payload)
        deadline = time.monotonic() + request.timeout
        try:
            worker.send(request.header(size), payload)
            answer = worker.receive(deadline, request.most_answer_bytes())
        except _StoppedError:
            raise self._stopped(worker, request) from None
        return self._answered(worker, answer)

    async def _exchange_on_loop(
        self, worker: _Worker, request: ParseRequest, payload: bytes
    ) -> dict[str, Any]:
        """Send a small request and await the answer through the loop's selector.

        The request fits the empty pipe whole, so writing it from the loop cannot block.
        """
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[dict[str, Any]] = loop.create_future()
        framer = _Framer(request.most_answer_bytes())

        def readable() -> None:
            if answered.done():
                return
            try:
                done = framer.feed(worker.read_ready())
            except _StoppedError as exc:
                answered.set_exception(exc)
                return
            if done is not None:
                answered.set_result(done)

        try:
            worker.send(request.header(len(payload)), payload)
            loop.add_reader(worker.out_fd, readable)
            try:
                async with asyncio.timeout(request.timeout):
                    answer = await answered
            finally:
                loop.remove_reader(worker.out_fd)
        except TimeoutError:
            worker.kill("timeout")
            raise self._stopped(worker, request) from None
        except asyncio.CancelledError:
            worker.kill("cancelled")
            raise
        except _StoppedError:
            if framer.too_long:
                worker.kill("too long")
            raise self._stopped(worker, request) from None
        return self._answered(worker, answer)

    def _answered(self, worker: _Worker, answer: dict[str, Any]) -> dict[str, Any]:
        worker.documents += 1
        if answer.get("error") == "memory":
            worker.kill("memory")  # it exits by itself; killed not to wait for it
        elif answer.get("peak", 0) > self.recycle_bytes:
            worker.kill("recycle")  # Python keeps what it grew to: a fresh one is smaller
        return answer

    def _stopped(self, worker: _Worker, request: ParseRequest) -> ParseLimitError:
        why = worker.killed
        end = worker.describe_end()
        name = request.name
        if why == "timeout":
            message = (
                f"cannot read {name}: parsing it took longer than {request.timeout:g} seconds "
                "(the parser's timeout), so it was stopped"
            )
        elif why == "cancelled":
            message = f"cannot read {name}: parsing it was cancelled"
        elif why == "too long":
            message = f"cannot read {name}: its parser answered more than its limits allow"
        elif why == "shrunk":
            message = f"cannot read {name}: the file got shorter while it was read"
        else:
            message = f"cannot read {name}: its parser process {end}"
            logger.warning("a document parser process %s while parsing %s", end, name)
        return ParseLimitError(message, tool_name=_TOOL)

    def _result(self, request: ParseRequest, answer: Mapping[str, Any]) -> Extracted:
        if answer.get("ok"):
            return _extracted(answer)
        error = answer.get("error")
        if error == "missing":
            raise MissingDependencyError(str(answer["package"]), str(answer["extra"]))
        # lxml and others report a failed allocation as an error of theirs ("unknown error"):
        # a parse that failed with its memory all but spent is taken for out of memory.
        spent = answer.get("peak", 0) >= 0.8 * self.memory_bytes
        if error == "memory" or (error == "format" and spent):
            said = f" ({answer['message']})" if error == "format" else ""
            raise ParseLimitError(
                f"cannot read {request.name}: parsing it needed more memory than the "
                f"{_mib(self.memory_bytes)} a parser may use (memory_bytes), so it was "
                f"stopped{said}",
                tool_name=_TOOL,
            )
        if error == "format":
            raise ToolExecutionError(str(answer["message"]), tool_name=_TOOL)
        logger.warning("the document parser failed on %s: %s", request.name, answer.get("message"))
        raise ParseLimitError(
            f"cannot read {request.name}: its parser failed (see the server's log)",
            tool_name=_TOOL,
        )

    # -- workers --------------------------------------------------------------------------------

    def _take_idle(self) -> _Worker | None:
        """An idle worker if one is ready now (never waits; stale ones closed aside)."""
        with self._lock:
            stale = self._take_stale()
            worker = self._idle.pop() if self._idle else None
            if worker is not None:
                self._busy.add(worker)
        if stale:  # closing waits for the processes: not on the caller's loop
            tool_executor().submit(_close_all, stale)
        return worker

    def _checkout(self, call: _Call) -> _Worker:
        """An idle worker, else a new one when fewer than `max_workers` run, else wait."""
        with self._lock:
            stale = self._take_stale()
        for old in stale:
            old.close()
        with self._lock:
            while not self._idle and len(self._busy) + self._starting >= self.max_workers:
                if call.cancelled:
                    raise _CancelledError
                self._lock.wait()
            if call.cancelled:
                raise _CancelledError
            if self._idle:
                worker = self._idle.pop()
                self._busy.add(worker)
                call.worker = worker
                return worker
            self._starting += 1
        return self._start(call)

    def _start(self, call: _Call) -> _Worker:
        try:
            # Made at each start: the path is the process's as it is now.
            worker = _Worker(_config(self.memory_bytes, self.idle_seconds))
        except BaseException:
            with self._lock:
                self._starting -= 1
                self._lock.notify()
            raise
        self._note_layers(worker.layers)
        with self._lock:
            self._starting -= 1
            self._busy.add(worker)
            call.worker = worker
            if call.cancelled:
                worker.kill("cancelled")
        return worker

    def _note_layers(self, layers: Mapping[str, Any]) -> None:
        self.layers = dict(layers)
        failed = {k: v for k, v in layers.items() if isinstance(v, str)}
        if failed and not self._warned:
            self._warned = True
            logger.warning("document parser processes run without %s", failed)

    def _take_stale(self) -> list[_Worker]:
        """The idle workers unused for `idle_seconds`, or dead, taken out (lock held)."""
        now = time.monotonic()
        stale = [w for w in self._idle if now - w.last_used > self.idle_seconds or not w.alive()]
        self._idle = [w for w in self._idle if w not in stale]
        return stale

    def _checkin(self, worker: _Worker) -> None:
        with self._lock:
            self._busy.discard(worker)
            keep = worker.alive() and worker.documents < self.max_documents
            if keep:
                worker.last_used = time.monotonic()
                self._idle.append(worker)
            self._lock.notify()
        if not keep:
            worker.close()

    def _cancel(self, call: _Call) -> None:
        with self._lock:
            call.cancelled = True
            worker = call.worker
            self._lock.notify_all()
        if worker is not None:
            worker.kill("cancelled")

    def close(self) -> None:
        """Close the idle processes and kill the busy ones."""
        with self._lock:
            idle, busy = list(self._idle), list(self._busy)
            self._idle.clear()
        for worker in busy:
            worker.kill("close")
        for worker in idle:
            worker.close()


def _close_all(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.close()


def _mib(size: int) -> str:
    return f"{size // (1024 * 1024)} MiB"


_pools: dict[int, ParserPool] = {}
_pools_lock = threading.Lock()


def parser_pool(memory_bytes: int) -> ParserPool:
    """The process's pool for a memory limit (made on first use; closed at exit)."""
    with _pools_lock:
        pool = _pools.get(memory_bytes)
        if pool is None:
            workers = max(2, min(4, os.cpu_count() or 1))
            pool = _pools[memory_bytes] = ParserPool(memory_bytes, max_workers=workers)
        return pool


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _forget_pools() -> None:
    """In a child made by fork: the parent's processes are the parent's to use."""
    _pools.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)
