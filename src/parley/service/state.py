"""The service's shared state (settings, agents, models, store, runs) and the routes' helpers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from parley.agents import Agent, Middleware
from parley.agents.events import RunEnded
from parley.agents.speech import TTSMiddleware
from parley.compat.service_toolkit import DEFAULT_MODEL
from parley.errors import ConfigurationError, ServiceError
from parley.models.spec import model_from_spec
from parley.providers.auto import ModelChoice
from parley.service.bounds import CONNECTION, ClientConnection, ClientTooSlow, TimedStream
from parley.service.registry import AgentEntry, AgentRegistry
from parley.service.runs import ReaderDropped, RunHandle, RunManager
from parley.service.runs_protocol import EventLog, OnDisconnect, RunInput
from parley.service.schema import EventsMode
from parley.service.served_models import ModelRegistry
from parley.service.settings import ServiceSettings
from parley.service.sse import stream_frames
from parley.service.store import Store, ThreadLocks
from parley.tts.base import TTSModel

__all__ = [
    "MAX_THREAD_ID",
    "RunStream",
    "ServiceState",
    "StreamRequest",
    "get_state",
    "is_thread_id",
    "new_thread_id",
    "run_headers",
    "run_stream_response",
    "sse_response",
]

MAX_THREAD_ID = 128

log = logging.getLogger("parley.service")


@dataclass
class ServiceState:
    """What every request needs: the settings, the agents, the store, the runs, the models."""

    settings: ServiceSettings
    registry: AgentRegistry
    store: Store
    locks: ThreadLocks
    runs: RunManager
    models: ModelRegistry = field(default_factory=ModelRegistry)
    """The models `/v1/chat/completions` serves as themselves, beside the agents."""
    events: EventLog | None = None
    """Every run's events, for streams picked up again (`parley.service.events`)."""
    model_choice: ModelChoice | None = None
    """The built-in agent's model and why (`/info`'s `model`); None: the agents' own."""
    _voice: TTSModel | None = field(default=None, init=False, repr=False)

    def speech(self, speak: bool) -> list[Middleware]:
        """A run's own middleware: the service's voice when the request asks for speech.

        The voice (the `tts` setting, realtime when the provider has it) is built at the
        first request that asks; each run speaks through a connection of its own.
        """
        if not speak:
            return []
        if self._voice is None:
            self._voice = _build_voice(self.settings.tts)
        return [TTSMiddleware(self._voice)]

    async def end_thread(self, user_id: str, thread_id: str) -> None:
        """Free what the served agents' tools hold for a deleted thread (files, processes).

        Tools key that state by user and thread (`RunContext.session_key`); an agent not
        built yet holds none. Variants on other models share their agent's tools.
        """
        toolkits = {id(a.toolkit): a.toolkit for e in self.registry for a in e.built}
        for toolkit in toolkits.values():
            await toolkit.end_session(user_id, thread_id)

    async def check_database(self) -> None:
        """Check that the database answers (the health checks).

        Raises:
            ServiceError: It does not (503).
        """
        try:
            await self.store.ping()
        except Exception as exc:
            raise ServiceError("the database does not answer", status_code=503) from exc

    def resolve_run(self, agent_key: str, run_input: RunInput) -> tuple[Agent, list[Middleware]]:
        """A queued run's agent and own middleware, from its agent's key and stored input.

        Raises:
            NotFoundError: The agent is not served here (any more).
            RequestValidationError: Its model alias is not offered here.
        """
        entry = self.registry.get(agent_key)
        return self.agent_for(entry, run_input.model), self.speech(run_input.speak)

    def agent_for(self, entry: AgentEntry, model_name: str | None) -> Agent:
        """The entry's agent, on the model `model_name` maps to (None: its own).

        The toolkit's older clients send `gpt-4o-mini` with every request unless told another
        name: it means the agent's own model too, unless the aliases map it.

        Raises:
            RequestValidationError: The model name is not one the service offers (422).
        """
        aliases = self.settings.model_aliases
        if model_name is None or (model_name == DEFAULT_MODEL and model_name not in aliases):
            return entry.agent
        if model_name not in aliases:
            offered = ", ".join(aliases) or "(none)"
            raise _invalid(
                ("body", "model"), f"unknown model {model_name!r}; offered: {offered}", model_name
            )
        spec = aliases[model_name]
        return entry.agent if spec is None else entry.with_model(spec, model_from_spec)


def _build_voice(spec: str) -> TTSModel:
    from parley.tts.spec import tts_model_from_spec  # noqa: PLC0415  # only when asked

    try:
        # Streamed: the audio left at a block's end comes in the voice's own pieces. Whole,
        # it is one event of the block's every second of audio (12 MB for four minutes),
        # which no stream's buffer can bound.
        return tts_model_from_spec(spec, realtime=True, stream=True)
    except ConfigurationError:  # the provider has no realtime model: its plain one
        return tts_model_from_spec(spec, realtime=False)


async def get_state(request: Request) -> ServiceState:
    """FastAPI dependency: the app's `ServiceState`.

    Async so that FastAPI calls it in the request's task: a plain function dependency runs in
    a worker thread, a hop there and back for every request.
    """
    state: ServiceState = request.app.state.parley
    return state


