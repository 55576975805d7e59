"""An OpenAI-compatible API: every agent is a model, and a chat completion is one agent run.

```python
client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="<parley API key>")
client.models.list()                                         # the agents
client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "Hi"}])
```

- `GET /v1/models`, `GET /v1/models/{id}`: the agents, by key.
- `POST /v1/chat/completions`: `model` is an agent's key; the agent runs on `messages` (its
  tools run here, server-side) and its answer comes back as a `chat.completion`, or as
  `chat.completion.chunk` server-sent events ending with `data: [DONE]` when `stream`.

Threads. OpenAI's API is stateless: the client sends the whole conversation every time. So by
default each request is a new thread holding the request's messages: the earlier ones stored
as they came (no run wrote them), the last one, which must be the user's, as the run's input.
Such threads are stored, listed and read like any other (`/threads`), and the response names
them in `X-Thread-Id` (and the run in `X-Run-Id`). A request with the header `X-Thread-Id`
continues that thread instead: when it holds messages, only the request's last (user)
message is new, and the stored conversation, tool calls and results included, is what the
agent sees; when it does not exist, it is made under that id (the caller's) and seeded from
the request as above. A thread runs one request at a time, as everywhere in the service.

The answer's text is every assistant turn's text of the run, turns a blank line apart: a
model that says something before calling a tool says it in the answer too, because a stream
shows it as it comes and a whole answer must say the same. `finish_reason` is `stop`, or
`length` when the agent reached its iteration limit; never `tool_calls` (the tools ran). A
run stopped by `POST /runs/{id}/cancel`, or parked for a person's approval of a tool call,
also ends `stop`; parley's own `parley` object on the answer (and on a stream's last chunk)
says how the run ended (`status`) and, when parked, the `interrupt_id` to approve at
`/approvals/{interrupt_id}/...`.

What is accepted and what is refused:
- Messages: `system` and `developer` (kept in the thread as system messages, after the
  agent's own instructions), `user` (text, or parts: `text`, `image_url` by `http(s)://` or
  `data:` URL, `input_audio`, `file` with inline `file_data`), `assistant` (text and
  `tool_calls`), `tool` (results of those calls). An image by any other URL is refused: a
  `file://` URL would have the server read its own files.
- Sampling parameters (`temperature`, `top_p`, `max_tokens`, `seed`, `stop`, ...) and `user`
  are accepted and ignored: the agent's model keeps its own settings, and the caller is who
  the API key says.
- `tools`, `functions`, a `tool_choice` other than `auto`, `n` above 1, a `response_format`
  other than `text` and `logprobs` are refused (400): the agent brings its own tools and
  gives one plain answer, and ignoring these would hand back something else than asked for.

Errors on `/v1/...` are OpenAI's `{"error": {"message", "type", "param", "code"}}`, whatever
raised them (auth, validation, the store): the service's own handlers decide the status, and
this module reshapes their answer for these paths only. A rejected field is 400 (OpenAI has
no 422), with the field in `param`. A run that fails answers 502, or, once a stream has begun,
sends `data: {"error": {...}}` and then `data: [DONE]`, as vLLM does. A client that leaves a
stream stops the run; the partial answer stays in the thread, marked interrupted.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Request, Response
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse

from parley.agents.events import AgentEvent, MessageCompleted, RunEnded, RunError, TextDelta
from parley.messages import Msg
from parley.service.auth import current_user
from parley.service.bounds import check_messages
from parley.service.openai_messages import (
    OpenAIError,
    bad_request,
    error_body,
    request_messages,
)
from parley.service.openai_models import Completion, model_completion
from parley.service.openai_schema import (
    UNION_TAGS,
    ChatCompletion,
    ChatCompletionRequest,
    ChunkDelta,
    ErrorResponse,
    FinishReason,
    ModelCard,
    ModelKind,
    ModelList,
    OutputMessage,
    ParleyRun,
)
from parley.service.runs import RunHandle
from parley.service.sse import DONE, frame
from parley.service.state import (
    ServiceState,
    get_state,
    new_thread_id,
    run_headers,
    run_stream_response,
)
from parley.service.strict import StrictRoute

__all__ = ["OpenAIError", "add_error_handlers", "request_messages", "router"]

log = logging.getLogger("parley.service")

# Bodies read as the rest of the service reads them: standard JSON, storable strings.
router = APIRouter(prefix="/v1", tags=["openai"], route_class=StrictRoute)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]

_STARTED = int(time.time())
"""When the service started: the `created` time of every model (an agent has none of its own)."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in [
        (400, "A field the service rejected (`param` names it)."),
        (401, "Missing or wrong API key."),
        (404, "Unknown model (neither an agent nor a served model)."),
        (409, "The thread is busy with another run."),
        (429, "A served model's provider is rate limiting (`Retry-After` when it said)."),
        (502, "The run failed (the model or the agent), or a served model's call did."),
        (503, "A served model is not available (the service's configuration)."),
    ]
}

