"""A local server that speaks DashScope's duplex WebSocket inference API for CosyVoice.

It serves `ws://127.0.0.1:<port>/api-ws/v1/inference` as Model Studio's CosyVoice WebSocket
API describes it: the key checked at the handshake (401 without a good `Authorization:
bearer <key>`); `run-task` answered by `task-started`; `continue-task` text gathered and cut
into sentences (after `.`, `!`, `?`, `;`, a newline, or their full-width forms), each
complete sentence spoken as a `result-generated` event then its audio in binary frames;
`finish-task` speaking the rest, then `task-finished` with `usage.characters` (a CJK
character counts two); a bad request answered by `task-failed` and the socket closed; the
connection reusable for the next task. Its voice is `render(text)`: a fixed run of samples
per character, so the audio a text must give is known exactly.

    >>> from parley.providers.dashscope.speech.cosyvoice import DashScopeCosyVoiceRealtimeTTSModel
    >>> with CosyVoiceServer() as server:  # doctest: +SKIP
    ...     model = DashScopeCosyVoiceRealtimeTTSModel(server.credential(), "cosyvoice-v3-flash")

Faults: `drop_after(frames)` cuts the next connection after that many audio frames (the one
after behaves), `frame_delay` slows every frame, `fail_next(code, message)` answers the next
`run-task` with `task-failed`, `refuse_next(status)` refuses the next handshake,
`close_when_idle` closes the connection after each task. `connections` records what each
connection sent (headers, messages).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Self

from pydantic import SecretStr
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from parley.providers.dashscope.credentials import DashScopeCredential

__all__ = ["PATH", "CosyVoiceServer", "RecordedConnection", "characters", "render", "sentences"]

PATH = "/api-ws/v1/inference"
SAMPLES_PER_CHARACTER = 8
"""Samples (2 bytes each) the test voice says per character."""
FRAME_BYTES = 64
"""The largest binary frame the server sends."""

_SENTENCE_END = re.compile(r"[.!?;\n\u3002\uff01\uff1f\uff1b]+")  # and the full-width forms
_CJK = re.compile(r"[\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff]")


def render(text: str) -> bytes:
    """What the test voice says for `text`: 16-bit samples, the same run for each character."""
    out = bytearray()
    for char in text:
        sample = (ord(char) * 37) % 32768
        out += sample.to_bytes(2, "little") * SAMPLES_PER_CHARACTER
    return bytes(out)


def sentences(text: str) -> tuple[list[str], str]:
    """The complete sentences at the start of `text`, and the rest (no sentence end yet)."""
    done: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        done.append(text[start : match.end()])
        start = match.end()
    return done, text[start:]


def characters(text: str) -> int:
    """What DashScope bills for `text`: a CJK character counts two, anything else one."""
    return len(text) + len(_CJK.findall(text))


@dataclass
class RecordedConnection:
    """One WebSocket connection: its handshake's headers and the JSON messages it sent."""

    headers: dict[str, str]
    messages: list[dict[str, Any]] = field(default_factory=list)

    def actions(self) -> list[str]:
        """The messages' actions, in order (`run-task`, `continue-task`, `finish-task`)."""
        return [m["header"]["action"] for m in self.messages]

    def texts(self) -> list[str]:
        """The text of every `continue-task`, in order."""
        return [
            m["payload"]["input"]["text"]
            for m in self.messages
            if m["header"]["action"] == "continue-task"
        ]


@dataclass
class _Task:
    task_id: str
    held: str = ""
    spoken: str = ""


class _DroppedError(Exception):
    """The server cut the connection on purpose."""


