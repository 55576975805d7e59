"""What the toolkit lacks: threads, runs, approval interrupts, and parley's view of its agents.

Threads are listed, read and deleted; interrupts answered (runs: `routes_runs`).
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse

from parley.errors import ConflictError, NotFoundError, UserError
from parley.messages import Msg
from parley.service.auth import current_user
from parley.service.routes_toolkit import answer_of
from parley.service.runs import RunHandle
from parley.service.schema import (
    AgentDescription,
    ApprovalInput,
    ApprovalStreamInput,
    ServiceChatMessage,
    ThreadDetail,
    ThreadInfo,
    ThreadList,
    error_responses,
)
from parley.service.sse import make_interrupt
from parley.service.state import ServiceState, get_state, is_thread_id, sse_response
from parley.service.store import ThreadRecord
from parley.service.strict import StrictRoute

__all__ = ["router"]

router = APIRouter(
    responses=error_responses(401),  # every route here needs a user
    route_class=StrictRoute,
)

_FOUND = error_responses(404)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]


def _info(thread: ThreadRecord) -> ThreadInfo:
    return ThreadInfo.model_validate(thread, from_attributes=True)


def _cursor(thread: ThreadRecord) -> str:
    raw = f"{thread.updated_at.isoformat()}|{thread.thread_id}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _parse_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, _, thread_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is not None:  # in UTC, the store's time (or OverflowError: year 10000)
            moment = moment.astimezone(UTC)
        if is_thread_id(thread_id):  # else no cursor of ours (and NUL would reach the database)
            return moment, thread_id
    except (ValueError, OverflowError, binascii.Error, UnicodeDecodeError):
        pass
    raise RequestValidationError(
        [
            {
                "loc": ("query", "before"),
                "msg": "not a cursor this service gave (pass a page's `next` as is)",
                "type": "value_error",
                "input": cursor,
            }
        ]
    )


@router.get("/threads", tags=["threads"])
async def list_threads(
    state: State,
    user: User,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    before: str | None = None,
) -> ThreadList:
    """The caller's threads, most recently active first, a page at a time."""
    start = _parse_cursor(before) if before else None
    rows = await state.store.list_threads(user, limit=limit + 1, before=start)
    page = rows[:limit]
    following = _cursor(page[-1]) if len(rows) > limit else None
    return ThreadList(threads=[_info(t) for t in page], next=following)


async def _own_thread(state: ServiceState, thread_id: str, user: str) -> ThreadRecord:
    thread = await state.store.get_thread(thread_id, user)
    if thread is None:
        raise NotFoundError(f"thread {thread_id!r} not found", status_code=404)
    return thread


# `:path`: a client-chosen thread id may hold a `/` (sent as `%2F`, which arrives decoded).
@router.get(
    "/threads/{thread_id:path}",
    tags=["threads"],
    responses=_FOUND,
    response_model_exclude_none=True,  # Msg JSON leaves unset fields out, as Msg dumps do
)
async def get_thread(thread_id: str, state: State, user: User, response: Response) -> ThreadDetail:
    """A thread with its messages (parley `Msg` JSON) and its unanswered interrupts."""
    thread = await _own_thread(state, thread_id, user)
    response.headers["X-Thread-Id"] = thread_id
    rows = await state.store.get_messages(thread_id, user)
    pending = await state.store.pending_approvals(thread_id, user)
    interrupts = [
        make_interrupt(
            p.interrupt_id,
            p.awaiting_calls,
            thread_id=thread_id,
            run_id=_run_of(rows, p.message_id),
        )
        for p in pending
    ]
    return ThreadDetail(
        **_info(thread).model_dump(),
        messages=[m for m, _ in rows],
        run_ids=[run_id for _, run_id in rows],
        pending=interrupts,
    )


def _run_of(rows: list[tuple[Msg, str | None]], message_id: str) -> str:
    for msg, run_id in rows:
        if msg.id == message_id:
            return run_id or ""
    return ""


