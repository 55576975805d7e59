"""Parsing documents in child processes with limits: a small pool of parser processes.

A document from a user or a model may be built to pin whoever parses it: a PDF of 660 KiB
whose pages inflate to millions of text operators took 42 s and 800 MB in the server's own
thread, and went on after the tool's call had timed out. So parley does not parse documents
in its own process (save short text and Markdown files, which are decoded and split at blank
lines: nothing there can inflate, and a round trip would cost more than the reading). Each
document goes to a parser process (`_doc_worker.py`, driven by `_doc_process.py`) with an
address-space limit, a CPU limit, no file writes, no new processes, sockets or signals where
the kernel can refuse them, and as `nobody` where parley runs as root; the process is killed
at the document's timeout, or when the call waiting for it is cancelled, and its memory goes
with it. The text comes back bounded: the worker stops reading at the request's page and
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
import io
import logging
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from parley.errors import MissingDependencyError, ToolExecutionError
from parley.tools.builtin._doc_formats import (
    Extracted,
    FormatError,
    Item,
    ReadLimits,
    Section,
    read_document,
)
from parley.tools.builtin._doc_process import (
    AnswerReader,
    FilePayload,
    ParserProcess,
    Payload,
    ProcessStoppedError,
    close_all,
    config,
)
from parley.tools.executor import tool_executor

__all__ = [
    "ParseLimitError",
    "ParseRequest",
    "ParserPool",
    "parser_pool",
]

logger = logging.getLogger("parley.tools")

# A request this small fits an empty pipe (64 KiB) whole: written from the loop, it cannot
# block it. Larger ones are written from a thread.
_ON_THE_LOOP = 32 * 1024
_TOOL = "doc_parser"
_INLINE_KINDS = ("text", "markdown")
_INLINE_BYTES = 256 * 1024


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


class _CancelledError(Exception):
    """The call was cancelled while it waited for a worker."""


@dataclass(eq=False)
class _Call:
    """One parse: the worker it holds, and whether it was cancelled."""

    worker: ParserProcess | None = None
    cancelled: bool = False


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
        self._idle: list[ParserProcess] = []
        self._busy: set[ParserProcess] = set()
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

    def _exchange(self, worker: ParserProcess, request: ParseRequest, payload: Payload) -> Any:
        size = payload.size if isinstance(payload, FilePayload) else len(payload)
        deadline = time.monotonic() + request.timeout
        try:
            worker.send(request.header(size), payload)
            answer = worker.receive(deadline, request.most_answer_bytes())
        except ProcessStoppedError:
            raise self._stopped(worker, request) from None
        return self._answered(worker, answer)

    async def _exchange_on_loop(
        self, worker: ParserProcess, request: ParseRequest, payload: bytes
    ) -> dict[str, Any]:
        """Send a small request and await the answer through the loop's selector.

        The request fits the empty pipe whole, so writing it from the loop cannot block.
        """
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[dict[str, Any]] = loop.create_future()
        framer = AnswerReader(request.most_answer_bytes())

        def readable() -> None:
            if answered.done():
                return
            try:
                done = framer.feed(worker.read_ready())
            except ProcessStoppedError as exc:
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
        except ProcessStoppedError:
            if framer.too_long:
                worker.kill("too long")
            raise self._stopped(worker, request) from None
        return self._answered(worker, answer)

    def _answered(self, worker: ParserProcess, answer: dict[str, Any]) -> dict[str, Any]:
        worker.documents += 1
        if answer.get("error") == "memory":
            worker.kill("memory")  # it exits by itself; killed not to wait for it
        elif answer.get("peak", 0) > self.recycle_bytes:
            worker.kill("recycle")  # Python keeps what it grew to: a fresh one is smaller
        return answer

    def _stopped(self, worker: ParserProcess, request: ParseRequest) -> ParseLimitError:
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

    def _take_idle(self) -> ParserProcess | None:
        """An idle worker if one is ready now (never waits; stale ones closed aside)."""
        with self._lock:
            stale = self._take_stale()
            worker = self._idle.pop() if self._idle else None
            if worker is not None:
                self._busy.add(worker)
        if stale:  # closing waits for the processes: not on the caller's loop
            tool_executor().submit(close_all, stale)
        return worker

    def _checkout(self, call: _Call) -> ParserProcess:
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

    def _start(self, call: _Call) -> ParserProcess:
        try:
            # Made at each start: the path is the process's as it is now.
            worker = ParserProcess(config(self.memory_bytes, self.idle_seconds))
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

    def _take_stale(self) -> list[ParserProcess]:
        """The idle workers unused for `idle_seconds`, or dead, taken out (lock held)."""
        now = time.monotonic()
        stale = [w for w in self._idle if now - w.last_used > self.idle_seconds or not w.alive()]
        self._idle = [w for w in self._idle if w not in stale]
        return stale

    def _checkin(self, worker: ParserProcess) -> None:
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
