"""Tools that need approval: the run parks, and resumes approved, denied or partly approved."""

from __future__ import annotations

from typing import Any

import pytest

from parley.agents import (
    DENIED,
    NOT_RUN,
    Agent,
    ApprovalRequested,
    InMemoryMemory,
    PendingApproval,
)
from parley.errors import UserError
from parley.messages import ToolCallBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel
from tests.agents._tools import delete_file, lookup, ran, send_email

pytestmark = pytest.mark.usefixtures("clear_ran")


def calls(*specs: tuple[str, dict[str, Any], str]) -> ChatResponse:
    blocks = [ToolCallBlock(id=cid, name=name, input=args) for name, args, cid in specs]
    return ChatResponse(content=blocks, finish_reason="tool_calls")


async def park(agent: Agent) -> list[Any]:
    return [event async for event in agent.stream("Email Ada.")]


def agent_with(*steps: Any, max_iters: int = 10) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(steps)
    return Agent(
        "mailer", model, tools=[send_email, delete_file, lookup], max_iters=max_iters
    ), model


async def test_the_run_parks_until_approval_and_then_runs_the_call() -> None:
    agent, model = agent_with(
        ScriptedModel.tool_call("send_email", {"to": "ada@example.org"}, "c1"), "Sent."
    )
    events = await park(agent)

    assert [e.type for e in events][-3:] == ["message_completed", "approval_requested", "run_ended"]
    request = events[-2]
    assert isinstance(request, ApprovalRequested)
    assert [c.id for c in request.calls] == ["c1"]
    assert events[-1].status == "awaiting_approval"
    assert ran == []
    parked = (await agent.memory.get())[-1]
    assert parked.tool_calls
    assert parked.metadata["interrupt_id"] == request.interrupt_id
    assert events[-1].final == parked
    assert [p.interrupt_id for p in agent.pending_approvals] == [request.interrupt_id]

    final = await agent.resume(request.interrupt_id, True)

    assert final.text == "Sent."
    assert ran == [("send_email", {"to": "ada@example.org"})]
    assert model.requests[1].messages[-1].tool_results[0].output == "sent to ada@example.org"
    assert agent.pending_approvals == []
    with pytest.raises(UserError, match="unknown interrupt id"):
        await agent.resume(request.interrupt_id, True)


async def test_a_denied_call_tells_the_model() -> None:
    agent, model = agent_with(
        ScriptedModel.tool_call("send_email", {"to": "ada@example.org"}, "c1"), "Not sent."
    )
    interrupt = (await park(agent))[-2].interrupt_id
    assert (await agent.resume(interrupt, False)).text == "Not sent."
    assert ran == []
    result = model.requests[1].messages[-1].tool_results[0]
    assert result.is_error
    assert result.output == DENIED == "denied by the user"


async def test_partial_approval_runs_what_was_approved_and_what_needed_none() -> None:
    agent, model = agent_with(
        calls(
            ("send_email", {"to": "ada@example.org"}, "c1"),
            ("lookup", {"name": "Bob"}, "c2"),
            ("delete_file", {"path": "/tmp/x"}, "c3"),
        ),
        "Done.",
    )
    events = await park(agent)
    request = events[-2]
    assert [c.id for c in request.calls] == ["c1", "c3"]  # lookup needs no approval
    assert ran == []  # nothing of that turn ran yet

    resumed = [e async for e in agent.resume_stream(request.interrupt_id, {"c1": True})]

    assert [e.type for e in resumed] == [
        "run_started",
        "tool_result",
        "tool_result",
        "tool_result",
        "message_completed",
        "text_delta",
        "text_delta",
        "message_completed",
        "run_ended",
    ]
    assert sorted(name for name, _ in ran) == ["lookup", "send_email"]  # c3, left out, is denied
    results = model.requests[1].messages[-1].tool_results
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("c1", False),
        ("c2", False),
        ("c3", True),
    ]


async def test_verdicts_must_name_awaiting_calls() -> None:
    agent, _ = agent_with(ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1"))
    interrupt = (await park(agent))[-2].interrupt_id
    with pytest.raises(UserError, match="no awaiting call 'c9'"):
        agent.resume_stream(interrupt, {"c9": True})
    with pytest.raises(UserError, match="unknown interrupt id 'int_nope'"):
        agent.resume_stream("int_nope", True)


async def test_the_state_persists_as_json_and_resumes_in_another_agent() -> None:
    # As the service does: it stores the pending approval and the thread, and a new process
    # (a new Agent on the same memory) resumes.
    memory = InMemoryMemory()
    model = ScriptedModel([ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1")])
    first = Agent("mailer", model, tools=[send_email], memory=memory)
    await park(first)
    stored = first.pending_approvals[0].model_dump_json()

    restored = PendingApproval.model_validate_json(stored)
    second = Agent("mailer", ScriptedModel(["Sent."]), tools=[send_email], memory=memory)
    assert (await second.resume(restored, True)).text == "Sent."
    assert ran == [("send_email", {"to": "a@b.c"})]
    with pytest.raises(UserError, match="no longer pending"):
        await second.resume(restored, True)


async def test_new_input_instead_of_an_approval_answers_the_calls_and_drops_the_interrupt() -> None:
    agent, model = agent_with(
        ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1"), "Fine, I will not."
    )
    interrupt = (await park(agent))[-2].interrupt_id
    await agent.reply("Actually, do not send it.")
    assert ran == []
    result = model.requests[1].messages[-2].tool_results[0]
    assert (result.tool_call_id, result.output, result.is_error) == ("c1", NOT_RUN, True)
    with pytest.raises(UserError, match="unknown interrupt id"):
        agent.resume_stream(interrupt, True)


async def test_max_iters_counts_across_a_resume() -> None:
    agent, model = agent_with(
        ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1"), max_iters=1
    )
    interrupt = (await park(agent))[-2].interrupt_id
    events = [e async for e in agent.resume_stream(interrupt, True)]
    assert [e.type for e in events][-2:] == ["max_iters_reached", "run_ended"]
    assert events[-1].status == "max_iters"
    assert ran == [("send_email", {"to": "a@b.c"})]
    model.assert_consumed()


def test_sync_resume() -> None:
    agent, _ = agent_with(ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1"), "Sent.")
    parked = agent.reply_sync("Email Ada.")
    assert agent.resume_sync(parked.metadata["interrupt_id"], True).text == "Sent."


async def test_a_consumer_that_stops_at_the_request_leaves_the_run_parked() -> None:
    agent, _ = agent_with(ScriptedModel.tool_call("send_email", {"to": "a@b.c"}, "c1"), "Sent.")
    async with agent.stream("Email Ada.") as run:
        async for event in run:
            if isinstance(event, ApprovalRequested):
                break
    assert run.status == "awaiting_approval"
    assert run.pending is not None
    assert (await agent.resume(run.pending.interrupt_id, True)).text == "Sent."