@router.delete(
    "/threads/{thread_id:path}",
    status_code=204,
    tags=["threads"],
    responses=error_responses(404, 409),
)
async def delete_thread(thread_id: str, state: State, user: User) -> Response:
    """Delete a thread with its messages, runs and feedback (not while a run is on it).

    The tools' state for it goes too: the code interpreter's process and the thread's files.
    """
    await _own_thread(state, thread_id, user)  # first: a thread they do not have is 404
    busy = ConflictError(f"thread {thread_id!r} has a run going; cancel it first", status_code=409)
    # Under the thread's lock, as a run holds it: no run starts (stores its first message)
    # while the thread goes, nor between the status read here and the delete.
    try:
        lease = await state.locks.acquire(thread_id, user, 0)
    except ConflictError:
        raise busy from None
    try:
        thread = await _own_thread(state, thread_id, user)
        if thread.status == "running":  # a dead process's run: cancelling it ends it
            raise busy
        if not await state.store.delete_thread(thread_id, user):
            raise NotFoundError(f"thread {thread_id!r} not found", status_code=404)
        # Still under the lock: no run may start the thread's tool session again meanwhile.
        await state.end_thread(user, thread_id)
    finally:
        await lease.release()
    return Response(status_code=204)


async def _resume(
    state: ServiceState, user: str, interrupt_id: str, body: ApprovalInput
) -> RunHandle:
    found = await state.store.get_approval(interrupt_id, user)
    if found is None:
        raise NotFoundError(f"interrupt {interrupt_id!r} not found", status_code=404)
    pending, thread_id, _ = found
    try:  # the run checks the verdicts too; here a bad one is named as the field it is
        pending.decide(body.approved)
    except UserError as exc:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "approved"),
                    "msg": str(exc),
                    "type": "value_error",
                    "input": body.approved,
                }
            ]
        ) from None
    thread = await _own_thread(state, thread_id, user)
    # The agent of the run that parked answers, not the thread's first: a conversation may
    # switch agents between messages (the toolkit's app lets it).
    rows = await state.store.get_messages(thread_id, user)
    parked = await state.store.get_run(_run_of(rows, pending.message_id), user)
    entry = state.registry.get(parked.agent if parked is not None else thread.agent)
    return await state.runs.start(
        entry.agent,
        agent_key=entry.key,
        user_id=user,
        thread_id=thread_id,
        resume=(interrupt_id, body.approved),
        middleware=state.speech(
            isinstance(body, ApprovalStreamInput) and body.speak and body.events == "parley"
        ),
    )


@router.post(
    "/approvals/{interrupt_id}/invoke",
    tags=["approvals"],
    responses=error_responses(404, 409, 502),
)
async def approve_invoke(
    interrupt_id: str, body: ApprovalInput, state: State, user: User, response: Response
) -> ServiceChatMessage:
    """Answer an interrupt and wait for the run's final answer."""
    handle = await _resume(state, user, interrupt_id, body)
    return await answer_of(handle, response)


@router.post(
    "/approvals/{interrupt_id}/stream",
    response_class=StreamingResponse,
    tags=["approvals"],
    responses=error_responses(404, 409),
)
async def approve_stream(
    interrupt_id: str, body: ApprovalStreamInput, state: State, user: User
) -> StreamingResponse:
    """Answer an interrupt and stream the run as it goes on (frames as `/stream`)."""
    handle = await _resume(state, user, interrupt_id, body)
    return sse_response(handle, body, send_timeout=state.settings.send_timeout)


@router.get("/agents", tags=["agents"])
async def list_agents(state: State, _user: User) -> list[AgentDescription]:
    """Every agent with its real model and tools (`/info` keeps to the toolkit's names)."""
    default = state.registry.default
    return [
        AgentDescription(
            key=entry.key,
            description=entry.description,
            model=str(entry.agent.model.model),
            tools=list(entry.agent.toolkit.names),
            default=entry.key == default,
        )
        for entry in state.registry
    ]