_FINISH: dict[str, FinishReason] = {"completed": "stop", "max_iters": "length"}
"""OpenAI's finish reason for how a run ended; `stop` for the others (cancelled, parked)."""

_REFUSED_TOOLS = (
    "this model is a parley agent: it brings its own tools and runs them itself, so `{field}` "
    "cannot be given; leave it out, and the answer is the agent's final text"
)


# -- models ----------------------------------------------------------------------------------------


@router.get("/models", responses=_ERRORS)
async def list_models(state: State, _user: User) -> ModelList:
    """The agents and the served models; `parley.kind` tells which is which."""
    agents = [_agent_card(entry.key, entry.description) for entry in state.registry]
    models = [_model_card(entry.key, entry.provider) for entry in state.models]
    return ModelList(data=[*agents, *models])


@router.get("/models/{model_id:path}", responses=_ERRORS)
async def get_model(model_id: str, state: State, _user: User) -> ModelCard:
    """One agent or served model."""
    served = state.models.get(model_id)
    if served is not None:
        return _model_card(served.key, served.provider)
    _check_model(state, model_id)
    return _agent_card(model_id, state.registry.get(model_id).description)


def _agent_card(key: str, description: str) -> ModelCard:
    return ModelCard(
        id=key, created=_STARTED, parley=ModelKind(kind="agent", description=description)
    )


def _model_card(key: str, provider: str) -> ModelCard:
    description = "A model served as itself: client tools are passed through."
    return ModelCard(
        id=key,
        created=_STARTED,
        owned_by=provider,
        parley=ModelKind(kind="model", description=description),
    )


def _check_model(state: ServiceState, model: str) -> None:
    if model not in state.registry:
        agents = ", ".join(entry.key for entry in state.registry)
        models = ", ".join(entry.key for entry in state.models) or "(none)"
        raise OpenAIError(
            f"the model {model!r} does not exist; this service's agents are: {agents}; its "
            f"served models are: {models}",
            status_code=404,
            param="model",
            code="model_not_found",
        )


# -- chat completions --------------------------------------------------------------------------


_COMPLETION_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ChatCompletion,
        "description": "A `chat.completion`; with `stream`, `chat.completion.chunk` "
        "server-sent events ending with `data: [DONE]`.",
        "content": {
            "text/event-stream": {
                "example": 'data: {"object": "chat.completion.chunk", ...}\n\ndata: [DONE]\n\n'
            }
        },
    },
    **_ERRORS,
}


