"""Every agent over the AG-UI protocol (CopilotKit and other AG-UI front ends), as the toolkit.

- `POST /agui/run`: the default agent; `POST /agui/{agent_id}/run`: that agent.
- The body is AG-UI's `RunAgentInput`; the answer is AG-UI events as server-sent events
  (`parley.service.agui` says which, in what order).
- `threadId` is a parley thread, with the same rules as everywhere: the caller's own (each
  user has thread ids of their own: another user's thread of that id is another thread), one
  run at a time (409), made when new. Only
  the last of `messages` is new and must be the user's; the earlier ones seed a new thread
  and are otherwise ignored (the stored thread is the truth), as the OpenAI endpoint does.
  `tools` and `context` (a front end's own tools) are ignored: the agent brings its own.
- `forwardedProps.configurable` is the toolkit's per-request configuration: `model` (a name
  `/info` lists, else 400), and keys the protocol manages (`thread_id`, `checkpoint_id`,
  `checkpoint_ns`) are 422; others are ignored (`user_id` too: the user is who the
  credentials say).
- A parked run is continued by a run on the same thread with `resume` entries for its
  interrupts, or `forwardedProps.command.resume` (see `parley.service.agui`).
- Errors before the stream are JSON (`{"detail"}`), as on every route; a run that fails
  later ends its stream with `RUN_ERROR`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError

from parley.errors import ConflictError, MessageError, NotFoundError, ServiceError
from parley.service.agui import agui_frames, input_messages, split_interrupt_id
from parley.service.auth import current_user
from parley.service.bounds import check_messages
from parley.service.runs import RunHandle
from parley.service.schema import error_responses
from parley.service.state import ServiceState, get_state, new_thread_id, run_stream_response
from parley.service.strict import StrictRoute

__all__ = ["RESERVED_CONFIGURABLE_KEYS", "router"]

router = APIRouter(prefix="/agui", tags=["ag-ui"], route_class=StrictRoute)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]

RESERVED_CONFIGURABLE_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns"})
"""Keys the protocol manages, refused in `forwardedProps.configurable` (as the toolkit)."""

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **error_responses(401, 404, 409),
    400: {"description": "A model `/info` does not list."},
    200: {
        "description": "AG-UI events as server-sent events, `RUN_STARTED` to `RUN_FINISHED` "
        "(or `RUN_ERROR`).",
        "content": {"text/event-stream": {"example": 'data: {"type":"RUN_STARTED",...}\n\n'}},
    },
}
_VERDICT: TypeAdapter[bool | dict[str, bool]] = TypeAdapter(bool | dict[str, bool])


@router.post("/run", response_class=StreamingResponse, responses=_RESPONSES)
async def agui_run_default(
    body: RunAgentInput, request: Request, state: State, user: User
) -> StreamingResponse:
    """Run the default agent over AG-UI."""
    return await _run(state, user, state.registry.default, body, request)


@router.post("/{agent_id}/run", response_class=StreamingResponse, responses=_RESPONSES)
async def agui_run(
    agent_id: str, body: RunAgentInput, request: Request, state: State, user: User
) -> StreamingResponse:
    """Run an agent over AG-UI: its events as server-sent events."""
    return await _run(state, user, agent_id, body, request)


async def _run(
    state: ServiceState, user: str, agent_id: str, body: RunAgentInput, request: Request
) -> StreamingResponse:
    entry = state.registry.get(agent_id)
    forwarded = _forwarded(body.forwarded_props)
    configurable = _configurable(forwarded)
    agent = state.agent_for(entry, _model(state, configurable))
    thread_id = new_thread_id(body.thread_id)
    verdicts = await _resume(state, user, thread_id, body, forwarded)
    start: dict[str, Any]
    if verdicts is not None:
        start = {"resume": verdicts}
    else:
        history, message = _new_input(body)
        check_messages([*history, message], state.settings.max_message_chars, ("body", "messages"))
        start = {"message": message, "history": history}
    handle: RunHandle = await state.runs.start(
        agent, agent_key=entry.key, user_id=user, thread_id=thread_id, snapshot=True, **start
    )
    encoder = EventEncoder(accept=request.headers.get("accept", ""))
    frames = agui_frames(handle, body, encoder)
    return run_stream_response(handle, frames, send_timeout=state.settings.send_timeout)


def _invalid(loc: tuple[str | int, ...], msg: str, value: Any) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": msg, "type": "value_error", "input": value}])


def _forwarded(props: Any) -> Mapping[str, Any]:
    if props is None:
        return {}
    if not isinstance(props, dict):
        raise _invalid(("body", "forwardedProps"), "forwardedProps must be an object", props)
    return props


def _configurable(forwarded: Mapping[str, Any]) -> Mapping[str, Any]:
    configurable = forwarded.get("configurable") or {}
    where = ("body", "forwardedProps", "configurable")
    if not isinstance(configurable, dict):
        raise _invalid(where, "forwardedProps.configurable must be an object", configurable)
    if reserved := sorted(RESERVED_CONFIGURABLE_KEYS & configurable.keys()):
        raise _invalid(
            where, f"forwardedProps.configurable contains reserved keys: {reserved}", configurable
        )
    return configurable


def _model(state: ServiceState, configurable: Mapping[str, Any]) -> str | None:
    model = configurable.get("model")
    if model is None:
        return None
    offered = list(state.settings.model_aliases)
    if model not in offered:
        raise ServiceError(
            f"Model {model!r} is not available. Allowed: {offered} (as /info lists them)",
            status_code=400,
        )
    return str(model)


def _new_input(body: RunAgentInput) -> tuple[list[Any], Any]:
    try:
        msgs = input_messages(body.messages)
    except MessageError as exc:
        raise _invalid(("body", "messages"), str(exc), None) from None
    if not msgs or msgs[-1].role != "user":
        raise _invalid(
            ("body", "messages"),
            "the last message must be the user's: the agent answers it (or send `resume` "
            "to answer a parked run's interrupts)",
            None,
        )
    return msgs[:-1], msgs[-1]


async def _resume(
    state: ServiceState,
    user: str,
    thread_id: str,
    body: RunAgentInput,
    forwarded: Mapping[str, Any],
) -> tuple[str, bool | dict[str, bool]] | None:
    """The interrupt this run answers and its verdicts; None when it answers none.

    An interrupt named in `resume` entries is looked up as the caller's when the run starts
    (another user's is 404 there, as an unknown one).
    """
    command = forwarded.get("command")
    if body.resume:
        return _from_entries(body)
    if not isinstance(command, dict) or "resume" not in command:
        return None
    try:
        verdict = _VERDICT.validate_python(command["resume"], strict=True)
    except ValidationError:
        raise _invalid(
            ("body", "forwardedProps", "command", "resume"),
            "resume with true or false for every awaiting call, or {call_id: bool}",
            command["resume"],
        ) from None
    if await state.store.get_thread(thread_id, user) is None:
        raise NotFoundError(f"thread {thread_id!r} not found", status_code=404)
    pending = await state.store.pending_approvals(thread_id, user)
    if not pending:
        raise ConflictError(f"thread {thread_id!r} has no interrupt to resume", status_code=409)
    return pending[-1].interrupt_id, verdict


def _from_entries(body: RunAgentInput) -> tuple[str, dict[str, bool]]:
    interrupt_ids: set[str] = set()
    verdicts: dict[str, bool] = {}
    for index, entry in enumerate(body.resume or []):
        interrupt_id, call_id = split_interrupt_id(entry.interrupt_id)
        if not interrupt_id:
            raise _invalid(
                ("body", "resume", index, "interruptId"),
                "not an interrupt this service sent",
                entry.interrupt_id,
            )
        interrupt_ids.add(interrupt_id)
        # Resolved is approved unless its payload says otherwise; cancelled is denied.
        payload = entry.payload
        denied = isinstance(payload, dict) and payload.get("approved") is False
        verdicts[call_id] = entry.status == "resolved" and not denied
    if len(interrupt_ids) != 1:
        raise _invalid(
            ("body", "resume"), "answer the interrupts of one parked run", len(interrupt_ids)
        )
    return interrupt_ids.pop(), verdicts
