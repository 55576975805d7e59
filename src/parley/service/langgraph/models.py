"""The request bodies of LangGraph's server API, as its SDKs send them.

Fields LangGraph defines that parley does not act on are accepted (an SDK sends some of them
by default) and named in each model's docstring; unknown fields are ignored, as LangGraph's
server does, so a newer SDK keeps working.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AssistantSearch",
    "HistoryQuery",
    "RunCreate",
    "StateUpdate",
    "ThreadCreate",
    "ThreadPatch",
    "ThreadSearch",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AssistantSearch(_Body):
    """`POST /assistants/search` (`sort_by`, `sort_order`, `select` are not acted on)."""

    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ThreadCreate(_Body):
    """`POST /threads` (`supersteps` and `ttl` are not acted on)."""

    thread_id: str | None = None
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearch(_Body):
    """`POST /threads/search` (`values`, `sort_by`, `sort_order`, `select` not acted on)."""

    metadata: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)


class ThreadPatch(_Body):
    """`PATCH /threads/{id}`."""

    metadata: dict[str, Any] | None = None


class StateUpdate(_Body):
    """`POST /threads/{id}/state`: messages to add to the thread (`as_node` not acted on)."""

    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None


class HistoryQuery(_Body):
    """`POST /threads/{id}/history`: the thread's states, newest first."""

    limit: int = Field(default=10, ge=1, le=1000)
    before: str | dict[str, Any] | None = None


class RunCreate(_Body):
    """A run (`/threads/{id}/runs...`, `/runs...`).

    Acted on: `assistant_id` (an id or a graph name), `input.messages`, `command.resume`,
    `metadata`, `stream_mode`, `stream_resumable` (ids are always sent), `multitask_strategy`
    (`reject`, `enqueue`, `interrupt`, `rollback`), `if_not_exists`, `on_disconnect`,
    `on_completion`.
    Accepted and not acted on: `config`, `context`, `checkpoint`, `checkpoint_id`,
    `stream_subgraphs`, `interrupt_before`/`after`, `webhook`, `after_seconds`,
    `feedback_keys`, `durability`.
    """

    assistant_id: str
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    stream_resumable: bool = False
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue"
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