@router.post("/chat/completions", response_model=None, responses=_COMPLETION_RESPONSES)
async def chat_completions(
    body: ChatCompletionRequest,
    state: State,
    user: User,
    x_thread_id: Annotated[
        str | None,
        Header(
            alias="X-Thread-Id",
            description="Continue this stored thread (only the last message is new); agents only.",
        ),
    ] = None,
) -> Response:
    """Run an agent on the conversation, or call a served model on it (`model` says which)."""
    served = state.models.get(body.model)
    if served is not None:
        if x_thread_id is not None:
            raise bad_request(
                "X-Thread-Id",
                "a served model keeps no thread: send the whole conversation in `messages` "
                "(threads are an agent's)",
            )
        return await model_completion(body, served, state.settings)
    _check_model(state, body.model)
    _refuse_unsupported(body, state)
    history, message = request_messages(body.messages)
    check_messages([*history, message], state.settings.max_message_chars, ("body", "messages"))
    entry = state.registry.get(body.model)
    # Started before any response, so a busy thread (409) is an HTTP error, not a chunk.
    handle = await state.runs.start(
        entry.agent,
        agent_key=entry.key,
        user_id=user,
        thread_id=_thread_id(x_thread_id),
        message=message,
        history=history,
    )
    completion = _Completion.of(handle)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        send_timeout = state.settings.send_timeout
        return _stream(handle, completion, include_usage=include_usage, send_timeout=send_timeout)
    return await _whole(handle, completion)


_TOOL_FIELDS = frozenset({"tools", "functions", "tool_choice", "function_call"})

_CHECKS: list[tuple[str, Callable[[ChatCompletionRequest], bool], str]] = [
    ("tools", lambda b: bool(b.tools), _REFUSED_TOOLS.format(field="tools")),
    ("functions", lambda b: bool(b.functions), _REFUSED_TOOLS.format(field="functions")),
    (
        "tool_choice",
        lambda b: b.tool_choice not in (None, "auto"),
        _REFUSED_TOOLS.format(field="tool_choice") + " (only `auto` is accepted)",
    ),
    (
        "function_call",
        lambda b: b.function_call not in (None, "auto"),
        _REFUSED_TOOLS.format(field="function_call") + " (only `auto` is accepted)",
    ),
    ("n", lambda b: b.n not in (None, 1), "an agent gives one answer per request: n must be 1"),
    (
        "response_format",
        lambda b: b.response_format is not None and b.response_format.get("type") != "text",
        "an agent answers in plain text: response_format must be {'type': 'text'} or left out",
    ),
    ("logprobs", lambda b: bool(b.logprobs), "an agent's answer has no log probabilities"),
]
"""Fields that would change an agent's answer's form, each with its test and why refused."""


def _refuse_unsupported(body: ChatCompletionRequest, state: ServiceState) -> None:
    for field, refused, reason in _CHECKS:
        if refused(body):
            raise bad_request(field, reason + _models_hint(state, field))


def _models_hint(state: ServiceState, field: str) -> str:
    """Where a client's own tools can go instead: the served models, if any."""
    if field not in _TOOL_FIELDS and field != "response_format":
        return ""
    models = ", ".join(entry.key for entry in state.models)
    if not models:
        return "; a served model takes it, and this service serves none (PARLEY_SERVED_MODELS)"
    return f"; a served model takes it: name one instead ({models})"


def _thread_id(header: str | None) -> str:
    try:
        return new_thread_id(header)
    except RequestValidationError as exc:
        raise bad_request("X-Thread-Id", exc.errors()[0]["msg"]) from None


@dataclass(frozen=True)
class _Completion(Completion):
    """What every chunk or answer of one request repeats: its id, time, model and run."""

    thread_id: str
    run_id: str

    @classmethod
    def of(cls, handle: RunHandle) -> _Completion:
        # The run's id, so that an answer leads to its run (`GET /runs/run_<hex>`).
        hex_id = handle.run_id.removeprefix("run_")
        return cls(
            f"chatcmpl-{hex_id}", int(time.time()), handle.agent, handle.thread_id, handle.run_id
        )

    def parley(self, ended: RunEnded) -> ParleyRun:
        """The run behind the answer, as the answer's `parley` field tells it."""
        interrupt_id = None
        if ended.status == "awaiting_approval" and ended.final is not None:
            interrupt_id = ended.final.metadata.get("interrupt_id")
        return ParleyRun(
            thread_id=self.thread_id,
            run_id=self.run_id,
            status=ended.status,
            interrupt_id=interrupt_id,
        )


