"""LangGraph's runs: create, stream, wait, join, join a stream, cancel, list, delete.

A run answers the last message of `input.messages` (the earlier ones seed a new thread), or
an approval (`command.resume`: true, false, or `{call_id: bool}`). Runs go on when their
client leaves unless it asked `on_disconnect: cancel`. A busy thread: `multitask_strategy`
`enqueue` (the default) waits its turn, `reject` is 409, `interrupt` stops the current run
(keeping its partial answer) and `rollback` stops it and removes its messages.

Responses carry LangGraph's headers, relative to where the API is mounted (so both SDKs
reconnect to them): `Content-Location: /threads/{tid}/runs/{rid}` (stateless: `/runs/{rid}`)
on create, stream and wait; `Location: .../stream` on streams, `.../join` on wait and join.
Streams send `: heartbeat` every 5 s when idle; wait and join send a newline instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi.responses import StreamingResponse
from fastapi.types import DecoratedCallable
from pydantic import TypeAdapter, ValidationError

from parley.errors import MessageError
from parley.messages import Msg
from parley.service.bounds import check_messages
from parley.service.langgraph.auth import PREFIX, langgraph_user
from parley.service.langgraph.backend import LangGraphRuns, options_of
from parley.service.langgraph.convert import input_messages
from parley.service.langgraph.docs import EVENT_STREAM, JSON_RESULT, answers
from parley.service.langgraph.models import RunCreate
from parley.service.langgraph.responses import (
    created_run_dict,
    result_response,
    run_dict,
    run_path,
    stream_response,
)
from parley.service.langgraph.routes_threads import (
    find_assistant,
    get_backend,
    invalid,
    owned_thread,
)
from parley.service.langgraph.streams import (
    LANGGRAPH_MODES,
)
from parley.service.sse import parse_frame_id
from parley.service.state import ServiceState, get_state
from parley.service.store import RunRecord
from parley.service.strict import StrictRoute

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, route_class=StrictRoute, tags=["langgraph"])


def _streamed(
    method: str, path: str, responses: dict[int | str, dict[str, Any]]
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """A route whose answer is written as the run goes (SSE frames, or JSON at its end)."""
    return router.api_route(
        path, methods=[method], response_class=StreamingResponse, responses=responses
    )


State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(langgraph_user)]
Backend = Annotated[LangGraphRuns, Depends(get_backend)]

_VERDICT: TypeAdapter[bool | dict[str, bool]] = TypeAdapter(bool | dict[str, bool])
_BUSY = (
    "Thread is already running a task. Wait for it to finish or choose a different "
    "multitask strategy."
)
_CANCELLED: dict[int | str, dict[str, Any]] = {
    202: {"description": "Asked to stop (without `wait`)."},
    200: JSON_RESULT[200],
}


# -- starting a run --------------------------------------------------------------------------


def _modes(given: str | list[str]) -> frozenset[str]:
    modes = {given} if isinstance(given, str) else set(given)
    unknown = sorted(modes - LANGGRAPH_MODES)
    if unknown:
        raise invalid(
            f"unknown stream_mode {unknown}: parley sends values, messages-tuple, updates "
            "and custom",
            422,
        )
    return frozenset(modes)


async def _resume(
    state: ServiceState, user: str, thread_id: str, command: dict[str, Any]
) -> tuple[str, bool | dict[str, bool]]:
    if set(command) - {"resume"} or "resume" not in command:
        raise invalid("parley's runs take `command.resume` only (no goto, no update)", 422)
    pending = await state.store.pending_approvals(thread_id, user)
    if not pending:
        raise invalid(f"thread {thread_id} has no interrupt to resume", 409)
    interrupt_id = pending[-1].interrupt_id
    answer = command["resume"]
    if isinstance(answer, dict) and set(answer) == {interrupt_id}:
        answer = answer[interrupt_id]  # resumed by interrupt id, as LangGraph allows
    try:
        return interrupt_id, _VERDICT.validate_python(answer, strict=True)
    except ValidationError:
        raise invalid(
            "command.resume answers parley's approval: true or false for every awaiting "
            "call, or {call_id: bool}",
            422,
        ) from None


def _question(state: ServiceState, body: RunCreate) -> tuple[list[Msg], Msg]:
    raw = (body.input or {}).get("messages")
    if raw is None:
        raise invalid("send input.messages (a question) or command.resume (an approval)", 422)
    try:
        msgs = input_messages(raw)
    except MessageError as exc:
        raise invalid(str(exc), 422) from None
    if not msgs or msgs[-1].role != "user":
        raise invalid("the last of input.messages must be the user's: the agent answers it", 422)
    check_messages(msgs, state.settings.max_message_chars, ("body", "input", "messages"))
    return msgs[:-1], msgs[-1]


async def _make_room(backend: LangGraphRuns, body: RunCreate, thread_id: str, user: str) -> None:
    """Apply the multitask strategy to the thread's runs (a busy thread)."""
    thread = await backend.state.store.get_thread(thread_id, user)
    active = await backend.active_on(thread_id, user)
    if not active and (thread is None or thread.status != "running"):
        return
    if body.multitask_strategy == "reject":
        raise invalid(_BUSY, 409)
    # enqueue, interrupt, rollback: the run queue does them (`RunManager.start`)


