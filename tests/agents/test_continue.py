"""Continuing a stored conversation with no new input (`Agent.continue_stream`).

Each test lays down what a run whose process died would have left in memory, then continues
it with a fresh agent (as another process would) on a scripted model: the model is called only
when the conversation needs it, idempotent calls left open run again once, others are answered
as interrupted, parked approvals stay parked, and a caller's run id is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from parley.agents import (
    DENIED,
    INTERRUPTED,
    Agent,
    ApprovalRequested,
    InMemoryMemory,
    MaxItersReached,
    RunEnded,
    RunStarted,
    ToolResult,
)
from parley.errors import UserError
from parley.messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from parley.models import ChatResponse
from parley.models.base import ChatRequest
from parley.models.structured import STRUCTURED_TOOL
from parley.models.testing import ScriptedModel
from tests.agents._tools import charge, lookup, ran, send_email, whoami

pytestmark = pytest.mark.usefixtures("clear_ran")


def call(cid: str, name: str, /, **args: Any) -> ToolCallBlock:
    return ToolCallBlock(id=cid, name=name, input=args)


def answered(cid: str, output: str) -> Msg:
    return Msg(
        role="tool", content=[ToolResultBlock(tool_call_id=cid, name="lookup", output=output)]
    )


def turn(*calls: ToolCallBlock, **metadata: Any) -> Msg:
    return Msg(role="assistant", content=list(calls), name="clerk", metadata=metadata)


def looked_up() -> InMemoryMemory:
    """A conversation ending on a complete round of tool results: Ada's address looked up."""
    result = ToolResultBlock(tool_call_id="c1", name="lookup", output="ada@x.org")
    return InMemoryMemory(
        [
            Msg.user("Ada's address?"),
            turn(call("c1", "lookup", name="Ada")),
            Msg(role="tool", content=[result]),
        ]
    )


def agent_on(*steps: Any, max_iters: int = 10) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(steps)
    tools = [lookup, charge, send_email, whoami]
    return Agent("clerk", model, tools=tools, max_iters=max_iters), model


async def events_of(agent: Agent, memory: InMemoryMemory, **kwargs: Any) -> list[Any]:
    return [event async for event in agent.continue_stream(memory=memory, **kwargs)]


def results(msg: Msg) -> list[tuple[str, Any, bool]]:
    return [(r.tool_call_id, r.output, r.is_error) for r in msg.tool_results]


async def test_a_stored_question_is_answered_with_one_model_call() -> None:
    memory = InMemoryMemory([Msg.user("What is 2 + 2?")])
    agent, model = agent_on("4")
    events = await events_of(agent, memory)
    assert isinstance(events[-1], RunEnded)
    assert events[-1].status == "completed"
    assert events[-1].final is not None
    assert events[-1].final.text == "4"
    assert len(model.requests) == 1
    assert [m.text for m in model.requests[0].messages] == ["What is 2 + 2?"]
    assert [m.role for m in await memory.get()] == ["user", "assistant"]
    model.assert_consumed()


class LooksUpFirst(Agent):
    """Looks the asker up before its model's first turn (as a retrieving assistant does)."""

    async def planned_calls(self, input_msgs: Sequence[Msg]) -> list[ToolCallBlock]:
        return [call("p1", "lookup", name=input_msgs[-1].text)]


async def test_a_stored_question_gets_the_agents_planned_calls_first() -> None:
    model = ScriptedModel(["Found Ada."])
    agent = LooksUpFirst("clerk", model, tools=[lookup])
    memory = InMemoryMemory([Msg.user("Ada")])
    await agent.continue_reply(memory=memory)
    assert ran == [("lookup", {"name": "Ada"})]
    assert [m.role for m in await memory.get()] == ["user", "assistant", "tool", "assistant"]
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]


async def test_a_complete_round_of_tool_results_goes_to_the_model() -> None:
    memory = looked_up()
    agent, model = agent_on("ada@x.org")
    answer = await agent.continue_reply(memory=memory)
    assert answer.text == "ada@x.org"
    assert ran == []  # the answered call is not run again
    assert len(model.requests) == 1