class _Answer:
    """A run's answer as it goes: each assistant turn's text, a blank line apart.

    `pieces(handle)` reads the run's events and yields the text each adds, so the chunks of
    a stream join into exactly `text`, the whole answer; then `outcome` tells how it ended.
    """

    def __init__(self) -> None:
        self.turns: list[str] = []
        self.ended: RunEnded | None = None
        self.error = "unknown error"
        self._turn: list[str] = []

    async def pieces(self, handle: RunHandle) -> AsyncIterator[str]:
        """The answer's text as the run adds it (read the run to its end)."""
        async for event in handle.events():
            if isinstance(event, RunError):
                self.error = event.message
            elif isinstance(event, RunEnded):
                self.ended = event
            elif text := self._see(event):
                yield text

    @property
    def outcome(self) -> RunEnded | None:
        """How the run ended; None when it failed (`error` says why). Read `pieces` first."""
        return None if self.ended is None or self.ended.status == "error" else self.ended

    @property
    def text(self) -> str:
        """The answer so far."""
        current = "".join(self._turn)
        return "\n\n".join([*self.turns, current] if current else self.turns)

    def _see(self, event: AgentEvent) -> str:
        if isinstance(event, TextDelta):
            return self._add(event.text)
        if isinstance(event, MessageCompleted) and event.msg.role == "assistant":
            return self._end_turn(event.msg)
        return ""

    def _add(self, text: str) -> str:
        starts_turn = not self._turn
        self._turn.append(text)
        return f"\n\n{text}" if starts_turn and self.turns else text

    def _end_turn(self, msg: Msg) -> str:
        streamed = "".join(self._turn)
        self._turn = []
        if streamed:
            self.turns.append(streamed)
            return ""
        if not msg.text:
            return ""
        # A turn whose text came whole, without deltas: it still belongs in the answer.
        piece = f"\n\n{msg.text}" if self.turns else msg.text
        self.turns.append(msg.text)
        return piece


def _run_failed(answer: _Answer) -> ErrorResponse:
    return ErrorResponse(error=error_body(502, f"the run failed: {answer.error}"))


async def _whole(handle: RunHandle, completion: _Completion) -> JSONResponse:
    answer = _Answer()
    async for _ in answer.pieces(handle):
        pass
    headers = run_headers(handle)
    ended = answer.outcome
    if ended is None:
        failed = _run_failed(answer).model_dump(mode="json")
        return JSONResponse(failed, status_code=502, headers=headers)
    body = completion.answer(
        OutputMessage(content=answer.text),
        _FINISH.get(ended.status, "stop"),
        ended.usage,
        completion.parley(ended),
    )
    return JSONResponse(body.model_dump(mode="json"), headers=headers)


def _stream(
    handle: RunHandle, completion: _Completion, *, include_usage: bool, send_timeout: float
) -> Response:
    chunks = _chunks(handle, completion, include_usage=include_usage)
    return run_stream_response(handle, chunks, send_timeout=send_timeout)


async def _chunks(
    handle: RunHandle, completion: _Completion, *, include_usage: bool
) -> AsyncIterator[str]:
    yield completion.chunk(ChunkDelta(role="assistant", content=""))
    answer = _Answer()
    async for text in answer.pieces(handle):
        yield completion.chunk(ChunkDelta(content=text))
    ended = answer.outcome
    if ended is None:
        yield frame(_run_failed(answer).model_dump(mode="json"))
    else:
        yield completion.chunk(
            ChunkDelta(),
            finish_reason=_FINISH.get(ended.status, "stop"),
            parley=completion.parley(ended),
        )
        if include_usage:
            yield completion.usage_chunk(ended.usage)
    yield DONE


# -- errors ------------------------------------------------------------------------------------


def _error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorResponse(error=error_body(status, message, param=param, code=code))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


_SCALAR_LABELS = frozenset({"str", "int", "float", "bool", "none", "dict", "list"})


