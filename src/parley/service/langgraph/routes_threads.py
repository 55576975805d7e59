"""LangGraph's assistants and threads over parley's agents and threads.

Every served agent is an assistant: its `graph_id` and `name` are the agent's key, its
`assistant_id` the UUID LangGraph gives a graph's assistant (`uuid5` of the key), and either
names it wherever an assistant is asked for. Threads are the caller's parley threads (same
ids, same owner rules: another user's thread is 404), their values `{"messages": [...]}`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from parley.errors import (
    ConflictError,
    MessageError,
    NotFoundError,
    ParleyError,
    ServiceError,
    UserError,
)
from parley.service.langgraph.auth import PREFIX, langgraph_user
from parley.service.langgraph.backend import LangGraphRuns, assistant_id
from parley.service.langgraph.convert import input_messages
from parley.service.langgraph.docs import answers
from parley.service.langgraph.models import (
    AssistantSearch,
    HistoryQuery,
    StateUpdate,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from parley.service.langgraph.state import (
    current_state,
    history_states,
    thread_dict,
    thread_status,
    thread_values,
)
from parley.service.registry import AgentEntry
from parley.service.schema import error_responses
from parley.service.state import ServiceState, get_state, new_thread_id
from parley.service.store import ThreadRecord
from parley.service.strict import StrictRoute

__all__ = ["find_assistant", "get_backend", "invalid", "owned_thread", "router"]

router = APIRouter(prefix=PREFIX, route_class=StrictRoute, tags=["langgraph"])

State = Annotated[ServiceState, Depends(get_state)]
User = Annotated[str, Depends(langgraph_user)]
_MESSAGES_SCHEMA = {
    "type": "object",
    "title": "State",
    "properties": {"messages": {"type": "array", "items": {"type": "object"}}},
}
_MAX_THREADS = 10_000  # what a search looks through (newest first)


async def get_backend(request: Request) -> LangGraphRuns:
    """FastAPI dependency: the app's LangGraph runs (made at the first request)."""
    backend: LangGraphRuns | None = getattr(request.app.state, "langgraph_runs", None)
    if backend is None:
        backend = LangGraphRuns(request.app.state.parley)
        request.app.state.langgraph_runs = backend
    return backend


def invalid(message: str, status_code: int = 404) -> ParleyError:
    """A refusal: 404 (or 409) `{"detail": "..."}`; 422 in the shape of every other 422."""
    if status_code == 409:
        return ConflictError(message, status_code=409)
    if status_code == 404:
        return NotFoundError(message, status_code=404)
    if status_code == 422:
        return UserError(message)
    return ServiceError(message, status_code=status_code)


def find_assistant(state: ServiceState, given: str, *, status_code: int = 404) -> AgentEntry:
    """The agent an assistant id or graph name names.

    Raises:
        NotFoundError: No served agent has that id or name (`status_code`).
    """
    if given in state.registry:
        return state.registry.get(given)
    for entry in state.registry:
        if assistant_id(entry.key) == given:
            return entry
    raise invalid(f"Assistant {given!r} not found", status_code)


def _assistant(entry: AgentEntry, backend: LangGraphRuns) -> dict[str, Any]:
    return {
        "assistant_id": assistant_id(entry.key),
        "graph_id": entry.key,
        "config": {},
        "context": {},
        "created_at": backend.started.isoformat(),
        "updated_at": backend.started.isoformat(),
        "metadata": {"created_by": "system"},
        "version": 1,
        "name": entry.key,
        "description": entry.description or None,
    }


Backend = Annotated[LangGraphRuns, Depends(get_backend)]


@router.get("/info")
async def server_info(request: Request) -> dict[str, Any]:
    """What LangGraph's `/info` tells, open to all as there (agent-chat-ui checks it first)."""
    return {"version": request.app.version, "flags": {"assistants": True, "crons": False}}


@router.get("/ok", responses=error_responses(503))
async def server_ok(state: State) -> dict[str, bool]:
    """LangGraph's health check: whether the service and its database answer."""
    await state.check_database()
    return {"ok": True}


@router.post("/assistants/search", responses=answers())
async def search_assistants(
    body: AssistantSearch, response: Response, state: State, backend: Backend, _user: User
) -> list[dict[str, Any]]:
    """The served agents as assistants (filtered by `graph_id`, `name`, `metadata`)."""
    found = [
        _assistant(e, backend)
        for e in state.registry
        if body.graph_id in (None, e.key)
        and body.name in (None, e.key)
        and _matches({"created_by": "system"}, body.metadata)
    ]
    response.headers["X-Pagination-Total"] = str(len(found))
    page = found[body.offset : body.offset + body.limit]
    if body.offset + body.limit < len(found):
        response.headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return page


@router.get("/assistants/{assistant}", responses=answers(404))
async def get_assistant(
    assistant: str, state: State, backend: Backend, _user: User
) -> dict[str, Any]:
    """One assistant, by id or graph name."""
    return _assistant(find_assistant(state, assistant), backend)


@router.get("/assistants/{assistant}/schemas", responses=answers(404))
async def get_schemas(assistant: str, state: State, _user: User) -> dict[str, Any]:
    """An assistant's state schema: `{"messages": [...]}` in, out and kept."""
    entry = find_assistant(state, assistant)
    return {
        "graph_id": entry.key,
        "input_schema": _MESSAGES_SCHEMA,
        "output_schema": _MESSAGES_SCHEMA,
        "state_schema": _MESSAGES_SCHEMA,
        "config_schema": None,
        "context_schema": None,
    }


def _matches(have: dict[str, Any], want: dict[str, Any] | None) -> bool:
    return not want or all(have.get(k) == v for k, v in want.items())


