"""`MCPServerConnection`: one MCP server, its session kept open, its tools, and calls to them.

The session lives in a background task that enters the SDK's `Client` and waits until it is
told to close: anyio requires a task group (every MCP transport holds one) to be left by the
task that entered it, and the calls come from any task. A connection belongs to the event loop
that opened it; used from another loop (a sync twin's `asyncio.run`) it opens a new session.

Reconnecting: a call that finds the session gone (the server died, the HTTP server restarted
and forgot the session) reconnects once and sends the call again. A call that was in flight
when the connection dropped may have run on the server already, so a tool with side effects
(that is not idempotent) may run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self, TypeVar

from parley import __version__
from parley.tools.mcp._config import HTTPServerConfig, MCPServerConfig, StdioServerConfig
from parley.tools.mcp._errors import MCPServerError, MCPTimeoutError, MCPToolError
from parley.tools.mcp._sdk import require_mcp
from parley.tools.mcp._stdio import StdioTransport
from parley.tools.mcp._tool import MCPTool

if TYPE_CHECKING:
    from mcp import Client, MCPError
    from mcp.client._transport import TransportStreams  # the SDK's name for a stream pair
    from mcp_types import CallToolResult, ListToolsResult
    from mcp_types import Tool as MCPToolSpec

__all__ = ["MCPServerConnection"]

logger = logging.getLogger("parley.tools.mcp")

# Seconds granted beyond a call's timeout before parley stops waiting itself (the SDK's own
# timeout, which also tells the server to cancel, should fire first).
_SLACK = 2.0
# Seconds a session has to shut down before its task is cancelled (a stdio server gets 2 s to
# exit after its stdin closes, then 2 s after SIGTERM, then SIGKILL).
_CLOSE_TIMEOUT = 8.0
_MAX_TOOL_PAGES = 100
# How the SDK negotiates the protocol: "auto" asks `server/discover` (2026-07-28 servers) and
# falls back to the `initialize` handshake of earlier servers, which keep a session per client.
_CONNECT_MODE = "auto"

_T = TypeVar("_T")


@dataclass(eq=False)
class _Session:
    """One open session: the task that holds it, and what it knows of its end."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    client: Client | None = None
    stdio: StdioTransport | None = None
    failure: Exception | None = None
    # The HTTP server answered 404 to a request carrying the session id: it no longer knows
    # the session (it restarted), and the client must start a new one (the spec's words).
    expired: bool = False
    closing: bool = False  # closed on purpose: a call it drops is not sent again

    @property
    def alive(self) -> bool:
        return self.client is not None and self.task is not None and not self.task.done()


class _Dropped(Exception):  # noqa: N818  (a signal between methods, never raised to callers)
    """The session turned out to be gone while a call used it."""


