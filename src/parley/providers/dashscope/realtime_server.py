"""A local server speaking DashScope's Qwen-TTS realtime protocol over WebSocket, with faults.

It serves `/api-ws/v1/realtime?model=...` on 127.0.0.1 the way Model Studio documents it
(and the SDK's `QwenTtsRealtime` expects): `session.created` on connect; `session.update`
answered by `session.updated`; `input_text_buffer.append` spoken at once in `server_commit`
mode, `token_size` characters per `response.audio.delta` (a `response.created` before the
first); `input_text_buffer.commit` answered by `input_text_buffer.committed` and the held
text spoken; `session.finish` answered by the rest of the audio, `response.audio.done`,
`response.done` with the usage, `session.finished`, and a close. The voice is the test
voice of `parley.providers._server.tone`, so the audio a text must give is `render(text)`.

Every connection is recorded (`connections`: its path, headers, and each event it sent with
the time it came); the handshake checks `Authorization: Bearer <api_key>` (401 with
DashScope's `InvalidApiKey` body otherwise). Faults, one `Behaviour` per connection in
order (later connections behave): `refuse` (a status at the handshake), `drop_after` (the
connection dropped after that many audio deltas, without a close frame), `delta_delay` (a
slow server), `error_after` (an `error` event after that many deltas).

    >>> with DashScopeRealtimeServer([Behaviour(drop_after=2)]) as server:  # doctest: +SKIP
    ...     model = DashScopeRealtimeTTSModel(server.credential(), "qwen3-tts-flash-realtime")
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from pydantic import SecretStr

from parley.providers._server.tone import SAMPLE_RATE, render
from parley.providers.dashscope.credentials import DashScopeCredential

if TYPE_CHECKING:
    from websockets.asyncio.server import Server, ServerConnection
    from websockets.http11 import Request, Response

__all__ = ["Behaviour", "DashScopeRealtimeServer", "RecordedConnection", "render"]

REALTIME_PATH = "/api-ws/v1/realtime"
_ids = itertools.count(1)


@dataclass
class Behaviour:
    """How the server treats one connection.

    Args:
        refuse: Refuse the handshake with this HTTP status (and DashScope's error body).
        drop_after: Drop the connection (no close frame) after this many audio deltas.
        delta_delay: Seconds before each audio delta.
        error_after: Send an `error` event after this many audio deltas, and stop speaking.
        error: The error event's `code` and `message`.
        token_size: Characters spoken per audio delta.
    """

    refuse: int | None = None
    drop_after: int | None = None
    delta_delay: float = 0.0
    error_after: int | None = None
    error: dict[str, str] = field(
        default_factory=lambda: {"code": "InternalError", "message": "scripted error"}
    )
    token_size: int = 2


@dataclass
class RecordedConnection:
    """A connection the server accepted (or refused): where, how, and what the client sent."""

    path: str
    headers: dict[str, str]
    refused: int | None = None
    events: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    """Each event the client sent, with `time.monotonic()` when it arrived."""

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """The client's events of one type, in order."""
        return [event for _, event in self.events if event.get("type") == kind]

    @property
    def text(self) -> str:
        """The text the client appended."""
        return "".join(str(e.get("text", "")) for e in self.of_type("input_text_buffer.append"))


class _DroppedError(Exception):
    """The scripted fault ended the connection."""


class _Session:
    """One connection's protocol state."""

    def __init__(self, ws: ServerConnection, behaviour: Behaviour, model: str) -> None:
        self.ws = ws
        self.behaviour = behaviour
        self.config: dict[str, Any] = {
            "id": f"sess_{next(_ids)}",
            "object": "realtime.session",
            "mode": "server_commit",
            "model": model,
            "voice": "Cherry",
            "response_format": "pcm",
            "sample_rate": SAMPLE_RATE,
        }
        self.held = ""
        self.spoken = ""
        self.deltas = 0
        self.response_id: str | None = None
        self.failed = False

    async def send(self, kind: str, **fields: Any) -> None:
        await self.ws.send(json.dumps({"event_id": f"event_{next(_ids)}", "type": kind, **fields}))

    async def handle(self, event: dict[str, Any]) -> bool:
        """Answer one client event; True when the session is over."""
        kind = event.get("type")
        if kind == "session.update":
            self.config.update(event.get("session") or {})
            await self.send("session.updated", session=self.config)
        elif kind == "input_text_buffer.append":
            self.held += str(event.get("text") or "")
            if self.config.get("mode") == "server_commit":
                await self.speak(final=False)
        elif kind == "input_text_buffer.commit":
            await self.send("input_text_buffer.committed", item_id="")
            await self.speak(final=True)
        elif kind == "session.finish":
            await self.speak(final=True)
            await self.end_response()
            await self.send("session.finished")
            return True
        return False

    async def speak(self, *, final: bool) -> None:
        """Speak whole tokens of the held text (all of it when `final`)."""
        size = max(1, self.behaviour.token_size)
        while not self.failed and (len(self.held) >= size or (final and self.held)):
            token, self.held = self.held[:size], self.held[size:]
            await self.delta(token)

    async def delta(self, token: str) -> None:
        behaviour = self.behaviour
        if behaviour.drop_after is not None and self.deltas >= behaviour.drop_after:
            self.ws.transport.abort()  # no close frame: the client sees a dropped connection
            raise _DroppedError
        if behaviour.error_after is not None and self.deltas >= behaviour.error_after:
            self.failed = True
            await self.send("error", error={"type": "server_error", **behaviour.error})
            return
        if self.response_id is None:
            self.response_id = f"resp_{next(_ids)}"
            await self.send("response.created", response=self.response(status="in_progress"))
        if behaviour.delta_delay:
            await asyncio.sleep(behaviour.delta_delay)
        audio = base64.b64encode(render(token)).decode("ascii")
        await self.send("response.audio.delta", response_id=self.response_id, delta=audio)
        self.deltas += 1
        self.spoken += token

    def response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {"id": self.response_id, "object": "realtime.response", "status": status, **extra}

    async def end_response(self) -> None:
        if self.response_id is None:
            return
        await self.send("response.audio.done", response_id=self.response_id)
        characters = len(self.spoken)
        usage = {
            "characters": characters,
            "input_tokens": characters,
            "output_tokens": characters,  # 50 audio tokens a second: one per 20 ms character
            "total_tokens": 2 * characters,
        }
        await self.send("response.done", response=self.response("completed", usage=usage))


class DashScopeRealtimeServer:
    """A Qwen-TTS realtime server on 127.0.0.1 (see the module docs).

    Args:
        behaviours: How to treat each connection, in order; the rest behave.
        api_key: The key the handshake must carry.
        startup_timeout: Seconds to wait for the server to start.
    """

    def __init__(
        self,
        behaviours: Iterable[Behaviour] = (),
        *,
        api_key: str = "sk-test",
        startup_timeout: float = 5.0,
    ) -> None:
        self._behaviours: deque[Behaviour] = deque(behaviours)
        self.api_key = api_key
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self.connections: list[RecordedConnection] = []
        self.errors: list[BaseException] = []
        """Exceptions the server's own code raised (a test double's bugs show here)."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving; returns once the server accepts connections.

        Raises:
            TimeoutError: It did not start within the startup timeout.
        """
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="parley-test-ws", daemon=True
        )
        self._thread.start()
        if not ready.wait(self._startup_timeout) or self._server is None:
            raise TimeoutError("the realtime server did not start")
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        loop, server = self._loop, self._server
        if loop is not None and server is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(server.close)
        if self._thread is not None:
            self._thread.join(self._startup_timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        finally:
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve  # noqa: PLC0415

        async with serve(
            self._handler, "127.0.0.1", 0, process_request=self._check, max_size=None
        ) as server:
            self._server = server
            self._port = next(iter(server.sockets)).getsockname()[1]
            ready.set()
            await server.wait_closed()

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The HTTP base URL the credential names (`http://127.0.0.1:<port>/api/v1`)."""
        return f"http://127.0.0.1:{self._port}/api/v1"

    @property
    def websocket_url(self) -> str:
        """The realtime endpoint, `ws://127.0.0.1:<port>/api-ws/v1/realtime`."""
        return f"ws://127.0.0.1:{self._port}{REALTIME_PATH}"

    def credential(self, api_key: str | None = None) -> DashScopeCredential:
        """A `DashScopeCredential` whose WebSocket endpoints are this server's."""
        return DashScopeCredential(api_key=SecretStr(api_key or self.api_key), base_url=self.url)

    # -- script -----------------------------------------------------------------------------

    def add(self, *behaviours: Behaviour) -> None:
        """Script how the next connections are treated."""
        with self._lock:
            self._behaviours.extend(behaviours)

    def accepted(self) -> list[RecordedConnection]:
        """The connections whose handshake succeeded, in order."""
        return [c for c in self.connections if c.refused is None]

    def assert_consumed(self) -> None:
        """Fail if a behaviour was never used or the server's own code failed."""
        problems = []
        if self._behaviours:
            problems.append(f"{len(self._behaviours)} behaviour(s) never used")
        if self.errors:
            problems.append(f"the server failed: {self.errors[0]!r}")
        if problems:
            raise AssertionError("; ".join(problems))

    # -- answering --------------------------------------------------------------------------

    def _next_behaviour(self) -> Behaviour:
        with self._lock:
            return self._behaviours.popleft() if self._behaviours else Behaviour()

    def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        """The handshake: the path, the key, and a scripted refusal."""
        headers = {name.lower(): value for name, value in request.headers.raw_items()}
        record = RecordedConnection(request.path, headers)
        self.connections.append(record)
        behaviour = self._next_behaviour()
        connection.behaviour = behaviour  # type: ignore[attr-defined]
        connection.record = record  # type: ignore[attr-defined]
        status, code, message = self._refusal(request, headers, behaviour)
        if status is None:
            return None
        record.refused = status
        body = json.dumps({"code": code, "message": message, "request_id": f"req_{next(_ids)}"})
        return connection.respond(status, body)

    def _refusal(
        self, request: Request, headers: dict[str, str], behaviour: Behaviour
    ) -> tuple[int | None, str, str]:
        if not request.path.startswith(REALTIME_PATH + "?model="):
            return 404, "NotFound", f"no route {request.path}"
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, "InvalidApiKey", "Invalid API-key provided."
        if behaviour.refuse is not None:
            return behaviour.refuse, "ServiceUnavailable", "scripted refusal"
        return None, "", ""

    async def _handler(self, ws: ServerConnection) -> None:
        from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

        record: RecordedConnection = ws.record  # type: ignore[attr-defined]
        model = record.path.partition("?model=")[2]
        session = _Session(ws, ws.behaviour, model)  # type: ignore[attr-defined]
        try:
            await session.send("session.created", session=session.config)
            async for message in ws:
                event = json.loads(message)
                record.events.append((time.monotonic(), event))
                if await session.handle(event):
                    await ws.close()
                    return
        except (_DroppedError, ConnectionClosed):
            return
        except Exception as exc:  # the double's own bug: kept for assert_consumed
            self.errors.append(exc)
            raise
