"""A parley thread as LangGraph's `Thread`, `ThreadState` and run result (its values).

A thread's values are `{"messages": [...]}` (LangChain message dicts). A thread parked on an
approval is `interrupted`: its state names the `tools` node next, with the approval as its
interrupt (`streams.interrupt_dicts`). Checkpoints are the thread after each run: a state's
`checkpoint_id` is derived from the thread and its last message, so it is stable.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from parley.agents.approval import PendingApproval
from parley.messages import Msg
from parley.service.langgraph.backend import ASSISTANT_NAMESPACE, assistant_id
from parley.service.langgraph.convert import messages_of
from parley.service.langgraph.streams import interrupt_dicts
from parley.service.store import Store, ThreadRecord

__all__ = [
    "EMPTY_STATE",
    "history_states",
    "interrupts_of",
    "thread_dict",
    "thread_status",
    "thread_values",
]

EMPTY_STATE: dict[str, Any] = {
    "values": {},
    "next": [],
    "tasks": [],
    "metadata": None,
    "created_at": None,
    "checkpoint": None,
    "parent_checkpoint": None,
    "interrupts": [],
    "checkpoint_id": None,
    "parent_checkpoint_id": None,
}
"""A thread with no messages, as LangGraph's server reads a fresh thread's state."""

_THREAD_STATUS = {"running": "busy", "awaiting_approval": "interrupted"}


def thread_status(thread: ThreadRecord) -> str:
    """The thread's status in LangGraph's words (`idle`, `busy`, `interrupted`)."""
    return _THREAD_STATUS.get(thread.status, "idle")


def interrupts_of(pending: Sequence[PendingApproval]) -> list[dict[str, Any]]:
    """The thread's unanswered approvals as LangGraph's interrupts (the latest one)."""
    if not pending:
        return []
    last = pending[-1]
    return interrupt_dicts(last.interrupt_id, last.awaiting_calls)


async def thread_values(store: Store, thread_id: str, user_id: str) -> dict[str, Any]:
    """The thread's values, with `__interrupt__` while it waits for an approval."""
    rows = await store.get_messages(thread_id, user_id)
    values: dict[str, Any] = {"messages": messages_of(m for m, _ in rows)}
    interrupts = interrupts_of(await store.pending_approvals(thread_id, user_id))
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


def thread_dict(
    thread: ThreadRecord, values: dict[str, Any] | None, interrupts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The thread as LangGraph's `Thread`."""
    data: dict[str, Any] = {
        "thread_id": thread.thread_id,
        "created_at": _iso(thread.created_at),
        "updated_at": _iso(thread.updated_at),
        "state_updated_at": _iso(thread.updated_at),
        "metadata": {"graph_id": thread.agent, "assistant_id": assistant_id(thread.agent)},
        "status": thread_status(thread),
        "config": {},
        "values": values or {},
    }
    if interrupts:
        data["interrupts"] = {interrupts[0]["id"]: interrupts}
    return data


def _iso(when: datetime) -> str:
    return when.isoformat()


def _checkpoint(thread_id: str, last: Msg | None) -> dict[str, Any] | None:
    if last is None:
        return None
    checkpoint_id = str(uuid.uuid5(ASSISTANT_NAMESPACE, f"{thread_id}\n{last.id}"))
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def _state(
    thread_id: str,
    msgs: list[Msg],
    parent: Msg | None,
    step: int,
    interrupts: list[dict[str, Any]],
) -> dict[str, Any]:
    checkpoint = _checkpoint(thread_id, msgs[-1] if msgs else None)
    parent_checkpoint = _checkpoint(thread_id, parent)
    tasks = []
    if interrupts:
        tasks = [
            {
                "id": interrupts[0]["id"],
                "name": "tools",
                "path": ["__pregel_pull", "tools"],
                "error": None,
                "interrupts": interrupts,
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        ]
    return {
        "values": {"messages": messages_of(msgs)},
        "next": ["tools"] if interrupts else [],
        "tasks": tasks,
        "metadata": {"source": "loop", "step": step, "parents": {}},
        "created_at": _iso(msgs[-1].created_at) if msgs else None,
        "checkpoint": checkpoint,
        "parent_checkpoint": parent_checkpoint,
        "interrupts": interrupts,
        "checkpoint_id": checkpoint["checkpoint_id"] if checkpoint else None,
        "parent_checkpoint_id": parent_checkpoint["checkpoint_id"] if parent_checkpoint else None,
    }


def history_states(
    thread_id: str,
    rows: Sequence[tuple[Msg, str | None]],
    pending: Sequence[PendingApproval],
    *,
    limit: int,
    before: str | None = None,
) -> list[dict[str, Any]]:
    """The thread's states after each run, newest first (the first is its current state)."""
    ends = [i for i in range(len(rows)) if i + 1 == len(rows) or rows[i + 1][1] != rows[i][1]]
    msgs = [m for m, _ in rows]
    states = []
    for step, end in enumerate(ends):
        parent = msgs[ends[step - 1]] if step else None
        states.append(_state(thread_id, msgs[: end + 1], parent, step, []))
    if not states:
        return []
    states[-1] = _state(
        thread_id,
        msgs,
        msgs[ends[-2]] if len(ends) > 1 else None,
        len(ends) - 1,
        interrupts_of(pending),
    )
    states.reverse()
    if before is not None:
        ids = [s["checkpoint_id"] for s in states]
        states = states[ids.index(before) + 1 :] if before in ids else []
    return states[:limit]


def current_state(
    thread_id: str, rows: Sequence[tuple[Msg, str | None]], pending: Sequence[PendingApproval]
) -> dict[str, Any]:
    """The thread's state now (LangGraph's `ThreadState`)."""
    states = history_states(thread_id, rows, pending, limit=1)
    return states[0] if states else dict(EMPTY_STATE)