async def test_open_calls_rerun_only_when_idempotent_and_the_model_reads_the_rest() -> None:
    # The last turn made three calls; c3's result was stored, then the process died.
    memory = InMemoryMemory(
        [
            Msg.user("Look Ada up and charge her 500."),
            turn(
                call("c1", "lookup", name="Ada"),
                call("c2", "charge", amount=500),
                call("c3", "lookup", name="Bob"),
            ),
            Msg(
                role="tool",
                content=[ToolResultBlock(tool_call_id="c3", name="lookup", output="bob@x.org")],
            ),
        ]
    )
    seen: list[list[tuple[str, Any, bool]]] = []

    def answer(request: ChatRequest) -> str:
        seen.append(results(request.messages[-1]))
        return "Ada is ada@example.org; the charge was interrupted, so I will check it."

    agent, model = agent_on(answer)
    events = await events_of(agent, memory)
    # The idempotent call ran exactly once; the charge did not run again; Bob's was answered.
    assert ran == [("lookup", {"name": "Ada"})]
    assert seen == [[("c1", "ada@example.org", False), ("c2", INTERRUPTED, True)]]
    assert [e.result.tool_call_id for e in events if isinstance(e, ToolResult)] == ["c1", "c2"]
    stored = await memory.get()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert results(stored[3]) == seen[0]
    assert events[-1].status == "completed"
    model.assert_consumed()


async def test_a_stored_answer_ends_the_run_without_a_model_call() -> None:
    answer = Msg.assistant("4", name="clerk")
    memory = InMemoryMemory([Msg.user("What is 2 + 2?"), answer])
    agent, model = agent_on()  # any model call fails the test
    run = agent.continue_stream(memory=memory)
    final = await run.result()
    assert run.status == "completed"
    assert final is not None
    assert final.id == answer.id
    assert model.requests == []
    assert len(await memory.get()) == 2


class Sum(BaseModel):
    total: int


async def test_a_stored_structured_answer_is_parsed_without_a_model_call() -> None:
    stored = Msg.assistant('{"total": 4}', name="clerk", metadata={"structured": {"total": 4}})
    memory = InMemoryMemory([Msg.user("2 + 2?"), Msg.assistant("4", name="clerk"), stored])
    agent, model = agent_on()
    run = agent.continue_stream(memory=memory, structured=Sum)
    await run.result()
    assert run.parsed == Sum(total=4)
    assert model.requests == []


async def test_a_stored_answer_without_its_structured_form_gets_one_structured_call() -> None:
    memory = InMemoryMemory([Msg.user("2 + 2?"), Msg.assistant("4", name="clerk")])
    agent, model = agent_on(ScriptedModel.tool_call(STRUCTURED_TOOL, {"total": 4}))
    run = agent.continue_stream(memory=memory, structured=Sum)
    await run.result()
    assert run.parsed == Sum(total=4)
    assert [r.tool_choice for r in model.requests] == [STRUCTURED_TOOL]


async def test_a_paused_turn_is_not_an_answer_the_model_continues_it() -> None:
    paused = Msg.assistant("Searching", name="clerk", metadata={"paused": True})
    memory = InMemoryMemory([Msg.user("Search."), paused])
    agent, model = agent_on(" done.")
    run = agent.continue_stream(memory=memory)
    final = await run.result()
    assert len(model.requests) == 1
    assert final is not None  # the whole turn: the stored part, then the continuation
    assert [b.text for b in final.content if isinstance(b, TextBlock)] == ["Searching", " done."]


async def test_a_parked_approval_parks_again_under_its_interrupt_id() -> None:
    first, _ = agent_on(
        ChatResponse(content=[call("e1", "send_email", to="ada@x.org")], finish_reason="tool_calls")
    )
    memory = InMemoryMemory()
    parked = [e async for e in first.stream("Email Ada.", memory=memory)]
    (asked,) = [e for e in parked if isinstance(e, ApprovalRequested)]

    # Another process: a new agent that knows nothing of the parked run.
    agent, model = agent_on("Sent.")
    run = agent.continue_stream(memory=memory)
    events = [e async for e in run]
    (again,) = [e for e in events if isinstance(e, ApprovalRequested)]
    assert again.interrupt_id == asked.interrupt_id
    assert [c.id for c in again.calls] == ["e1"]
    assert run.status == "awaiting_approval"
    assert ran == []
    assert model.requests == []
    # It resumes as any parked run does.
    assert (await agent.resume(asked.interrupt_id, True, memory=memory)).text == "Sent."
    assert ran == [("send_email", {"to": "ada@x.org"})]