def is_thread_id(value: str) -> bool:
    """Whether `value` can name a thread (1 to 128 printable ASCII characters, unpadded).

    ASCII because every response names its thread in the `X-Thread-Id` header, and a header
    carries no other characters (Starlette would fail to encode the answer).
    """
    return (
        0 < len(value) <= MAX_THREAD_ID
        and value.isascii()
        and value.isprintable()
        and value == value.strip()
    )


def new_thread_id(given: str | None) -> str:
    """The thread id to use: the client's (checked), or a new UUID.

    Raises:
        RequestValidationError: An empty, too long, non-ASCII or non-printable id (422).
    """
    if given is None:
        return str(uuid.uuid4())
    if not is_thread_id(given):
        raise _invalid(
            ("body", "thread_id"),
            f"a thread id is 1 to {MAX_THREAD_ID} printable ASCII characters, without "
            "surrounding spaces",
            given,
        )
    return given


def _invalid(loc: tuple[str, ...], msg: str, value: Any) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": msg, "type": "value_error", "input": value}])


def run_headers(handle: RunHandle) -> dict[str, str]:
    """The headers that name a run's thread and run."""
    return {"X-Thread-Id": handle.thread_id, "X-Run-Id": handle.run_id}


async def collect(handle: RunHandle) -> tuple[RunEnded, str | None]:
    """Wait for a run's end: its `RunEnded`, and its error message if it failed."""
    handle.end_only()
    error: str | None = None
    while (event := await handle.next_event()) is not None:
        if isinstance(event, RunEnded):
            return event, error
        if event.type == "run_error":
            error = event.message
    raise RuntimeError("a run ended without RunEnded")  # _drive always sends one


class StreamRequest(Protocol):
    """What a request's body says of its stream: which frames, and whether tokens."""

    @property
    def events(self) -> EventsMode:
        """The frames: the toolkit's, or parley's events."""
        ...

    @property
    def stream_tokens(self) -> bool:
        """Whether the model's tokens are streamed (toolkit frames)."""
        ...


def sse_response(
    handle: RunHandle,
    body: StreamRequest,
    *,
    send_timeout: float,
    on_disconnect: OnDisconnect = "cancel",
) -> StreamingResponse:
    """Stream a run's frames, the toolkit's or parley's as `body` asks (`run_stream_response`)."""
    frames = stream_frames(
        handle.events(),
        thread_id=handle.thread_id,
        run_id=handle.run_id,
        mode=body.events,
        stream_tokens=body.stream_tokens,
    )
    return run_stream_response(
        handle, frames, send_timeout=send_timeout, on_disconnect=on_disconnect
    )


def run_stream_response(
    handle: RunHandle,
    frames: AsyncIterator[str],
    *,
    send_timeout: float,
    on_disconnect: OnDisconnect = "cancel",
) -> StreamingResponse:
    """Send a run's SSE `frames` (see `RunStream`).

    A client leaving mid-way stops the run (`on_disconnect="cancel"`), or lets it go on to
    its end, stored as any other (`"continue"`).
    """

    async def body() -> AsyncIterator[str]:
        try:
            async for text in frames:
                yield text
        finally:
            if not handle.dropped and on_disconnect == "cancel":
                handle.cancel()  # nothing when the run ended; else the reader left mid-way
            elif not handle.done.is_set():
                handle.drop()  # the run goes on without its reader: its events are let go

    headers = run_headers(handle) | {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return RunStream(handle, body(), send_timeout=send_timeout, headers=headers)


class RunStream(TimedStream):
    """A run's frames as server-sent events, to a client that keeps up, or to none.

    A client that goes away stops the run (it keeps what it wrote, marked interrupted). A
    client that stays but does not read is dropped instead, and its run goes on and is
    stored: when a frame waits `send_timeout` seconds to be taken, or the run gets too far
    ahead of it (`ReaderDropped`), its connection is closed at once (`ClientConnection`), with
    no `[DONE]`, so that it cannot take the stream for whole.
    """

    def __init__(
        self,
        handle: RunHandle,
        frames: AsyncIterator[str],
        *,
        send_timeout: float,
        headers: dict[str, str],
    ) -> None:
        super().__init__(frames, send_timeout=send_timeout, headers=headers)
        self.handle = handle
        handle.limit_reader()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the frames; drop the client if it does not keep up."""
        connection = scope.get(CONNECTION)
        if isinstance(connection, ClientConnection):
            # The run drops a reader too far behind from its own task: the connection goes
            # then, which frees a send waiting on the client.
            self.handle.on_drop(connection.abort_now)
        try:
            await super().__call__(scope, receive, send)
        except (ClientTooSlow, ReaderDropped) as exc:
            self.handle.drop()
            log.warning("run %s: dropped a client that does not read (%s)", self.handle.run_id, exc)
            if isinstance(connection, ClientConnection) and connection.can_abort:
                await connection.abort()
            else:  # a server whose connection is out of reach: end the response, unfinished
                await self._end(send)
        finally:
            self.handle.on_drop(None)
            await self._close_frames()

    def _too_slow(self) -> None:
        self.handle.drop()  # before the frames' generator closes: the run goes on

    async def _end(self, send: Send) -> None:
        """End the response without `[DONE]` (the server closes the connection its way)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.send_timeout):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
