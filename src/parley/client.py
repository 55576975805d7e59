"""A client for parley's HTTP service: `AgentClient` (sync) and `AsyncAgentClient` (async).

Both speak the protocol of `docs/service-protocol.md` and have the same methods, with the same
arguments and results; `AsyncAgentClient`'s are coroutines, its streams async iterators, and
it closes with `aclose()` (as httpx's `AsyncClient` does)::

    with AgentClient("http://127.0.0.1:8080") as client:
        answer = client.invoke("What is 6 * 7?")
        for item in client.stream("And 7 * 8?", thread_id=answer.thread_id):
            ...  # str tokens, ServiceChatMessage, Interrupt

    async with AsyncAgentClient("http://127.0.0.1:8080") as client:
        async for item in client.stream("Hello"):
            ...

Every request is described once (`_ClientBase`: method, path, body and how to read the
answer, and one `_FrameReader` for the server-sent events of a stream); the two classes only
send it, through `httpx.Client` or `httpx.AsyncClient`.

Failures are parley errors, never httpx's: an error status maps to `NotFoundError` (404),
`ConflictError` (409), `AuthenticationError` (401, 403), `InvalidRequestError` (422, with the
fields the service rejected) or `ServiceError` (any other, with its `status_code`); an
unreachable or silent service to `ServiceConnectionError`; an answer that does not fit the
protocol to `ServiceError` (status 502); a stream's `error` frame to `RunFailedError`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypedDict, TypeVar, Unpack, get_args
from urllib.parse import quote

from pydantic import BaseModel, TypeAdapter, ValidationError

from parley.agents.events import AgentEvent, AgentEventAdapter
from parley.compat.service_toolkit import ServiceMetadata
from parley.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    InvalidRequestError,
    MissingDependencyError,
    NotFoundError,
    RunFailedError,
    ServiceConnectionError,
    ServiceError,
)

try:
    import httpx
except ImportError as exc:  # httpx comes with the `service` extra
    raise MissingDependencyError("httpx", "service") from exc

# The service's schema is the source of truth for what it answers.
from parley.service.schema import (
    AgentDescription,
    Interrupt,
    RunInfo,
    ServiceChatMessage,
    ThreadDetail,
    ThreadInfo,
    ThreadList,
)

__all__ = [
    "API_KEY_VARIABLES",
    "DEFAULT_URL",
    "AgentClient",
    "AgentDescription",
    "Approval",
    "AsyncAgentClient",
    "AsyncStream",
    "EventFlags",
    "EventsOptions",
    "Interrupt",
    "InvokeOptions",
    "RunInfo",
    "ServiceChatMessage",
    "Stream",
    "StreamFlags",
    "StreamItem",
    "StreamOptions",
    "ThreadDetail",
    "ThreadInfo",
    "ThreadList",
]

DEFAULT_URL = "http://127.0.0.1:8080"
"""Where `parley serve` listens unless told otherwise."""

API_KEY_VARIABLES = ("PARLEY_API_KEY", "AUTH_SECRET")
"""Environment variables read, in order, for the API key (the second is the toolkit's)."""

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


StreamItem: TypeAlias = str | ServiceChatMessage | Interrupt
"""What `stream()` yields: answer text deltas, completed messages, and a final interrupt."""


# -- reading answers (pure functions) ------------------------------------------------------

_AGENTS = TypeAdapter(list[AgentDescription])
_MESSAGES = TypeAdapter(list[ServiceChatMessage])
_STRUCTURE_ERRORS = (ValidationError, KeyError, TypeError)


def _where(response: httpx.Response) -> str:
    request = response.request
    return f"{request.method} {request.url}"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise ServiceError(
            f"{_where(response)} answered {response.status_code} with a body that is not "
            f"JSON: {response.text[:200]!r}",
            status_code=502,
        ) from exc


def _validated(response: httpx.Response, read: Callable[[Any], T]) -> T:
    try:
        return read(_json(response))
    except _STRUCTURE_ERRORS as exc:
        raise ServiceError(
            f"{_where(response)} answered in an unexpected shape: {exc}", status_code=502
        ) from exc


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: _validated(response, cls.model_validate)


def _chat_message(response: httpx.Response) -> ServiceChatMessage:
    message = _validated(response, ServiceChatMessage.model_validate)
    if message.thread_id is None:
        message.thread_id = response.headers.get("x-thread-id")
    return message


def _history(response: httpx.Response) -> list[ServiceChatMessage]:
    return _validated(response, lambda body: _MESSAGES.validate_python(body["messages"]))


def _agents(response: httpx.Response) -> list[AgentDescription]:
    return _validated(response, _AGENTS.validate_python)


def _nothing(response: httpx.Response) -> None:
    return None


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body


def _field_errors(errors: list[Any]) -> str:
    """FastAPI's validation errors as `field: reason; ...` (the `body` prefix left out)."""
    parts = []
    for error in errors:
        if not isinstance(error, dict):
            parts.append(str(error))
            continue
        loc = [str(item) for item in error.get("loc", [])]
        if loc[:1] == ["body"] and len(loc) > 1:
            loc = loc[1:]
        parts.append(f"{'.'.join(loc) or 'request'}: {error.get('msg', error)}")
    return "; ".join(parts)


def _status_error(response: httpx.Response) -> ServiceError:
    """The parley error for an error status of the service."""
    status, detail = response.status_code, _detail(response)
    where = f"{_where(response)} answered {status}"
    if status == 422:
        errors = detail if isinstance(detail, list) else []
        text = _field_errors(errors) if errors else str(detail)
        return InvalidRequestError(f"invalid request: {text} ({where})", errors=errors)
    message = f"{detail} ({where})"
    if status == 404:
        return NotFoundError(message, status_code=status)
    if status == 409:
        return ConflictError(message, status_code=status)
    if status in {401, 403}:
        hint = "; pass api_key or set PARLEY_API_KEY" if status == 401 else ""
        return AuthenticationError(message + hint, status_code=status)
    return ServiceError(message, status_code=status)


def _checked(response: httpx.Response) -> httpx.Response:
    if response.is_error:
        raise _status_error(response)
    return response


@contextlib.contextmanager
def _transport_errors(base_url: str, timeout: float | None) -> Iterator[None]:
    """Transport failures of httpx as `ServiceConnectionError`, naming the service."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise ServiceConnectionError(
            f"the parley service at {base_url} did not answer within {timeout} s "
            f"({type(exc).__name__})"
        ) from exc
    except httpx.HTTPError as exc:
        raise ServiceConnectionError(
            f"cannot reach the parley service at {base_url}: {exc or type(exc).__name__}"
        ) from exc


# -- reading streams -----------------------------------------------------------------------

_DONE = "[DONE]"
# The ids the service adds to each event of `"events": "parley"` streams.
_ADDED_IDS = ("thread_id", "run_id")
_EVENT_FIELDS: dict[str, frozenset[str]] = {
    cls.model_fields["type"].default: frozenset(cls.model_fields)
    for cls in get_args(get_args(AgentEvent)[0])
}


def _data_of(line: str) -> str | None:
    """The value of a `data:` line; None for any other line (comments, other fields, blanks).

    The protocol sends only `data: ` lines and blank ones; others are skipped rather than
    taken as the end (the toolkit's client stops at them), as server-sent events allow.
    """
    name, colon, value = line.partition(":")
    if not colon or name != "data":
        return None
    return value.removeprefix(" ")


def _chat_item(frame: dict[str, Any]) -> StreamItem | None:
    """A toolkit-mode frame's item; None for a frame type this client does not know."""
    kind, content = frame.get("type"), frame.get("content")
    if kind == "token":
        return str(content)
    if kind == "message":
        return ServiceChatMessage.model_validate(content)
    if kind == "interrupt":
        return Interrupt.model_validate(content)
    return None


def _event_item(frame: dict[str, Any]) -> AgentEvent | None:
    """An events-mode frame's `AgentEvent`, without the ids the service added to it."""
    fields = _EVENT_FIELDS.get(frame.get("type", ""))
    if fields is None:
        return None  # an event type newer than this client
    kept = {key: value for key, value in frame.items() if key not in _ADDED_IDS or key in fields}
    return AgentEventAdapter.validate_python(kept)


def _ids(frame: dict[str, Any]) -> tuple[Any, Any]:
    content = frame.get("content")
    source = content if isinstance(content, dict) else frame
    return source.get("thread_id"), source.get("run_id")


class _FrameReader(Generic[T]):
    """Reads one stream's lines into items, and the thread and run ids it names."""

    def __init__(self, url: str, parse: Callable[[dict[str, Any]], T | None]) -> None:
        self.url = url
        self.parse = parse
        self.thread_id: str | None = None
        self.run_id: str | None = None
        self.done = False

    def open(self, response: httpx.Response) -> None:
        """Take the ids from the headers, which arrive before the first frame."""
        self.thread_id = response.headers.get("x-thread-id", self.thread_id)
        self.run_id = response.headers.get("x-run-id", self.run_id)

    def read(self, line: str) -> T | None:
        """The item of one line, if it holds one; sets `done` at `data: [DONE]`.

        Raises:
            RunFailedError: The line is an `error` frame.
            ServiceError: The line is not a JSON object, or not a valid frame.
        """
        data = _data_of(line)
        if data is None or self.done:
            return None
        if data == _DONE:
            self.done = True
            return None
        frame = self._frame(data)
        self._note_ids(frame)
        if frame.get("type") == "error":
            raise RunFailedError(
                str(frame.get("content")), thread_id=self.thread_id, run_id=self.run_id
            )
        try:
            return self.parse(frame)
        except ValidationError as exc:
            raise ServiceError(
                f"{self.url} sent a malformed frame: {exc}", status_code=502
            ) from exc

    def end(self) -> None:
        """The response ended; without `data: [DONE]` the stream was cut.

        Raises:
            ServiceConnectionError: `data: [DONE]` never came.
        """
        if not self.done:
            raise ServiceConnectionError(f"the stream from {self.url} ended before data: [DONE]")

    def _frame(self, data: str) -> dict[str, Any]:
        try:
            frame = json.loads(data)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            raise ServiceError(
                f"{self.url} sent a frame that is not a JSON object: {data[:200]!r}",
                status_code=502,
            )
        return frame

    def _note_ids(self, frame: dict[str, Any]) -> None:
        thread_id, run_id = _ids(frame)
        if isinstance(thread_id, str):
            self.thread_id = thread_id
        if isinstance(run_id, str):
            self.run_id = run_id


class _StreamBase(Generic[T]):
    def __init__(self, reader: _FrameReader[T]) -> None:
        self._reader = reader

    @property
    def thread_id(self) -> str | None:
        """The run's thread, known once the stream started (the `X-Thread-Id` header)."""
        return self._reader.thread_id

    @property
    def run_id(self) -> str | None:
        """The run, known once the stream started (the `X-Run-Id` header)."""
        return self._reader.run_id


class Stream(_StreamBase[T]):
    """The items of a run as they come; the request is sent on the first `next()`.

    Closing it (or leaving its `with` block, or breaking out of a `for` loop and dropping it)
    closes the connection, which cancels the run on the service.
    """

    def __init__(self, reader: _FrameReader[T], items: Iterator[T]) -> None:
        super().__init__(reader)
        self._items = items

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        return next(self._items)

    def close(self) -> None:
        """Stop reading and close the connection."""
        close = getattr(self._items, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Stream[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncStream(_StreamBase[T]):
    """The items of a run as they come; the request is sent on the first `anext()`.

    Closing it (`aclose()`, or leaving its `async with` block) closes the connection, which
    cancels the run on the service.
    """

    def __init__(self, reader: _FrameReader[T], items: AsyncIterator[T]) -> None:
        super().__init__(reader)
        self._items = items

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await anext(self._items)

    async def aclose(self) -> None:
        """Stop reading and close the connection."""
        close = getattr(self._items, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> AsyncStream[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# -- the requests, described once ----------------------------------------------------------


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    body: Any = None
    params: Mapping[str, str | int] | None = None


@dataclass(frozen=True)
class _StreamCall(Generic[T]):
    """One streamed request (always a POST) and how to read its frames."""

    path: str
    parse: Callable[[dict[str, Any]], T | None]
    body: dict[str, Any] = field(default_factory=dict)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _api_key(api_key: str | None) -> str | None:
    if api_key:
        return api_key
    return next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)


def _base_url(base_url: str) -> str:
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"invalid service URL {base_url!r}: {exc}") from exc
    if url.scheme not in {"http", "https"} or not url.host:
        raise ConfigurationError(f"the service URL must be http(s)://host[:port], not {base_url!r}")
    return base_url.rstrip("/")


def _user_input(
    message: str,
    model: str | None = None,
    thread_id: str | None = None,
    agent_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A `UserInput` body with only what was given: the service fills in its defaults."""
    body: dict[str, Any] = {"message": message}
    if model is not None:
        body["model"] = model
    if thread_id is not None:
        body["thread_id"] = thread_id
    if agent_config:
        body["agent_config"] = dict(agent_config)
    return body


@dataclass(frozen=True)
class _Mode(Generic[T]):
    """What a stream's frames are (toolkit frames, or parley's events), and how to ask."""

    parse: Callable[[dict[str, Any]], T | None]
    options: Mapping[str, Any]

    def body(self, stream_tokens: bool) -> dict[str, Any]:
        return {"stream_tokens": stream_tokens, **self.options}


_TOOLKIT_FRAMES: _Mode[StreamItem] = _Mode(_chat_item, {})
_PARLEY_EVENTS: _Mode[AgentEvent] = _Mode(_event_item, {"events": "parley"})


Approval: TypeAlias = bool | Mapping[str, bool]
"""An answer to an interrupt: all calls approved or denied, or a verdict per call id."""


class InvokeOptions(TypedDict, total=False):
    """What `invoke` and the streams take besides the message (every one may be left out).

    Attributes:
        model: A model name from `/info`'s `models`; None lets the agent use its own.
        thread_id: The thread to continue; None starts a new one.
        agent_config: Agent-specific settings, passed through.
    """

    model: str | None
    thread_id: str | None
    agent_config: Mapping[str, Any] | None


class StreamFlags(TypedDict, total=False):
    """What a stream's frames hold: `stream_tokens=False` leaves out the text deltas."""

    stream_tokens: bool


class EventFlags(StreamFlags, total=False):
    """`StreamFlags`, and `speak=True` to have the answer spoken (its audio in the events)."""

    speak: bool


class StreamOptions(InvokeOptions, StreamFlags, total=False):
    """`stream`'s options: `InvokeOptions` and `StreamFlags`."""


class EventsOptions(InvokeOptions, EventFlags, total=False):
    """`stream_events`'s options: `InvokeOptions` and `EventFlags`."""


def _check_options(method: str, given: Mapping[str, object], accepted: type) -> None:
    """Refuse a keyword `method` does not take, naming those it does.

    The options are typed (`Unpack[...]`) for type checkers; this is the same check at run
    time, before anything is sent (a misspelt `thread=` would otherwise go unnoticed, or
    surface as an error about a private function).
    """
    known: frozenset[str] = accepted.__optional_keys__ | accepted.__required_keys__  # type: ignore[attr-defined]
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(
            f"{method}() got an unexpected keyword argument {unknown[0]!r}; "
            f"it takes {', '.join(sorted(known))}"
        )


class _ClientBase:
    """What both clients share: settings, and every request described as a `_Call`."""

    def __init__(
        self,
        base_url: str,
        agent: str | None,
        timeout: float | None,
        api_key: str | None,
        get_info: bool,
    ) -> None:
        self.base_url = _base_url(base_url)
        self.agent = agent
        self.timeout = timeout
        self.api_key = _api_key(api_key)
        self.metadata: ServiceMetadata | None = None
        """The service's `/info`, once fetched."""
        self._needs_info = get_info

    def _headers(self, *, stream: bool = False) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return _transport_errors(self.base_url, self.timeout)

    def _build(
        self,
        http: httpx.Client | httpx.AsyncClient,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str | int] | None = None,
        *,
        stream: bool = False,
    ) -> httpx.Request:
        return http.build_request(
            method,
            self.base_url + path,
            json=body,
            params=params,
            headers=self._headers(stream=stream),
            timeout=httpx.Timeout(self.timeout),
        )

    def _use_info(self, info: ServiceMetadata) -> None:
        """Pick the default agent, or check that the chosen one exists (toolkit's rules)."""
        keys = [agent.key for agent in info.agents]
        if self.agent is None:
            self.agent = info.default_agent
        elif self.agent not in keys:
            raise NotFoundError(
                f"agent {self.agent!r} not found at {self.base_url}; available: "
                f"{', '.join(keys) or 'none'}",
                status_code=404,
            )
        self._needs_info = False

    def _remember(self, info: ServiceMetadata) -> ServiceMetadata:
        self.metadata = info
        return info

    def _agent_path(self, action: str) -> str:
        # Without an agent (and without /info), the service's default agent answers.
        return f"/{_segment(self.agent)}/{action}" if self.agent else f"/{action}"

    # Each request once; the clients send them.

    def _info_call(self) -> _Call[ServiceMetadata]:
        read = _model(ServiceMetadata)
        return _Call("GET", "/info", lambda response: self._remember(read(response)))

    def _agents_call(self) -> _Call[list[AgentDescription]]:
        return _Call("GET", "/agents", _agents)

    def _health_call(self) -> _Call[dict[str, Any]]:
        return _Call("GET", "/health", lambda response: _validated(response, dict))

    def _invoke_call(self, message: str, options: InvokeOptions) -> _Call[ServiceChatMessage]:
        body = _user_input(message, **options)
        return _Call("POST", self._agent_path("invoke"), _chat_message, body)

    def _stream_call(
        self,
        mode: _Mode[T],
        message: str,
        model: str | None = None,
        thread_id: str | None = None,
        agent_config: Mapping[str, Any] | None = None,
        stream_tokens: bool = True,
        speak: bool = False,
    ) -> _StreamCall[T]:
        body = _user_input(message, model, thread_id, agent_config)
        body |= mode.body(stream_tokens) | ({"speak": True} if speak else {})
        return _StreamCall(self._agent_path("stream"), mode.parse, body)

    def _history_call(self, thread_id: str) -> _Call[list[ServiceChatMessage]]:
        return _Call("POST", "/history", _history, {"thread_id": thread_id})

    def _feedback_call(
        self, run_id: str, key: str, score: float, kwargs: dict[str, Any]
    ) -> _Call[None]:
        body = {"run_id": run_id, "key": key, "score": score, "kwargs": kwargs}
        return _Call("POST", "/feedback", lambda response: _validated(response, _ignore), body)

    def _threads_call(self, limit: int | None, before: str | None) -> _Call[ThreadList]:
        params: dict[str, str | int] = {}
        if limit is not None:
            params["limit"] = limit
        if before is not None:
            params["before"] = before
        return _Call("GET", "/threads", _model(ThreadList), params=params)

    def _thread_call(self, thread_id: str) -> _Call[ThreadDetail]:
        return _Call("GET", f"/threads/{_segment(thread_id)}", _model(ThreadDetail))

    def _delete_thread_call(self, thread_id: str) -> _Call[None]:
        return _Call("DELETE", f"/threads/{_segment(thread_id)}", _nothing)

    def _run_call(self, run_id: str) -> _Call[RunInfo]:
        return _Call("GET", f"/runs/{_segment(run_id)}", _model(RunInfo))

    def _cancel_call(self, run_id: str) -> _Call[RunInfo]:
        return _Call("POST", f"/runs/{_segment(run_id)}/cancel", _model(RunInfo))

    def _approve_call(self, interrupt_id: str, approved: Approval) -> _Call[ServiceChatMessage]:
        path = f"/approvals/{_segment(interrupt_id)}/invoke"
        return _Call("POST", path, _chat_message, _approval(approved))

    def _approve_stream_call(
        self,
        mode: _Mode[T],
        interrupt_id: str,
        approved: Approval,
        stream_tokens: bool = True,
        speak: bool = False,
    ) -> _StreamCall[T]:
        body = _approval(approved) | mode.body(stream_tokens) | ({"speak": True} if speak else {})
        return _StreamCall(f"/approvals/{_segment(interrupt_id)}/stream", mode.parse, body)

    def _reader(self, call: _StreamCall[T]) -> _FrameReader[T]:
        return _FrameReader(self.base_url + call.path, call.parse)


def _approval(approved: Approval) -> dict[str, Any]:
    return {"approved": approved if isinstance(approved, bool) else dict(approved)}


def _ignore(body: Any) -> None:
    return None


# -- the sync client -----------------------------------------------------------------------


class AgentClient(_ClientBase):
    """A client of parley's service (and of agent-service-toolkit's), blocking.

    The positional arguments are those of the toolkit's `AgentClient`, in its order.

    Args:
        base_url: The service's URL.
        agent: The agent to talk to; None takes the service's default (from `/info` when
            `get_info`, else the service picks it per request).
        timeout: Seconds to wait for a connection and for each read (None waits forever).
        get_info: Fetch `/info` now, to pick the default agent or check `agent` exists.
        api_key: The bearer token; defaults to `$PARLEY_API_KEY`, then the toolkit's
            `$AUTH_SECRET`.
        http_client: An `httpx.Client` to send through (left open on `close()`).
        transport: An httpx transport for the client made here (tests pass a
            `httpx.MockTransport`).

    Raises:
        ConfigurationError: `base_url` is not an http(s) URL.
        NotFoundError: `agent` is not one of the service's agents.
        ServiceConnectionError: `get_info` and the service cannot be reached.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        agent: str | None = None,
        timeout: float | None = 60.0,
        get_info: bool = True,
        *,
        api_key: str | None = None,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, agent, timeout, api_key, get_info)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(transport=transport)
        if get_info:
            try:
                self._use_info(self.info())
            except BaseException:
                self.close()
                raise

    def _send(self, call: _Call[T]) -> T:
        request = self._build(self._http, call.method, call.path, call.body, call.params)
        with self._errors():
            response = self._http.send(request)
        return call.read(_checked(response))

    def _open(self, make: Callable[[], _StreamCall[T]]) -> Stream[T]:
        call = make()
        reader = self._reader(call)
        return Stream(reader, self._frames(call, reader))

    def _frames(self, call: _StreamCall[T], reader: _FrameReader[T]) -> Iterator[T]:
        request = self._build(self._http, "POST", call.path, call.body, stream=True)
        with self._errors():
            response = self._http.send(request, stream=True)
            try:
                if response.is_error:
                    response.read()
                    raise _status_error(response)
                reader.open(response)
                for line in response.iter_lines():
                    item = reader.read(line)
                    if reader.done:
                        return
                    if item is not None:
                        yield item
                reader.end()
            finally:
                response.close()

    def info(self) -> ServiceMetadata:
        """The service's agents and models (`GET /info`), also kept as `metadata`."""
        return self._send(self._info_call())

    def agents(self) -> list[AgentDescription]:
        """Every agent with its model and tools (`GET /agents`)."""
        return self._send(self._agents_call())

    def health(self) -> dict[str, Any]:
        """`GET /health`: `{"status": "ok"}` when the service is up."""
        return self._send(self._health_call())

    def invoke(self, message: str, **options: Unpack[InvokeOptions]) -> ServiceChatMessage:
        """Run the agent on `message` and return its final answer, with its `thread_id`.

        Args:
            message: The user's message.
            **options: `model`, `thread_id`, `agent_config` (see `InvokeOptions`).
        """
        _check_options("invoke", options, InvokeOptions)
        return self._send(self._invoke_call(message, options))

    def stream(self, message: str, **options: Unpack[StreamOptions]) -> Stream[StreamItem]:
        """Run the agent on `message`, yielding text deltas, messages, then any `Interrupt`.

        Arguments as `invoke`; `stream_tokens=False` leaves out the text deltas. The
        stream's `thread_id` and `run_id` are known once it started.

        Raises (while iterating):
            RunFailedError: The run failed on the service.
        """
        _check_options("stream", options, StreamOptions)
        return self._open(lambda: self._stream_call(_TOOLKIT_FRAMES, message, **options))

    def stream_events(self, message: str, **options: Unpack[EventsOptions]) -> Stream[AgentEvent]:
        """Run the agent on `message`, yielding parley's `AgentEvent`s (`"events": "parley"`).

        Arguments as `stream`. A failed run ends with `RunError` and `RunEnded` events.
        `speak=True` asks the service to speak the answer: the events carry its audio
        (`AudioStarted`, `AudioDelta` with base64 PCM, `AudioEnded`).
        """
        _check_options("stream_events", options, EventsOptions)
        return self._open(lambda: self._stream_call(_PARLEY_EVENTS, message, **options))

    def history(self, thread_id: str) -> list[ServiceChatMessage]:
        """A thread's messages, in order (`POST /history`; an unknown thread has none)."""
        return self._send(self._history_call(thread_id))

    def feedback(self, run_id: str, key: str, score: float, **kwargs: Any) -> None:
        """Record feedback on a run (`POST /feedback`); `kwargs` go along (a comment...)."""
        self._send(self._feedback_call(run_id, key, score, kwargs))

    def threads(self, *, limit: int | None = None, before: str | None = None) -> ThreadList:
        """A page of the caller's threads, newest first; `before` is the last page's `next`."""
        return self._send(self._threads_call(limit, before))

    def thread(self, thread_id: str) -> ThreadDetail:
        """A thread with its messages and pending approvals."""
        return self._send(self._thread_call(thread_id))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread and its messages."""
        self._send(self._delete_thread_call(thread_id))

    def run(self, run_id: str) -> RunInfo:
        """A run's status, error and usage."""
        return self._send(self._run_call(run_id))

    def cancel(self, run_id: str) -> RunInfo:
        """Ask a run to stop; the answer says `running` while it stops, or how it ended."""
        return self._send(self._cancel_call(run_id))

    def approve(self, interrupt_id: str, approved: Approval = True) -> ServiceChatMessage:
        """Answer an interrupt and return the resumed run's final answer.

        Args:
            interrupt_id: The `Interrupt`'s id.
            approved: True or False for every call, or `{call_id: bool}`.
        """
        return self._send(self._approve_call(interrupt_id, approved))

    def approve_stream(
        self, interrupt_id: str, approved: Approval = True, **flags: Unpack[StreamFlags]
    ) -> Stream[StreamItem]:
        """Answer an interrupt and stream the resumed run, as `stream` does."""
        _check_options("approve_stream", flags, StreamFlags)
        return self._open(
            lambda: self._approve_stream_call(_TOOLKIT_FRAMES, interrupt_id, approved, **flags)
        )

    def approve_events(
        self, interrupt_id: str, approved: Approval = True, **flags: Unpack[EventFlags]
    ) -> Stream[AgentEvent]:
        """Answer an interrupt and stream the resumed run's `AgentEvent`s (`speak`: audio)."""
        _check_options("approve_events", flags, EventFlags)
        return self._open(
            lambda: self._approve_stream_call(_PARLEY_EVENTS, interrupt_id, approved, **flags)
        )

    def close(self) -> None:
        """Close the connections (not those of an `http_client` passed in)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- the async client ----------------------------------------------------------------------


class AsyncAgentClient(_ClientBase):
    """A client of parley's service (and of agent-service-toolkit's), async.

    Arguments as `AgentClient`'s, with an `httpx.AsyncClient` and an async transport
    (`httpx.ASGITransport(app)` serves a FastAPI app in-process). With `get_info`, `/info`
    is fetched on entering `async with`, or before the first request to an agent.

    Raises:
        ConfigurationError: `base_url` is not an http(s) URL.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        agent: str | None = None,
        timeout: float | None = 60.0,
        get_info: bool = True,
        *,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, agent, timeout, api_key, get_info)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(transport=transport)

    async def _ready(self) -> None:
        if self._needs_info:
            self._use_info(await self.info())

    async def _send(self, call: _Call[T]) -> T:
        request = self._build(self._http, call.method, call.path, call.body, call.params)
        with self._errors():
            response = await self._http.send(request)
        return call.read(_checked(response))

    async def _send_to_agent(self, make: Callable[[], _Call[T]]) -> T:
        await self._ready()
        return await self._send(make())

    def _open(self, make: Callable[[], _StreamCall[T]]) -> AsyncStream[T]:
        # The agent may be unknown until /info answers: the call is made on the first read.
        reader: _FrameReader[T] = _FrameReader(self.base_url, lambda frame: None)
        return AsyncStream(reader, self._frames(make, reader))

    async def _frames(
        self, make: Callable[[], _StreamCall[T]], reader: _FrameReader[T]
    ) -> AsyncIterator[T]:
        await self._ready()
        call = make()
        reader.url, reader.parse = self.base_url + call.path, call.parse
        request = self._build(self._http, "POST", call.path, call.body, stream=True)
        with self._errors():
            response = await self._http.send(request, stream=True)
            try:
                if response.is_error:
                    await response.aread()
                    raise _status_error(response)
                reader.open(response)
                async for line in response.aiter_lines():
                    item = reader.read(line)
                    if reader.done:
                        return
                    if item is not None:
                        yield item
                reader.end()
            finally:
                await response.aclose()

    async def info(self) -> ServiceMetadata:
        """The service's agents and models (`GET /info`), also kept as `metadata`."""
        return await self._send(self._info_call())

    async def agents(self) -> list[AgentDescription]:
        """Every agent with its model and tools (`GET /agents`)."""
        return await self._send(self._agents_call())

    async def health(self) -> dict[str, Any]:
        """`GET /health`: `{"status": "ok"}` when the service is up."""
        return await self._send(self._health_call())

    async def invoke(self, message: str, **options: Unpack[InvokeOptions]) -> ServiceChatMessage:
        """Run the agent on `message` and return its final answer (see `AgentClient.invoke`)."""
        _check_options("invoke", options, InvokeOptions)
        return await self._send_to_agent(lambda: self._invoke_call(message, options))

    def stream(self, message: str, **options: Unpack[StreamOptions]) -> AsyncStream[StreamItem]:
        """Run the agent on `message`, yielding text deltas, messages, then any `Interrupt`.

        See `AgentClient.stream`.
        """
        _check_options("stream", options, StreamOptions)
        return self._open(lambda: self._stream_call(_TOOLKIT_FRAMES, message, **options))

    def stream_events(
        self, message: str, **options: Unpack[EventsOptions]
    ) -> AsyncStream[AgentEvent]:
        """Run the agent on `message`, yielding parley's `AgentEvent`s (`"events": "parley"`)."""
        _check_options("stream_events", options, EventsOptions)
        return self._open(lambda: self._stream_call(_PARLEY_EVENTS, message, **options))

    async def history(self, thread_id: str) -> list[ServiceChatMessage]:
        """A thread's messages, in order (`POST /history`; an unknown thread has none)."""
        return await self._send(self._history_call(thread_id))

    async def feedback(self, run_id: str, key: str, score: float, **kwargs: Any) -> None:
        """Record feedback on a run (`POST /feedback`); `kwargs` go along (a comment...)."""
        await self._send(self._feedback_call(run_id, key, score, kwargs))

    async def threads(self, *, limit: int | None = None, before: str | None = None) -> ThreadList:
        """A page of the caller's threads, newest first; `before` is the last page's `next`."""
        return await self._send(self._threads_call(limit, before))

    async def thread(self, thread_id: str) -> ThreadDetail:
        """A thread with its messages and pending approvals."""
        return await self._send(self._thread_call(thread_id))

    async def delete_thread(self, thread_id: str) -> None:
        """Delete a thread and its messages."""
        await self._send(self._delete_thread_call(thread_id))

    async def run(self, run_id: str) -> RunInfo:
        """A run's status, error and usage."""
        return await self._send(self._run_call(run_id))

    async def cancel(self, run_id: str) -> RunInfo:
        """Ask a run to stop; the answer says `running` while it stops, or how it ended."""
        return await self._send(self._cancel_call(run_id))

    async def approve(self, interrupt_id: str, approved: Approval = True) -> ServiceChatMessage:
        """Answer an interrupt and return the resumed run's final answer."""
        return await self._send(self._approve_call(interrupt_id, approved))

    def approve_stream(
        self, interrupt_id: str, approved: Approval = True, **flags: Unpack[StreamFlags]
    ) -> AsyncStream[StreamItem]:
        """Answer an interrupt and stream the resumed run, as `stream` does."""
        _check_options("approve_stream", flags, StreamFlags)
        return self._open(
            lambda: self._approve_stream_call(_TOOLKIT_FRAMES, interrupt_id, approved, **flags)
        )

    def approve_events(
        self, interrupt_id: str, approved: Approval = True, **flags: Unpack[EventFlags]
    ) -> AsyncStream[AgentEvent]:
        """Answer an interrupt and stream the resumed run's `AgentEvent`s (`speak`: audio)."""
        _check_options("approve_events", flags, EventFlags)
        return self._open(
            lambda: self._approve_stream_call(_PARLEY_EVENTS, interrupt_id, approved, **flags)
        )

    async def aclose(self) -> None:
        """Close the connections (not those of an `http_client` passed in)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncAgentClient:
        try:
            await self._ready()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