async def _start(
    state: ServiceState,
    backend: LangGraphRuns,
    user: str,
    thread_id: str | None,
    body: RunCreate,
    *,
    read_here: bool = False,
) -> RunRecord:
    entry = find_assistant(state, body.assistant_id, status_code=422)
    stateless = thread_id is None
    thread_id = thread_id or str(uuid.uuid4())
    missing = not stateless and await state.store.get_thread(thread_id, user) is None
    if missing and body.if_not_exists != "create":
        raise invalid("Thread or assistant not found.")
    _modes(body.stream_mode)
    resume = None
    history: list[Msg] = []
    message: Msg | None = None
    if body.command is not None:
        resume = await _resume(state, user, thread_id, body.command)
    else:
        history, message = _question(state, body)
    await _make_room(backend, body, thread_id, user)
    options = body.model_dump(mode="json", exclude_none=True)
    options.setdefault("on_completion", "delete" if stateless else "keep")
    return await backend.start(
        entry,
        user_id=user,
        thread_id=thread_id,
        message=message,
        resume=resume,
        history=history,
        options=options | {"stateless": stateless},
        multitask_strategy=body.multitask_strategy,
        read_here=read_here,
    )


# -- routes ------------------------------------------------------------------------------------


@router.post("/threads/{thread_id}/runs", responses=answers(404, 409))
async def create_run(
    thread_id: str, body: RunCreate, response: Response, state: State, backend: Backend, user: User
) -> dict[str, Any]:
    """Start a run in the background: 200 with the run (`Content-Location` names it)."""
    run = await _start(state, backend, user, thread_id, body)
    response.headers["Content-Location"] = run_path(run)
    return created_run_dict(run)


@router.post("/runs", responses=answers(409))
async def create_stateless_run(
    body: RunCreate, response: Response, state: State, backend: Backend, user: User
) -> dict[str, Any]:
    """Start a run on a thread of its own, in the background."""
    run = await _start(state, backend, user, None, body)
    response.headers["Content-Location"] = run_path(run)
    return created_run_dict(run)


async def _stream_new(
    state: ServiceState, backend: LangGraphRuns, user: str, thread_id: str | None, body: RunCreate
) -> StreamingResponse:
    """Start a run (on `thread_id`, or a thread of its own) and stream it from its start."""
    run = await _start(state, backend, user, thread_id, body, read_here=True)
    cancel = body.on_disconnect == "cancel"
    return await stream_response(
        backend, run, _modes(body.stream_mode), (0, 0), cancel_on_disconnect=cancel
    )


@_streamed("POST", "/threads/{thread_id}/runs/stream", EVENT_STREAM | answers(404, 409))
async def stream_run(
    thread_id: str, body: RunCreate, state: State, backend: Backend, user: User
) -> StreamingResponse:
    """Start a run and stream it (SSE: `metadata` first, then the modes asked)."""
    return await _stream_new(state, backend, user, thread_id, body)


@_streamed("POST", "/runs/stream", EVENT_STREAM | answers(409))
async def stream_stateless_run(
    body: RunCreate, state: State, backend: Backend, user: User
) -> StreamingResponse:
    """Start a run on a thread of its own and stream it."""
    return await _stream_new(state, backend, user, None, body)


@_streamed("POST", "/threads/{thread_id}/runs/wait", JSON_RESULT | answers(404, 409))
async def wait_run(
    thread_id: str, body: RunCreate, state: State, backend: Backend, user: User
) -> StreamingResponse:
    """Start a run and answer the thread's values when it ends."""
    run = await _start(state, backend, user, thread_id, body, read_here=True)
    return result_response(backend, run, location=f"{run_path(run)}/join")


