"""Runs, parley's own way: background runs, listed, read, joined, cancelled and deleted.

`POST /runs` queues a run and answers at once (202, status `pending`): a worker of any
replica runs it when its thread is free (`multitask_strategy` says what a busy thread does).
`GET /runs/{id}/join` waits for its end from any replica (the store is polled; the answer's
body starts with a newline every few seconds while it waits, which JSON readers skip, so
proxies do not cut a long wait). Every lookup is by the run's id and the caller together:
another user's run is 404, as an unknown one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse

from parley.errors import NotFoundError
from parley.messages import Msg
from parley.service.auth import check_tools_reachable, current_user
from parley.service.bounds import check_messages
from parley.service.runs_protocol import CancelAction, RunInput
from parley.service.schema import RunCreate, RunInfo, error_responses
from parley.service.state import ServiceState, get_state, new_thread_id
from parley.service.store import RunRecord
from parley.service.strict import StrictRoute

__all__ = ["JOIN_KEEPALIVE_SECONDS", "router", "run_info"]

router = APIRouter(
    responses=error_responses(401),  # every route here needs a user
    route_class=StrictRoute,
    tags=["runs"],
)

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(current_user)]
_FOUND = error_responses(404)

JOIN_KEEPALIVE_SECONDS = 5.0
"""How often a join that still waits sends a newline (proxies cut a silent connection)."""


def run_info(record: RunRecord) -> RunInfo:
    """A run's record as the API shows it (its fields by name; no kwargs: `{}`)."""
    record = replace(record, kwargs=record.kwargs or {})
    return RunInfo.model_validate(record, from_attributes=True)


async def _own_run(state: ServiceState, run_id: str, user: str) -> RunRecord:
    record = await state.store.get_run(run_id, user)
    if record is None:
        raise NotFoundError(f"run {run_id!r} not found", status_code=404)
    return record


@router.post("/runs", status_code=202, responses=error_responses(404, 409))
async def create_run(body: RunCreate, state: State, user: User, response: Response) -> RunInfo:
    """Queue a run of an agent on a thread and answer at once (status `pending`).

    A worker runs it when its thread is free; read it at `GET /runs/{id}`, wait for its end
    at `GET /runs/{id}/join`.
    """
    entry = state.registry.get(body.agent or state.registry.default)
    agent = state.agent_for(entry, body.model)  # an unknown model alias is 422 now
    check_tools_reachable(agent)
    thread_id = new_thread_id(body.thread_id)
    message = Msg.user(body.message)
    check_messages([message], state.settings.max_message_chars, ("body", "message"))
    record, _ = await state.runs.submit(
        agent_key=entry.key,
        user_id=user,
        thread_id=thread_id,
        run_input=RunInput(message=message, model=body.model),
        multitask_strategy=body.multitask_strategy,
        kwargs=body.kwargs,
        model_name=str(agent.model.model),
    )
    response.headers.update({"X-Thread-Id": thread_id, "X-Run-Id": record.run_id})
    response.headers["Content-Location"] = f"/runs/{record.run_id}"
    return run_info(record)


@router.get("/runs", responses=_FOUND)
async def list_runs(
    state: State,
    user: User,
    thread_id: Annotated[str, Query(description="The thread whose runs to list.")],
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[RunInfo]:
    """A thread's runs, most recently queued first."""
    if await state.store.get_thread(thread_id, user) is None:
        raise NotFoundError(f"thread {thread_id!r} not found", status_code=404)
    records = await state.store.list_runs(user, thread_id, limit=limit, offset=offset)
    return [run_info(r) for r in records]


@router.get("/runs/{run_id}", responses=_FOUND)
async def get_run(run_id: str, state: State, user: User) -> RunInfo:
    """A run's status, usage and times (`pending` while it waits its turn)."""
    return run_info(await _own_run(state, run_id, user))


@router.get("/runs/{run_id}/join", response_class=StreamingResponse, responses=_FOUND)
async def join_run(
    run_id: str,
    state: State,
    user: User,
    timeout: Annotated[float, Query(gt=0, le=3600, description="Seconds to wait at most.")] = 300,
) -> StreamingResponse:
    """Wait for a run's end, wherever it runs; the run as it is then (JSON).

    An ended run answers at once. While the run goes on, the body starts with a newline
    every few seconds (JSON readers skip it); after `timeout` seconds the run is answered
    as it is (still `running` or `pending`).
    """
    await _own_run(state, run_id, user)  # an unknown run is 404 before the body starts

    async def body() -> AsyncIterator[str]:
        joined = asyncio.ensure_future(state.runs.join(run_id, user, timeout))
        try:
            while True:
                done, _ = await asyncio.wait({joined}, timeout=JOIN_KEEPALIVE_SECONDS)
                if done:
                    break
                yield "\n"
            try:
                record = joined.result()
            except NotFoundError as exc:  # deleted while it was awaited
                yield f'{{"detail": "{exc}"}}'
                return
            yield run_info(record).model_dump_json()
        finally:
            joined.cancel()

    headers = {"X-Run-Id": run_id, "Cache-Control": "no-store"}
    return StreamingResponse(body(), media_type="application/json", headers=headers)


@router.post("/runs/{run_id}/cancel", responses=_FOUND)
async def cancel_run(
    run_id: str,
    state: State,
    user: User,
    action: Annotated[
        CancelAction,
        Query(
            description="`interrupt`: keep its partial answer; `rollback`: delete the run "
            "and its messages."
        ),
    ] = "interrupt",
) -> RunInfo:
    """Stop a run; it keeps its partial answer (marked interrupted) and ends `interrupted`.

    A run waiting its turn ends without starting. With `action=rollback` the run and its
    messages are deleted (the answer is its last state).
    """
    return run_info(await state.runs.cancel(run_id, user, action=action))


@router.delete("/runs/{run_id}", status_code=204, responses=_FOUND)
async def delete_run(run_id: str, state: State, user: User) -> Response:
    """Delete a run (a live one is cancelled first); the thread's messages stay."""
    await state.runs.delete(run_id, user)
    return Response(status_code=204)