def _is_label(part: str | int, previous: str | int | None) -> bool:
    """Whether a location part names a union's member rather than a field."""
    if isinstance(part, int):
        return False
    if isinstance(previous, int) and part in UNION_TAGS:
        return True  # a tagged union's tag: ("messages", 0, "user", "content")
    # A plain union's member: ("content", "str"), ("content", "list[...]", 0).
    return part in _SCALAR_LABELS or "[" in part or part[:1].isupper()


def _param(loc: Sequence[str | int]) -> str:
    """A pydantic error's location as a field path: `messages[0].content`."""
    path = ""
    previous: str | int | None = None
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not _is_label(part, previous):
            path += f".{part}" if path else part
        previous = part
    return path


def _validation_error(errors: Sequence[Any], headers: Mapping[str, str] | None = None) -> Response:
    """Validation errors (`{"loc", "msg", ...}` each) as one OpenAI 400 naming the field."""
    if not errors:
        return _error_response(400, "invalid request", headers=headers)
    # The error that got furthest into the request says best what is wrong: of a field that
    # may be a string or a list of parts, a bad part's error, not "Input should be a string".
    worst = max(errors, key=lambda error: len(error.get("loc") or ()))
    if worst.get("type") == "json_invalid":
        # No field is at fault (the location is a character position); the reason is in ctx.
        reason = (worst.get("ctx") or {}).get("error")
        message = f"{worst['msg']}: {reason}" if reason else str(worst["msg"])
        return _error_response(400, message, headers=headers)
    param = _param(worst.get("loc") or ())
    message = f"{param}: {worst['msg']}" if param else str(worst["msg"])
    return _error_response(400, message, param=param or None, headers=headers)


_BODY_HEADERS = frozenset({"content-length", "content-type"})


def _reshaped(response: Response) -> Response:
    """The service's `{"detail": ...}` error answer, as OpenAI's error."""
    try:
        detail = json.loads(bytes(response.body))["detail"]
    except (ValueError, KeyError, TypeError):
        return response  # no body to reshape (a 204 or 304)
    # Its headers stay (`WWW-Authenticate` on a 401, `Allow` on a 405), but not the old body's.
    kept = {k: v for k, v in response.headers.items() if k not in _BODY_HEADERS}
    if isinstance(detail, list):  # the validation shape: a 422's list of errors
        return _validation_error(detail, kept)
    message = detail if isinstance(detail, str) else json.dumps(detail)
    status = 400 if response.status_code == 422 else response.status_code  # OpenAI has no 422
    return _error_response(status, message, headers=kept)


def _is_openai_path(request: Request) -> bool:
    path = request.url.path.removeprefix(request.scope.get("root_path", ""))
    return path == router.prefix or path.startswith(f"{router.prefix}/")


Handler = Callable[[Request, Exception], "Response | Awaitable[Response]"]


def _for_openai_paths(handler: Handler, exc_class: type[Exception]) -> Handler:
    async def handle(request: Request, exc: Exception) -> Response:
        if _is_openai_path(request) and isinstance(exc, RequestValidationError):
            return _validation_error(exc.errors())
        answer = handler(request, exc)
        response = await answer if inspect.isawaitable(answer) else answer
        return _reshaped(response) if _is_openai_path(request) else response

    handle.__name__ = f"openai_shaped_{exc_class.__name__}"
    return handle


async def _openai_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OpenAIError)  # registered for this class only
    return _error_response(
        exc.status_code, str(exc), param=exc.param, code=exc.code, headers=exc.headers
    )


def add_error_handlers(app: FastAPI) -> None:
    """Answer errors on `/v1/...` in OpenAI's shape; every other path keeps its own.

    Call it after the app's own handlers are added: it wraps each of them, so the status,
    the headers and the logging stay theirs, and only the body changes (422 becomes 400).
    """
    for exc_class, handler in list(app.exception_handlers.items()):
        if not isinstance(exc_class, type) or exc_class is WebSocketRequestValidationError:
            continue  # a status-code handler, or one for websockets (no /v1 there)
        app.exception_handlers[exc_class] = _for_openai_paths(handler, exc_class)
    app.add_exception_handler(OpenAIError, _openai_error)