@_streamed("POST", "/runs/wait", JSON_RESULT | answers(409))
async def wait_stateless_run(
    body: RunCreate, state: State, backend: Backend, user: User
) -> StreamingResponse:
    """Start a run on a thread of its own and answer its values when it ends."""
    run = await _start(state, backend, user, None, body, read_here=True)
    return result_response(backend, run, location=f"{run_path(run)}/join")


async def _find_run(backend: LangGraphRuns, user: str, thread_id: str, run_id: str) -> RunRecord:
    record = await backend.get(run_id, user)
    if record is None or record.thread_id != thread_id:
        raise invalid("Run not found")
    return record


@router.get("/threads/{thread_id}/runs", responses=answers(404))
async def list_runs(
    thread_id: str,
    state: State,
    backend: Backend,
    user: User,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    status: str | None = None,
) -> list[dict[str, Any]]:
    """The thread's runs, newest first (from the store: any replica's)."""
    await owned_thread(state, thread_id, user)
    runs = await backend.of_thread(thread_id, user, limit=limit, offset=offset, status=status)
    return [run_dict(r) for r in runs]


@router.get("/threads/{thread_id}/runs/{run_id}", responses=answers(404))
async def get_run(thread_id: str, run_id: str, backend: Backend, user: User) -> dict[str, Any]:
    """One run of the caller's."""
    return run_dict(await _find_run(backend, user, thread_id, run_id))


@_streamed("GET", "/threads/{thread_id}/runs/{run_id}/join", JSON_RESULT | answers(404))
async def join_run(thread_id: str, run_id: str, backend: Backend, user: User) -> Response:
    """Wait for a run's end, wherever it runs; the thread's values (a finished run: at once)."""
    found = await _find_run(backend, user, thread_id, run_id)
    return result_response(backend, found, location=f"{run_path(found)}/join")


@dataclass(frozen=True)
class _Joining:
    """How a client joins a run's stream: the modes, where it left off, whether leaving cancels."""

    stream_mode: list[str] | None
    cancel_on_disconnect: bool
    last_event_id: str | None

    async def stream(self, backend: LangGraphRuns, run: RunRecord) -> Response:
        """`run`'s stream from where the client left off (live without `Last-Event-ID`)."""
        after = parse_frame_id(run.run_id, self.last_event_id)
        stored = options_of(run).get("stream_mode")
        given = [m for m in self.stream_mode or [] if m] or stored or ["values"]
        modes = _modes(given if isinstance(given, list) else [given])
        return await stream_response(
            backend, run, modes, after, cancel_on_disconnect=self.cancel_on_disconnect
        )


def _joining(
    stream_mode: Annotated[list[str] | None, Query()] = None,
    cancel_on_disconnect: bool = False,
    last_event_id: Annotated[str | None, Header()] = None,
) -> _Joining:
    return _Joining(stream_mode, cancel_on_disconnect, last_event_id)


Joining = Annotated[_Joining, Depends(_joining)]


@_streamed(
    "GET", "/threads/{thread_id}/runs/{run_id}/stream", EVENT_STREAM | answers(400, 404, 410)
)
async def join_stream(
    thread_id: str, run_id: str, backend: Backend, user: User, joining: Joining
) -> Response:
    """Follow a run's stream: with `Last-Event-ID` what came after it (-1: all), else live."""
    return await joining.stream(backend, await _find_run(backend, user, thread_id, run_id))


@_streamed("GET", "/runs/{run_id}/stream", EVENT_STREAM | answers(400, 404, 410))
async def join_stateless_stream(
    run_id: str, backend: Backend, user: User, joining: Joining
) -> Response:
    """Follow a stateless run's stream (where its stream's `Location` points)."""
    run = await backend.get(run_id, user)
    if run is None:
        raise invalid("Run not found")
    return await joining.stream(backend, run)


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    responses=_CANCELLED | answers(404),
)
async def cancel_run(
    thread_id: str,
    run_id: str,
    state: State,
    backend: Backend,
    user: User,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> Response:
    """Stop a run (it keeps its partial answer): 202, or with `wait` 200 and the values."""
    found = await _find_run(backend, user, thread_id, run_id)
    await backend.cancel(run_id, user, action)
    if not wait:
        return Response(status_code=202)
    return result_response(backend, found, location=f"{run_path(found)}/join")


@router.delete(
    "/threads/{thread_id}/runs/{run_id}",
    status_code=204,
    responses=answers(404),
)
async def delete_run(thread_id: str, run_id: str, backend: Backend, user: User) -> None:
    """Delete a run (a running one is stopped first); its messages stay in the thread."""
    await _find_run(backend, user, thread_id, run_id)
    await backend.delete(run_id, user)
