"""Tool calls that wait for a person: the parked run's state, and the answers to it.

When a model turn calls a tool that requires approval (`Toolkit.needs_approval`), the run
parks: no call of that turn runs, and a `PendingApproval` records what waits. It is plain
data (JSON through pydantic), so the HTTP service can persist it beside the thread and hand
it back to `agent.resume(...)` in another process. `resume` then runs the approved calls and
the calls that needed no approval; a denied call gets the error result `DENIED`, which the
model reads and can act on.

A run that continues a stored conversation (`Agent.continue_stream`, a takeover) and finds
the last turn's calls still waiting parks again under the interrupt id stored on the message
(`metadata["interrupt_id"]`), so the id a client holds still resumes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from parley.errors import UserError
from parley.messages import Msg, ToolCallBlock, ToolResultBlock

__all__ = [
    "CANCELLED",
    "DENIED",
    "INTERRUPTED",
    "NOT_RUN",
    "PendingApproval",
    "error_result",
    "unanswered_calls",
]

DENIED = "denied by the user"
"""The error result a denied call gets."""

NOT_RUN = "not run: the conversation went on before this call ran"
"""The error result of a call left unanswered (an interrupted run, an approval never given)
when the conversation goes on: providers refuse a call without its result."""

CANCELLED = "stopped by cancel: the run was cancelled before this call finished"
"""The error result of a call a cancelled run had not finished (it may not have started),
unless its tool answered the cancel with a result of its own (`Tool.acall`)."""


INTERRUPTED = (
    "interrupted: the run's process stopped before this call answered, and it was not run "
    "again because its tool is not marked idempotent"
)
"""The error result a continued run gives a call its earlier attempt left without a result,
when the call's tool is not `idempotent` (`Agent.continue_stream`): it may have done its work,
so running it again could do it twice."""


def _interrupt_id() -> str:
    return f"int_{uuid.uuid4().hex}"


def _now() -> datetime:
    return datetime.now(UTC)


class PendingApproval(BaseModel):
    """A run parked until a person approves or denies tool calls.

    Attributes:
        interrupt_id: What `agent.resume(...)` is given to continue.
        agent: The agent's name.
        message_id: The id of the assistant message whose calls wait (the last in memory).
        calls: Every call of that message, in order.
        awaiting: The ids of the calls that need approval.
        iterations: Model calls the run had made, counted on against `max_iters`.
        created_at: When the run parked (UTC).
    """

    model_config = ConfigDict(extra="forbid")

    interrupt_id: str = Field(default_factory=_interrupt_id)
    agent: str
    message_id: str
    calls: list[ToolCallBlock]
    awaiting: list[str]
    iterations: int = Field(ge=0)
    created_at: datetime = Field(default_factory=_now)

    @property
    def awaiting_calls(self) -> list[ToolCallBlock]:
        """The calls that need approval, in order."""
        return [c for c in self.calls if c.id in self.awaiting]

    def decide(self, approved: bool | Mapping[str, bool]) -> dict[str, bool]:
        """Each awaiting call's verdict: one for all, or per call id (absent means denied).

        Raises:
            UserError: A call id that is not one of the awaiting calls.
        """
        if isinstance(approved, bool):
            return dict.fromkeys(self.awaiting, approved)
        unknown = sorted(set(approved) - set(self.awaiting))
        if unknown:
            raise UserError(
                f"interrupt {self.interrupt_id} has no awaiting call {unknown[0]!r}; "
                f"awaiting: {', '.join(self.awaiting)}"
            )
        return {call_id: bool(approved.get(call_id, False)) for call_id in self.awaiting}


def unanswered_calls(msgs: list[Msg]) -> tuple[Msg, list[ToolCallBlock]] | None:
    """The last assistant message and its calls that no later tool message answers."""
    answered: set[str] = set()
    for msg in reversed(msgs):
        if msg.role == "tool":
            answered.update(r.tool_call_id for r in msg.tool_results)
        elif msg.role == "assistant":
            open_calls = [c for c in msg.tool_calls if c.id not in answered]
            return (msg, open_calls) if open_calls else None
        else:
            return None
    return None


def error_result(call: ToolCallBlock, message: str) -> ToolResultBlock:
    """An error result answering `call`."""
    return ToolResultBlock(tool_call_id=call.id, name=call.name, output=message, is_error=True)