class MCPServerConnection:
    """A session with one MCP server, opened on first use and reopened when it drops.

    Use it as an async context manager, or call `connect()` and `close()`; a call on a
    connection that is not open opens it.

    Args:
        config: The server: a `StdioServerConfig` or an `HTTPServerConfig`.
    """

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self._session: _Session | None = None
        # asyncio's locks bind to one loop: one per loop the connection is used from.
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def name(self) -> str:
        """The server's name in the config."""
        return self.config.name

    @property
    def connected(self) -> bool:
        """Whether a session is open on the running event loop."""
        session = self._session
        return session is not None and session.alive and session.loop is _running_loop()

    async def connect(self) -> None:
        """Open the session if it is not open.

        Raises:
            MCPServerError: The server could not be started or reached, or did not finish the
                handshake within `connect_timeout` seconds; the message says why.
        """
        await self._live()

    async def close(self) -> None:
        """Close the session (stopping a stdio server); a later call opens a new one."""
        session, self._session = self._session, None
        if session is not None and session.loop is _running_loop():
            session.closing = True
            await _shut(session)

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def list_tools(self) -> list[MCPTool]:
        """The server's tools as parley tools named `<server>-<tool>`."""
        return [MCPTool(self, spec) for spec in await self.list_tool_specs()]

    async def list_tool_specs(self) -> list[MCPToolSpec]:
        """The server's own descriptions of its tools (every page)."""
        specs: list[MCPToolSpec] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await self._request(
                "listing tools", functools.partial(_list_page, cursor=cursor)
            )
            specs.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return specs

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one of the server's tools (by its own name) and return the SDK's result.

        A result with `is_error` is returned as it is; `MCPTool` turns it into an error.

        Raises:
            MCPTimeoutError: No answer within the server's `timeout`.
            MCPToolError: The server refused the request (unknown tool, bad arguments).
            MCPServerError: The server could not be reached, even after reconnecting once.
        """
        timeout = self.config.timeout

        async def call(client: Client) -> CallToolResult:
            try:
                async with asyncio.timeout(timeout + _SLACK):
                    return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            except TimeoutError:
                raise self._timeout(tool) from None

        return await self._request(f"calling {tool!r}", call, tool=tool)

    # -- internals ----------------------------------------------------------------------------

    @property
    def _label(self) -> str:
        return f"MCP server {self.name!r} ({self.config.target})"

    def _timeout(self, tool: str) -> MCPTimeoutError:
        return MCPTimeoutError(
            f"{self._label}: {tool!r} did not finish within {self.config.timeout:g} seconds "
            "(the server was asked to cancel it)",
            server=self.name,
            tool_name=f"{self.name}-{tool}",
        )

    async def _request(
        self, what: str, send: Callable[[Client], Awaitable[_T]], *, tool: str | None = None
    ) -> _T:
        """Send on the open session; if it turns out to be gone, reconnect once and resend."""
        session = await self._live()
        try:
            return await self._send(session, send, tool)
        except _Dropped:
            if session.closing:
                raise MCPServerError(
                    f"{self._label} was closed while {what}",
                    server=self.name,
                    tool_name=tool and f"{self.name}-{tool}",
                ) from None
            reason = await self._drop(session)
            logger.warning("%s dropped the connection (%s); reconnecting", self._label, reason)
        session = await self._live()
        try:
            return await self._send(session, send, tool)
        except _Dropped:
            reason = await self._drop(session)
            raise MCPServerError(
                f"{self._label} dropped the connection again after reconnecting, while {what}: "
                f"{reason}",
                server=self.name,
                tool_name=tool and f"{self.name}-{tool}",
            ) from None

    async def _send(
        self, session: _Session, send: Callable[[Client], Awaitable[_T]], tool: str | None
    ) -> _T:
        from mcp import MCPError  # noqa: PLC0415  (optional extra)
        from mcp_types import REQUEST_TIMEOUT  # noqa: PLC0415

        client = session.client
        if client is None:
            raise _Dropped
        try:
            return await send(client)
        except MCPError as exc:
            if _is_dropped(exc) or session.expired:
                raise _Dropped from exc
            if exc.code == REQUEST_TIMEOUT and tool is not None:
                raise self._timeout(tool) from None
            if tool is None:
                raise MCPServerError(
                    f"{self._label} answered with an error: {exc.message} (code {exc.code})",
                    server=self.name,
                ) from exc
            raise MCPToolError(
                f"the server refused the call: {exc.message} (code {exc.code})",
                server=self.name,
                tool_name=f"{self.name}-{tool}",
            ) from exc

    async def _live(self) -> _Session:
        """The open session on the running loop, opening one if there is none."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            session = self._session
            if session is not None and session.loop is not loop:
                # Opened on another loop, which stops it when it ends (asyncio.run cancels
                # its tasks); nothing of it can be used from here.
                session = self._session = None
            if session is not None and session.alive:
                return session
            if session is not None:
                reason = await self._drop(session)
                logger.warning(
                    "%s had closed the connection (%s); reconnecting", self._label, reason
                )
            self._session = await self._open(loop)
            return self._session

    async def _drop(self, session: _Session) -> str:
        """Forget and shut a session; why it ended."""
        if self._session is session:
            self._session = None
        await _shut(session)
        return self._reason(session)

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Session:
        require_mcp()
        session = _Session(loop=loop)
        ready: asyncio.Future[None] = loop.create_future()
        task = session.task = loop.create_task(self._run(session, ready), name=f"mcp:{self.name}")
        try:
            await asyncio.wait(
                (ready, task), timeout=self.config.connect_timeout, return_when="FIRST_COMPLETED"
            )
        except BaseException:  # cancelled while waiting: stop the half-open session
            await _shut(session, cancel=True)
            raise
        if ready.done():
            return session
        if not task.done():
            await _shut(session, cancel=True)
            session.failure = TimeoutError(
                f"no MCP handshake within {self.config.connect_timeout:g} seconds"
            )
        verb = "started" if isinstance(self.config, StdioServerConfig) else "reached"
        raise MCPServerError(
            f"{self._label} could not be {verb}: {self._reason(session)}", server=self.name
        ) from session.failure

    async def _run(self, session: _Session, ready: asyncio.Future[None]) -> None:
        """Hold the session open until told to stop (the body of the session's task)."""
        from mcp import Client  # noqa: PLC0415  (optional extra)
        from mcp_types import Implementation  # noqa: PLC0415

        info = Implementation(name="parley", version=__version__)
        try:
            transport = self._transport(session)
            async with Client(transport, client_info=info, mode=_CONNECT_MODE) as client:
                session.client = client
                ready.set_result(None)
                await session.stop.wait()
        except Exception as exc:  # kept for the next error message: a task must not fail unseen
            session.failure = exc
            logger.debug("%s: session ended with %r", self._label, exc)
        finally:
            session.client = None

    def _transport(self, session: _Session) -> AbstractAsyncContextManager[TransportStreams]:
        config = self.config
        if isinstance(config, StdioServerConfig):
            session.stdio = StdioTransport(config)
            return session.stdio.open()
        return _http_transport(config, session)

    def _reason(self, session: _Session) -> str:
        """Why a session ended or never opened, in words."""
        parts = [] if session.failure is None else _describe(session.failure, self.config)
        if session.stdio is not None and (told := session.stdio.explain()):
            parts.append(told)
        return "; ".join(dict.fromkeys(parts)) or "the connection closed"