async def test_a_resumed_run_cut_off_is_decided_by_its_verdicts() -> None:
    memory = InMemoryMemory(
        [
            Msg.user("Email Ada, and look her up."),
            turn(
                call("e1", "send_email", to="ada@x.org"),
                call("c1", "lookup", name="Ada"),
                interrupt_id="int_answered",
            ),
        ]
    )
    agent, _ = agent_on("Not sent; she is ada@example.org.")
    events = await events_of(agent, memory, resume=("int_answered", False))
    assert not any(isinstance(e, ApprovalRequested) for e in events)
    assert ran == [("lookup", {"name": "Ada"})]
    tool_msg = (await memory.get())[2]
    assert results(tool_msg) == [("e1", DENIED, True), ("c1", "ada@example.org", False)]
    assert events[-1].status == "completed"
    # Verdicts for another interrupt do not answer this one: it parks again.
    memory = InMemoryMemory(
        [Msg.user("Email Ada."), turn(call("e2", "send_email", to="a"), interrupt_id="int_new")]
    )
    agent, _ = agent_on()
    events = await events_of(agent, memory, resume=("int_old", True))
    assert [e.interrupt_id for e in events if isinstance(e, ApprovalRequested)] == ["int_new"]


async def test_model_calls_count_on_from_those_since_the_question() -> None:
    memory = looked_up()
    agent, model = agent_on(max_iters=1)
    events = await events_of(agent, memory)
    assert any(isinstance(e, MaxItersReached) for e in events)
    assert model.requests == []


async def test_an_empty_memory_has_nothing_to_continue() -> None:
    agent, _ = agent_on()
    with pytest.raises(UserError, match="nothing to continue"):
        await agent.continue_reply(memory=InMemoryMemory())


async def test_a_callers_run_id_is_kept_by_stream_and_continue() -> None:
    step = ChatResponse(content=[call("w1", "whoami")], finish_reason="tool_calls")
    agent, model = agent_on(step, "ok")
    memory = InMemoryMemory()
    events = [e async for e in agent.stream("Who runs?", memory=memory, run_id="run_fixed")]
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == "run_fixed"
    assert results((await memory.get())[2]) == [("w1", "run_fixed", False)]
    # The next attempt, after the call was left open, keeps the id too.
    memory = InMemoryMemory([Msg.user("Who runs?"), turn(call("w2", "whoami"))])
    model.add("ok")
    run = agent.continue_stream(memory=memory, run_id="run_fixed")
    events = [e async for e in run]
    assert run.run_id == "run_fixed"
    assert events[0].run_id == "run_fixed"
    assert results((await memory.get())[2]) == [("w2", "run_fixed", False)]
    with pytest.raises(UserError, match="run_id"):
        agent.stream("hi", run_id=" ")
    # Without one, each run gets a new id.
    assert agent.stream("hi").run_id != agent.stream("hi").run_id


def test_continuing_from_synchronous_code() -> None:
    agent, model = agent_on("hello")
    memory = InMemoryMemory([Msg.user("hi")])
    events = list(agent.continue_stream_sync(memory=memory, run_id="run_sync"))
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == "run_sync"
    stored = InMemoryMemory([Msg.user("hi"), Msg.assistant("hello again", name="clerk")])
    assert agent.continue_reply_sync(memory=stored).text == "hello again"
    assert len(model.requests) == 1


async def test_two_runs_sharing_a_run_id_each_close_their_own() -> None:
    agent, _ = agent_on()
    first_memory, second_memory = InMemoryMemory(), InMemoryMemory()
    second = agent.stream("talk", memory=second_memory, run_id="run_same")
    assert isinstance(await anext(second), RunStarted)  # it holds its memory now
    async for _ in agent.stream("talk", memory=first_memory, run_id="run_same"):
        break  # the first is closed in a task, under way now
    # Closing the second closes the second, not wait for the first's closing under its id.
    await second.aclose()
    assert second_memory.active_run is None
    # The first's memory is let go once its closing ends: a next run there waits for it.
    async with agent.stream("again", memory=first_memory) as third:
        assert isinstance(await anext(third), RunStarted)
    assert first_memory.active_run is None