class CosyVoiceServer:
    """The CosyVoice WebSocket API on 127.0.0.1, on a thread with its own event loop.

    Args:
        api_key: The key the handshake must carry.
        frame_delay: Seconds to wait before each audio frame.
        startup_timeout: Seconds to wait for the server to start.
    """

    def __init__(
        self, *, api_key: str = "sk-test", frame_delay: float = 0.0, startup_timeout: float = 5.0
    ) -> None:
        self.api_key = api_key
        self.frame_delay = frame_delay
        self.close_when_idle = False
        """Close the connection after each task (as an idle connection is closed)."""
        self.connections: list[RecordedConnection] = []
        self.errors: list[BaseException] = []
        """The server's own failures (a bug in it, or a client breaking the protocol)."""
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._drops: deque[int] = deque()
        self._failures: deque[tuple[str, str]] = deque()
        self._refusals: deque[int] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving (returns once it accepts connections).

        Raises:
            TimeoutError: It did not start within the startup timeout.
        """
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete,
            args=(self._serve(ready),),
            name="parley-test-cosyvoice",
            daemon=True,
        )
        self._thread.start()
        if not ready.wait(self._startup_timeout):
            self.stop()
            raise TimeoutError("the test CosyVoice server did not start")
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(self._stopping.set)
        thread.join(timeout=5)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`ws://127.0.0.1:<port>/api-ws/v1/inference`."""
        return f"ws://127.0.0.1:{self.port}{PATH}"

    @property
    def base_url(self) -> str:
        """The native HTTP API's root on this host, which the WebSocket URL is derived from."""
        return f"http://127.0.0.1:{self.port}/api/v1"

    def credential(
        self, api_key: str | None = None, workspace: str | None = None
    ) -> DashScopeCredential:
        """A `DashScopeCredential` for this server (its key unless another is given)."""
        return DashScopeCredential(
            api_key=SecretStr(api_key or self.api_key), base_url=self.base_url, workspace=workspace
        )

    # -- faults -----------------------------------------------------------------------------

    def drop_after(self, frames: int, times: int = 1) -> None:
        """Cut each of the next `times` connections after it sent `frames` audio frames."""
        with self._lock:
            self._drops.extend([frames] * times)

    def fail_next(self, code: str = "InternalError", message: str = "synthesis failed") -> None:
        """Answer the next `run-task` with `task-failed` (then close the socket)."""
        with self._lock:
            self._failures.append((code, message))

    def refuse_next(self, status: int = 503, times: int = 1) -> None:
        """Refuse the next `times` handshakes with `status`."""
        with self._lock:
            self._refusals.extend([status] * times)

    # -- record -----------------------------------------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        """Every JSON message received, over all connections, in order."""
        return [m for c in self.connections for m in c.messages]

    # -- serving ----------------------------------------------------------------------------

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        server: Server
        async with serve(
            self._connection, "127.0.0.1", 0, process_request=self._handshake
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await self._stopping.wait()
            for connection in server.connections:
                # Cut, not closed politely: a client whose event loop is not running (a test
                # that ended with its model still open) would never answer a close frame.
                connection.transport.abort()
            server.close()

    def _handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        with self._lock:
            refusal = self._refusals.popleft() if self._refusals else None
        if refusal is not None:
            return connection.respond(HTTPStatus(refusal), "refused by the test server\n")
        if request.path != PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, f"no such path: {request.path}\n")
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or key != self.api_key:
            return connection.respond(HTTPStatus.UNAUTHORIZED, "InvalidApiKey\n")
        return None

    async def _connection(self, ws: ServerConnection) -> None:
        record = RecordedConnection(headers=_lower(ws.request.headers if ws.request else None))
        self.connections.append(record)
        with self._lock:
            budget = self._drops.popleft() if self._drops else None
        frames = [0, budget]  # audio frames sent, and after how many to cut
        task: _Task | None = None
        try:
            async for raw in ws:
                if isinstance(raw, bytes):
                    raise ValueError("a synthesis client sends no binary frames")
                message = json.loads(raw)
                record.messages.append(message)
                task = await self._on_message(ws, task, message, frames)
        except _DroppedError:
            ws.transport.abort()  # no close frame: the client sees the connection drop
        except ConnectionClosed:
            pass
        except Exception as exc:
            self.errors.append(exc)
            with contextlib.suppress(ConnectionClosed):
                await ws.close(1011, f"test server error: {exc!r}")

    async def _on_message(
        self, ws: ServerConnection, task: _Task | None, message: dict[str, Any], frames: list[Any]
    ) -> _Task | None:
        header = message["header"]
        action = header["action"]
        if header.get("streaming") != "duplex":
            await self._fail(ws, header["task_id"], "InvalidParameter", "streaming must be duplex")
        if action == "run-task":
            return await self._run_task(ws, task, message)
        if task is None or header["task_id"] != task.task_id:
            await self._fail(ws, header["task_id"], "InvalidParameter", "no such task running")
            return None
        if action == "continue-task":
            task.held += message["payload"]["input"]["text"]
            done, task.held = sentences(task.held)
            for sentence in done:
                await self._speak(ws, task, sentence, frames)
            return task
        if action == "finish-task":
            if task.held:
                await self._speak(ws, task, task.held, frames)
            usage = {"characters": characters(task.spoken)}
            await ws.send(_event("task-finished", task.task_id, {"output": {}, "usage": usage}))
            if self.close_when_idle:
                await ws.close()
            return None
        await self._fail(ws, header["task_id"], "InvalidParameter", f"unknown action {action}")
        return None

    async def _run_task(
        self, ws: ServerConnection, running: _Task | None, message: dict[str, Any]
    ) -> _Task:
        task_id = message["header"]["task_id"]
        if running is not None:
            await self._fail(ws, task_id, "InvalidParameter", "a task is already running")
        payload = message["payload"]
        expected = {"task_group": "audio", "task": "tts", "function": "SpeechSynthesizer"}
        if any(payload.get(k) != v for k, v in expected.items()) or payload.get("input") != {}:
            await self._fail(ws, task_id, "InvalidParameter", "not a speech synthesis task")
        parameters = payload.get("parameters") or {}
        if not payload.get("model") or not parameters.get("voice"):
            await self._fail(ws, task_id, "InvalidParameter", "model and voice are required")
        with self._lock:
            failure = self._failures.popleft() if self._failures else None
        if failure is not None:
            await self._fail(ws, task_id, *failure)
        await ws.send(_event("task-started", task_id, {}))
        return _Task(task_id)

    async def _speak(
        self, ws: ServerConnection, task: _Task, sentence: str, frames: list[Any]
    ) -> None:
        task.spoken += sentence
        output = {"sentence": {"text": sentence}}
        usage = {"characters": characters(task.spoken)}
        await ws.send(_event("result-generated", task.task_id, {"output": output, "usage": usage}))
        audio = render(sentence)
        for start in range(0, len(audio), FRAME_BYTES):
            if frames[1] is not None and frames[0] >= frames[1]:
                raise _DroppedError
            if self.frame_delay:
                await asyncio.sleep(self.frame_delay)
            await ws.send(audio[start : start + FRAME_BYTES])
            frames[0] += 1

    async def _fail(self, ws: ServerConnection, task_id: str, code: str, message: str) -> None:
        """`task-failed`, then the socket closed (as the real server does); ends the handler."""
        header = {"event": "task-failed", "task_id": task_id}
        header |= {"error_code": code, "error_message": message}
        await ws.send(json.dumps({"header": header, "payload": {}}))
        await ws.close()
        raise ConnectionClosed(None, None)


def _event(kind: str, task_id: str, payload: dict[str, Any]) -> str:
    return json.dumps({"header": {"event": kind, "task_id": task_id}, "payload": payload})


def _lower(headers: Headers | None) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers or Headers()).raw_items()}