async def _list_page(client: Client, *, cursor: str | None) -> ListToolsResult:
    return await client.list_tools(cursor=cursor)


async def _shut(session: _Session, *, cancel: bool = False) -> None:
    """Tell a session's task to close, and wait for it (cancelling it if it takes too long)."""
    session.stop.set()
    task = session.task
    if task is None or task.done():
        return
    if cancel:
        task.cancel()
    done, _ = await asyncio.wait((task,), timeout=_CLOSE_TIMEOUT)
    if not done:
        task.cancel()
        await asyncio.wait((task,), timeout=_CLOSE_TIMEOUT)


@contextlib.asynccontextmanager
async def _http_transport(
    config: HTTPServerConfig, session: _Session
) -> AsyncIterator[TransportStreams]:
    import httpx2  # noqa: PLC0415  (mcp's HTTP client)
    from mcp.client.sse import sse_client  # noqa: PLC0415
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    headers = dict(config.headers)
    if config.transport == "sse":
        sse = sse_client(
            config.url,
            headers=headers,
            timeout=config.connect_timeout,
            sse_read_timeout=config.sse_read_timeout,
        )
        async with sse as streams:
            yield streams
        return

    async def notice_expiry(response: httpx2.Response) -> None:
        # The SDK passes the server's JSON-RPC error on and keeps the status to itself.
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            session.expired = True

    timeout = httpx2.Timeout(config.connect_timeout, read=config.sse_read_timeout)
    hooks = {"response": [notice_expiry]}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _is_dropped(exc: MCPError) -> bool:
    """Whether an error means the session is gone (so that reconnecting may help)."""
    from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST  # noqa: PLC0415

    # A streamable-HTTP server that no longer knows the session (it restarted) answers 404,
    # which the SDK reports as INVALID_REQUEST "Session terminated" (mcp/client/streamable_http.py).
    return exc.code == CONNECTION_CLOSED or (
        exc.code == INVALID_REQUEST and exc.message == "Session terminated"
    )


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _describe(exc: BaseException, config: MCPServerConfig) -> list[str]:
    """What an exception from the SDK or the transport means, in words."""
    from mcp import MCPError  # noqa: PLC0415

    return [
        _describe_one(leaf, config)
        for leaf in _leaves(exc)
        # "Connection closed" says less than the process's exit code and stderr do.
        if not (isinstance(leaf, MCPError) and _is_dropped(leaf))
    ]


def _describe_one(exc: BaseException, config: MCPServerConfig) -> str:  # noqa: PLR0911
    import httpx2  # noqa: PLC0415
    from mcp import MCPError  # noqa: PLC0415

    if isinstance(exc, TimeoutError):  # before OSError, of which it is a subclass
        return str(exc) or "timed out"
    if isinstance(config, StdioServerConfig) and isinstance(exc, OSError):
        if isinstance(exc, FileNotFoundError) and config.cwd and exc.filename == config.cwd:
            return f"the working directory {config.cwd!r} does not exist"
        if isinstance(exc, FileNotFoundError):
            return f"the command {config.command!r} was not found"
        if isinstance(exc, PermissionError):
            return f"the command {config.command!r} cannot be run (permission denied)"
        return f"the command {config.command!r} cannot be run ({exc})"
    if isinstance(exc, httpx2.ConnectError):
        return f"cannot connect to {config.target} (connection refused or unreachable: {exc})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"{config.target} answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.TimeoutException):
        return f"{config.target} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, MCPError):
        return f"the server answered with an error: {exc.message} (code {exc.code})"
    return f"{type(exc).__name__}: {exc}"
