"""The stdio transport: the server as a subprocess, JSON-RPC lines over its stdin and stdout.

parley runs the process itself, rather than through the SDK's `stdio_client`, to know what that
one keeps to itself: the exit code of a server that died, and the last lines it wrote to
stderr, so that an error can say why. Shutdown follows the protocol's order (close stdin, wait,
SIGTERM, wait, SIGKILL), every wait bounded.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from parley.tools.mcp._config import StdioServerConfig

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams
    from mcp.shared.message import SessionMessage

__all__ = ["StdioTransport"]

_GRACE = 2.0  # seconds for each step of the shutdown
_POLL = 0.01
_STDERR_LINES = 20
_STDERR_LINE_CHARS = 500
_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL
_PIPE_ERRORS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class StdioTransport:
    """One run of a stdio server; `open()` starts it and yields the session's streams.

    Args:
        config: The server.
    """

    def __init__(self, config: StdioServerConfig) -> None:
        self.config = config
        self._process: Process | None = None
        self._returncode: int | None = None
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._stderr_partial = ""
        self._log = logging.getLogger(f"parley.tools.mcp.{config.name}")

    @property
    def returncode(self) -> int | None:
        """The process's exit code once it has ended (negative: killed by that signal)."""
        if self._process is not None and self._process.returncode is not None:
            return self._process.returncode
        return self._returncode

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr."""
        lines = [*self._stderr, self._stderr_partial] if self._stderr_partial else self._stderr
        return "\n".join(lines).strip()

    def explain(self) -> str:
        """How the process ended and what it said, for an error message ('' if unknown)."""
        parts = []
        code = self.returncode
        if code is not None and code < 0:
            parts.append(f"the server process was killed by signal {-code}")
        elif code is not None:
            parts.append(f"the server process exited with code {code}")
        if tail := self.stderr_tail():
            parts.append(f"its stderr ends with:\n{tail}")
        return "; ".join(parts)

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[TransportStreams]:
        """Start the server and bridge its pipes; stop it on exit.

        Raises:
            OSError: The command cannot be run (FileNotFoundError when it does not exist).
        """
        from mcp.client.stdio import get_default_environment  # noqa: PLC0415  (optional extra)
        from mcp.shared.message import SessionMessage  # noqa: PLC0415

        process = await anyio.open_process(
            [self.config.command, *self.config.args],
            env={**get_default_environment(), **self.config.env},
            cwd=self.config.cwd,
            start_new_session=True,  # its own process group, so that stopping it stops its children
        )
        self._process = process
        to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception]()
        session_writes, to_server = anyio.create_memory_object_stream[SessionMessage]()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._pump_stdout, process, to_session)
            tasks.start_soon(self._pump_stdin, process, to_server, to_session)
            tasks.start_soon(self._pump_stderr, process)
            try:
                yield session_reads, session_writes
            finally:
                with anyio.CancelScope(shield=True):
                    session_reads.close()
                    session_writes.close()
                    await self._stop(process)
                tasks.cancel_scope.cancel()

    async def _pump_stdout(
        self, process: Process, sink: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        """Parse each line the server prints and hand it to the session."""
        from mcp.shared.message import SessionMessage  # noqa: PLC0415
        from mcp_types import jsonrpc_message_adapter  # noqa: PLC0415

        assert process.stdout is not None
        parts: list[bytes] = []
        listening = True
        with sink, contextlib.suppress(*_PIPE_ERRORS):
            async for chunk in process.stdout:
                *complete, rest = chunk.split(b"\n")
                for piece in complete:
                    line = b"".join((*parts, piece))
                    parts.clear()
                    if not listening or not line.strip():
                        continue
                    item: SessionMessage | Exception
                    try:
                        item = SessionMessage(jsonrpc_message_adapter.validate_json(line))
                    except ValueError as exc:  # pydantic's ValidationError included
                        self._log.warning("not a JSON-RPC message: %r", line[:200])
                        item = exc
                    try:
                        await sink.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        # The session is gone: keep reading (and dropping) so that a server
                        # writing to a full pipe is not stuck and can see its stdin close.
                        listening = False
                if rest:
                    parts.append(rest)

    async def _pump_stdin(
        self,
        process: Process,
        source: MemoryObjectReceiveStream[SessionMessage],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Write each message the session sends as one line."""
        assert process.stdin is not None
        try:
            with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except _PIPE_ERRORS:
            # The server stopped reading: end the session's stream, or its request would wait
            # for an answer that cannot come.
            sink.close()

    async def _pump_stderr(self, process: Process) -> None:
        """Keep the last lines of stderr for error messages, and log them at debug level."""
        assert process.stderr is not None
        # A character may be split across chunks.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with contextlib.suppress(*_PIPE_ERRORS):
            async for chunk in process.stderr:
                text = self._stderr_partial + decoder.decode(chunk)
                *complete, self._stderr_partial = text.split("\n")
                for line in complete:
                    self._log.debug("stderr: %s", line)
                    self._stderr.append(line[:_STDERR_LINE_CHARS])
                self._stderr_partial = self._stderr_partial[-_STDERR_LINE_CHARS:]

    async def _stop(self, process: Process) -> None:
        """Close stdin, then SIGTERM, then SIGKILL the process group, waiting between."""
        assert process.stdin is not None
        with contextlib.suppress(*_PIPE_ERRORS):
            await process.stdin.aclose()
        for sig in (signal.SIGTERM, _KILL):
            if await _exited(process, _GRACE):
                break
            _signal_group(process, sig)
        else:
            if not await _exited(process, _GRACE):
                self._log.warning("server process %d outlived SIGKILL; abandoning it", process.pid)
        self._returncode = process.returncode
        with anyio.move_on_after(_GRACE), contextlib.suppress(*_PIPE_ERRORS):
            await process.aclose()


async def _exited(process: Process, timeout: float) -> bool:
    """Whether the process ended within `timeout` seconds.

    Polls `returncode` instead of awaiting `wait()`, which on asyncio also waits for the pipes
    to close: a grandchild that inherited them would make an exited server look alive.
    """
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(_POLL)
        return True
    return False


def _signal_group(process: Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)
        else:  # Windows has no process groups to signal
            process.send_signal(sig)