async def owned_thread(state: ServiceState, thread_id: str, user: str) -> ThreadRecord:
    """The caller's thread.

    Raises:
        NotFoundError: They have no thread of that id (another user's is theirs): 404.
    """
    thread = await state.store.get_thread(thread_id, user)
    if thread is None:
        raise invalid(f"Thread with ID {thread_id} not found")
    return thread


async def _thread_out(state: ServiceState, thread: ThreadRecord) -> dict[str, Any]:
    values = await thread_values(state.store, thread.thread_id, thread.user_id)
    interrupts = values.pop("__interrupt__", [])
    return thread_dict(thread, values, interrupts)


@router.post("/threads", responses=answers(409))
async def create_thread(body: ThreadCreate, state: State, user: User) -> dict[str, Any]:
    """Make a thread of the caller's, for the agent `metadata.graph_id` names (or the default).

    An existing id is 409, or that thread with `if_exists: do_nothing`.
    """
    thread_id = new_thread_id(body.thread_id)
    found = await state.store.get_thread(thread_id, user)
    if found is not None:
        if body.if_exists == "raise":
            raise invalid(f"Thread {thread_id} already exists", 409)
        return await _thread_out(state, found)
    graph = (body.metadata or {}).get("graph_id")
    key = find_assistant(state, str(graph), status_code=422).key if graph else None
    thread = await state.store.ensure_thread(thread_id, user, key or state.registry.default)
    return await _thread_out(state, thread)


@router.post("/threads/search", responses=answers())
async def search_threads(
    body: ThreadSearch, response: Response, state: State, user: User
) -> list[dict[str, Any]]:
    """The caller's threads, most recently updated first (`X-Pagination-Total`)."""
    threads = await state.store.list_threads(user, limit=_MAX_THREADS)
    found = [
        t
        for t in threads
        if (body.ids is None or t.thread_id in body.ids)
        and body.status in (None, thread_status(t))
        and _matches({"graph_id": t.agent, "assistant_id": assistant_id(t.agent)}, body.metadata)
    ]
    response.headers["X-Pagination-Total"] = str(len(found))
    if body.offset + body.limit < len(found):
        response.headers["X-Pagination-Next"] = str(body.offset + body.limit)
    return [await _thread_out(state, t) for t in found[body.offset : body.offset + body.limit]]


@router.get("/threads/{thread_id}", responses=answers(404))
async def get_thread(thread_id: str, state: State, user: User) -> dict[str, Any]:
    """One of the caller's threads, with its values."""
    return await _thread_out(state, await owned_thread(state, thread_id, user))


@router.patch("/threads/{thread_id}", responses=answers(404))
async def patch_thread(
    thread_id: str, body: ThreadPatch, state: State, user: User
) -> dict[str, Any]:
    """A thread's metadata: parley keeps only `graph_id` (its agent), which cannot change."""
    thread = await owned_thread(state, thread_id, user)
    derived = {"graph_id": thread.agent, "assistant_id": assistant_id(thread.agent)}
    if not _matches(derived, body.metadata):
        raise invalid(
            "parley keeps no thread metadata of its own: a thread's metadata is its agent "
            f"({derived}), which cannot change"
        )
    return await _thread_out(state, thread)


@router.delete("/threads/{thread_id}", status_code=204, responses=answers(404))
async def delete_thread(thread_id: str, state: State, backend: Backend, user: User) -> None:
    """Delete a thread and everything it holds (its running run is stopped first)."""
    await owned_thread(state, thread_id, user)
    for run in await backend.active_on(thread_id, user):
        await backend.cancel(run.run_id, user)
        await backend.wait(run, state.settings.lease_seconds)  # it stops, wherever it runs
    if await state.store.delete_thread(thread_id, user):
        await state.end_thread(user, thread_id)


@router.get("/threads/{thread_id}/state", responses=answers(404))
async def get_thread_state(thread_id: str, state: State, user: User) -> dict[str, Any]:
    """The thread's state now: values, what is next, its interrupt."""
    await owned_thread(state, thread_id, user)
    rows = await state.store.get_messages(thread_id, user)
    pending = await state.store.pending_approvals(thread_id, user)
    return current_state(thread_id, rows, pending)


@router.post("/threads/{thread_id}/state", responses=answers(404, 409))
async def update_thread_state(
    thread_id: str, body: StateUpdate, state: State, backend: Backend, user: User
) -> dict[str, Any]:
    """Add `values.messages` to the thread (not while a run is on it: 409)."""
    thread = await owned_thread(state, thread_id, user)
    if thread.status == "running" or await backend.active_on(thread_id, user):
        raise invalid(f"Thread {thread_id} is busy with a run", 409)
    values = body.values if isinstance(body.values, dict) else {"messages": body.values or []}
    if set(values) - {"messages"}:
        raise invalid("a parley thread's state holds only `messages`", 422)
    try:
        msgs = input_messages(values.get("messages") or [])
    except MessageError as exc:
        raise invalid(str(exc), 422) from None
    await state.store.add_messages(thread_id, user, msgs, None)
    rows = await state.store.get_messages(thread_id, user)
    now = current_state(thread_id, rows, await state.store.pending_approvals(thread_id, user))
    return {"checkpoint": now["checkpoint"]}


@router.post("/threads/{thread_id}/history", responses=answers(404))
async def thread_history(
    thread_id: str, body: HistoryQuery, state: State, user: User
) -> list[dict[str, Any]]:
    """The thread's states after each of its runs, newest first."""
    await owned_thread(state, thread_id, user)
    rows = await state.store.get_messages(thread_id, user)
    pending = await state.store.pending_approvals(thread_id, user)
    before = body.before.get("checkpoint_id") if isinstance(body.before, dict) else body.before
    return history_states(thread_id, rows, pending, limit=body.limit, before=before)
