"""The agent loop on the scripted model: tools, events, limits, errors, cancellation, memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from parley.agents import (
    CANCELLED,
    Agent,
    AgentEventAdapter,
    InMemoryMemory,
    MaxItersReached,
    MessageCompleted,
    RunEnded,
    RunError,
    TextDelta,
    ToolResult,
)
from parley.errors import ModelHTTPError, ModelOutputError, UserError
from parley.messages import Msg, ToolCallBlock
from parley.models import ChatResponse, ChatUsage
from parley.models.structured import STRUCTURED_TOOL
from parley.models.testing import ScriptedModel
from parley.tools import Toolkit, tool
from tests.sample_tools import add

# -- tools used below ------------------------------------------------------------------------------


@tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise ValueError(f"boom: {reason}")


def calls(*specs: tuple[str, dict[str, Any], str]) -> ChatResponse:
    """A scripted response calling several tools at once."""
    blocks = [ToolCallBlock(id=cid, name=name, input=args) for name, args, cid in specs]
    return ChatResponse(content=blocks, finish_reason="tool_calls")


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


async def collect(run: Any) -> list[Any]:
    return [event async for event in run]


# -- the loop --------------------------------------------------------------------------------------


async def test_a_tool_round_then_the_answer() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}, "c1"), "It is 5."])
    agent = Agent("calc", model, system_prompt="You add.", tools=[add])

    final = await agent.reply("What is 2 + 3?")

    assert final.text == "It is 5."
    assert final.name == "calc"
    model.assert_consumed()
    history = await agent.memory.get()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2].tool_results[0].output == "5"
    second = model.requests[1]
    assert second.messages[0].role == "system"
    assert second.messages[0].text == "You add."
    assert second.messages[-1].tool_results[0].output == "5"
    assert [t.name for t in second.tools] == ["add"]


async def test_the_events_of_a_streamed_tool_round_in_order() -> None:
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 2, "b": 3}, "c1"), "It is 5."], chunk_size=8
    )
    agent = Agent("calc", model, tools=[add])

    events = await collect(agent.stream("What is 2 + 3?"))

    arguments = '{"a": 2, "b": 3}'
    assert types(events) == [
        "run_started",
        "tool_call_started",
        *["tool_call_arguments_delta"] * 2,
        "tool_call_ended",
        "message_completed",
        "tool_result",
        "message_completed",
        "text_delta",
        "message_completed",
        "run_ended",
    ]
    assert "".join(e.delta for e in events if e.type == "tool_call_arguments_delta") == arguments
    assert events[1].call_id == "c1"
    assert events[1].name == "add"
    assert events[4].call.input == {"a": 2, "b": 3}
    assert [e.msg.role for e in events if isinstance(e, MessageCompleted)] == [
        "assistant",
        "tool",
        "assistant",
    ]
    end = events[-1]
    assert isinstance(end, RunEnded)
    assert end.status == "completed"
    assert end.final is not None
    assert end.final.text == "It is 5."


async def test_thinking_streams_as_its_own_events() -> None:
    response = ChatResponse.model_validate(
        {
            "content": [
                {"type": "thinking", "thinking": "The user greets me."},
                {"type": "text", "text": "Hello!"},
            ]
        }
    )
    events = await collect(Agent("t", ScriptedModel([response], chunk_size=100)).stream("Hi"))
    assert types(events) == [
        "run_started",
        "thinking_delta",
        "text_delta",
        "message_completed",
        "run_ended",
    ]
    assert events[1].text == "The user greets me."
    assert events[3].msg.thinking == "The user greets me."


async def test_events_are_json_and_parse_back_into_their_classes() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}), "2"])
    events = await collect(Agent("calc", model, tools=[add]).stream("1 + 1?"))
    for event in events:
        again = AgentEventAdapter.validate_json(event.model_dump_json())
        assert type(again) is type(event)
        assert again == event


async def test_usage_is_summed_over_the_model_calls() -> None:
    first = ScriptedModel.tool_call("add", {"a": 1, "b": 1})
    first.usage = ChatUsage(input_tokens=10, output_tokens=3)
    second = ChatResponse.model_validate({"content": [{"type": "text", "text": "2"}]})
    second.usage = ChatUsage(input_tokens=20, output_tokens=1)
    events = await collect(Agent("calc", ScriptedModel([first, second]), tools=[add]).stream("?"))
    usage = events[-1].usage
    assert (usage.input_tokens, usage.output_tokens) == (30, 4)
    assert usage.elapsed > 0


async def test_parallel_calls_run_concurrently_and_keep_their_order() -> None:
    log: list[str] = []
    all_started = asyncio.Event()

    @tool
    async def slow(label: str) -> str:
        """Wait for the other calls, then answer.

        Args:
            label: What to answer.
        """
        log.append(f"start {label}")
        if sum(entry.startswith("start") for entry in log) == 3:
            all_started.set()
        # Only calls that run together get past this: one after another, the first waits
        # for the others forever (bounded by the timeout, which fails the call).
        await asyncio.wait_for(all_started.wait(), 10)
        log.append(f"end {label}")
        return label

    # The calls finish in reverse order: results still come in call order.
    model = ScriptedModel(
        [
            calls(
                ("slow", {"label": "a"}, "c1"),
                ("slow", {"label": "b"}, "c2"),
                ("slow", {"label": "c"}, "c3"),
            ),
            "done",
        ]
    )
    agent = Agent("par", model, tools=[slow])

    events = await collect(agent.stream("go"))

    assert log[:3] == ["start a", "start b", "start c"], "the calls did not run together"
    results = [e.result for e in events if isinstance(e, ToolResult)]
    assert [(r.tool_call_id, r.output) for r in results] == [("c1", "a"), ("c2", "b"), ("c3", "c")]
    tool_msg = (await agent.memory.get())[2]
    assert [r.tool_call_id for r in tool_msg.tool_results] == ["c1", "c2", "c3"]
    assert model.requests[0].parameters.parallel_tool_calls is True


async def test_calls_run_one_after_another_when_parallel_calls_are_off() -> None:
    log: list[str] = []

    @tool
    async def nap(label: str) -> str:
        """Yield to the loop a few times, logging start and end.

        Args:
            label: Which call.
        """
        log.append(f"start {label}")
        for _ in range(5):
            await asyncio.sleep(0)  # a concurrent call would start meanwhile
        log.append(f"end {label}")
        return "ok"

    model = ScriptedModel(
        [calls(("nap", {"label": "1"}, "c1"), ("nap", {"label": "2"}, "c2")), "done"]
    )
    agent = Agent("seq", model, tools=[nap], parallel_tool_calls=False)
    await agent.reply("go")
    assert log == ["start 1", "end 1", "start 2", "end 2"]
    assert model.requests[0].parameters.parallel_tool_calls is False


async def test_tool_failures_go_back_to_the_model_as_errors() -> None:
    model = ScriptedModel(
        [
            calls(
                ("explode", {"reason": "test"}, "c1"),
                ("add", {"a": "not a number", "b": 1}, "c2"),
                ("nope", {}, "c3"),
            ),
            "Sorry.",
        ]
    )
    agent = Agent("err", model, tools=[add, explode])

    final = await agent.reply("go")

    assert final.text == "Sorry."
    results = model.requests[1].messages[-1].tool_results
    assert all(r.is_error for r in results)
    assert "boom: test" in results[0].text
    assert "invalid arguments for add" in results[1].text
    assert "there is no tool 'nope'" in results[2].text


async def test_the_run_stops_at_max_iters_with_a_clear_final_state() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}) for _ in range(2)])
    agent = Agent("loop", model, tools=[add], max_iters=2)

    events = await collect(agent.stream("go"))

    model.assert_consumed()
    assert types(events)[-2:] == ["max_iters_reached", "run_ended"]
    reached = events[-2]
    assert isinstance(reached, MaxItersReached)
    assert reached.iters == 2
    end = events[-1]
    assert end.status == "max_iters"
    history = await agent.memory.get()
    # The final message is the last model turn; its calls ran, so none is left unanswered.
    assert end.final == history[-2]
    assert end.final.tool_calls
    assert history[-1].role == "tool"


async def test_a_model_error_ends_the_stream_with_an_event_and_reply_raises() -> None:
    error = ModelHTTPError(500, "down", provider="scripted")
    events = await collect(Agent("x", ScriptedModel([error])).stream("hi"))
    assert types(events) == ["run_started", "run_error", "run_ended"]
    assert isinstance(events[1], RunError)
    assert events[1].kind == "ModelHTTPError"
    assert "down" in events[1].message
    assert events[2].status == "error"

    with pytest.raises(ModelHTTPError, match="down"):
        await Agent("x", ScriptedModel([error])).reply("hi")


async def test_memory_carries_over_between_replies_and_can_be_given_per_call() -> None:
    model = ScriptedModel(["Hello Ada.", "Your name is Ada."])
    agent = Agent("mem", model)
    await agent.reply("I am Ada.")
    await agent.reply("What is my name?")
    assert [m.text for m in model.requests[1].messages] == [
        "I am Ada.",
        "Hello Ada.",
        "What is my name?",
    ]

    thread = InMemoryMemory([Msg.user("earlier"), Msg.assistant("noted")])
    model.add("ok")
    await agent.reply("and now?", memory=thread)
    assert [m.text for m in model.requests[2].messages] == ["earlier", "noted", "and now?"]
    assert len(thread) == 4
    assert len(await agent.memory.get()) == 4  # the agent's own memory was not touched


async def test_input_forms() -> None:
    model = ScriptedModel(["a", "b", "c", "d"])
    agent = Agent("in", model)
    await agent.reply(Msg.user("one"))
    await agent.reply(["two", {"role": "user", "content": "three"}])
    await agent.reply({"role": "user", "content": "four"})
    await agent.reply()  # continue on memory as it is
    texts = [m.text for m in await agent.memory.get() if m.role == "user"]
    assert texts == ["one", "two", "three", "four"]
    with pytest.raises(UserError, match="bad message"):
        agent.stream([{"role": "nobody"}])


def test_construction_mistakes_are_usage_errors() -> None:
    with pytest.raises(UserError, match="max_iters"):
        Agent("x", ScriptedModel(), max_iters=0)
    with pytest.raises(UserError, match="not one of the tools"):
        Agent("x", ScriptedModel(), tools=[add], tool_choice="missing")


async def test_tools_may_be_a_toolkit() -> None:
    toolkit = Toolkit([add])
    agent = Agent("kit", ScriptedModel(["hi"]), tools=toolkit)
    assert agent.toolkit is toolkit
    await agent.reply("hi")


async def test_tool_choice_applies_to_the_first_call_or_follows_a_policy() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}), "2"])
    await Agent("tc", model, tools=[add], tool_choice="add").reply("go")
    assert [r.tool_choice for r in model.requests] == ["add", None]

    seen: list[int] = []

    def policy(index: int) -> str:
        seen.append(index)
        return "required" if index == 0 else "none"

    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1}), "2"])
    await Agent("tc", model, tools=[add], tool_choice=policy).reply("go")
    assert [r.tool_choice for r in model.requests] == ["required", "none"]
    assert seen == [0, 1]


# -- structured answers ----------------------------------------------------------------------------


class Sum(BaseModel):
    total: int
    explanation: str


async def test_structured_answers_come_after_the_loop() -> None:
    answer = ScriptedModel.tool_call(STRUCTURED_TOOL, {"total": 5, "explanation": "2 + 3"})
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 2, "b": 3}), "5", answer])
    agent = Agent("calc", model, tools=[add])

    final, parsed = await agent.reply_structured("2 + 3?", Sum)

    assert parsed == Sum(total=5, explanation="2 + 3")
    assert final.metadata["structured"] == {"total": 5, "explanation": "2 + 3"}
    assert Sum.model_validate_json(final.text) == parsed
    assert (await agent.memory.get())[-1] == final
    # The structured call sees the whole conversation, the loop's answer included.
    last = model.requests[-1]
    assert last.tool_choice == STRUCTURED_TOOL
    assert [m.role for m in last.messages] == ["user", "assistant", "tool", "assistant"]


async def test_structured_answers_take_a_json_schema_and_count_their_usage() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    answer = ScriptedModel.tool_call(STRUCTURED_TOOL, {"city": "Paris"})
    answer.usage = ChatUsage(input_tokens=100, output_tokens=5)
    model = ScriptedModel(["Paris.", answer])
    events = await collect(Agent("geo", model).stream("Capital of France?", structured=schema))
    end = events[-1]
    assert end.final.metadata["structured"] == {"city": "Paris"}
    assert end.usage.input_tokens >= 100


async def test_no_structured_answer_without_a_final_answer() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 1})])
    agent = Agent("calc", model, tools=[add], max_iters=1)
    with pytest.raises(ModelOutputError, match="max_iters"):
        await agent.reply_structured("go", Sum)


# -- cancellation ----------------------------------------------------------------------------------

LONG = "one two three four five six seven eight nine ten eleven twelve"


async def test_cancel_keeps_the_partial_message_and_ends_interrupted() -> None:
    model = ScriptedModel([LONG], chunk_size=4, chunk_delay=0.02)
    agent = Agent("talker", model)
    run = agent.stream("talk")
    events = []
    async for event in run:
        events.append(event)
        if len([e for e in events if isinstance(e, TextDelta)]) == 2:
            run.cancel()

    assert types(events)[-2:] == ["message_completed", "run_ended"]
    assert events[-1].status == "interrupted"
    partial = (await agent.memory.get())[-1]
    assert partial.metadata["interrupted"] is True
    assert LONG.startswith(partial.text)
    assert len(partial.text) < len(LONG)
    assert run.status == "interrupted"


async def test_a_cancelled_task_keeps_the_partial_message() -> None:
    model = ScriptedModel([LONG], chunk_size=4, chunk_delay=0.05)
    agent = Agent("talker", model)
    task = asyncio.create_task(agent.reply("talk"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial = (await agent.memory.get())[-1]
    assert partial.role == "assistant"
    assert partial.metadata["interrupted"] is True
    assert partial.text
    assert LONG.startswith(partial.text)


async def test_a_consumer_that_stops_early_stops_the_run() -> None:
    model = ScriptedModel([LONG], chunk_size=4, chunk_delay=0.02)
    agent = Agent("talker", model)
    async with agent.stream("talk") as run:
        async for event in run:
            if isinstance(event, TextDelta):
                break
    assert run.status == "interrupted"
    partial = (await agent.memory.get())[-1]
    assert partial.metadata["interrupted"] is True
    assert LONG.startswith(partial.text)


async def test_a_call_a_cancelled_run_did_not_finish_is_recorded_as_cancelled() -> None:
    @tool
    async def wait() -> str:
        """Take a long time."""
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel([ScriptedModel.tool_call("wait", {}, "c1"), "ok"])
    agent = Agent("w", model, tools=[wait])
    run = agent.stream("go")
    events = []
    async for event in run:
        events.append(event)
        if isinstance(event, MessageCompleted) and event.msg.tool_calls:
            asyncio.get_running_loop().call_later(0.05, run.cancel)
    assert run.status == "interrupted"
    recorded = (await agent.memory.get())[-1]
    assert recorded.role == "tool"  # not left for NOT_RUN: the call did start
    [result] = recorded.tool_results
    assert (result.tool_call_id, result.output, result.is_error) == ("c1", CANCELLED, True)
    assert [e.result for e in events if isinstance(e, ToolResult)] == [result]

    await agent.reply("something else")
    roles = [m.role for m in model.requests[1].messages]
    assert roles == ["user", "assistant", "tool", "user"]
    assert model.requests[1].messages[2].tool_results == [result]


# -- sync twins ------------------------------------------------------------------------------------


def test_sync_twins() -> None:
    model = ScriptedModel([ScriptedModel.tool_call("add", {"a": 1, "b": 2}), "3", "again"])
    agent = Agent("sync", model, tools=[add])
    assert agent.reply_sync("1 + 2?").text == "3"
    events = list(agent.stream_sync("once more"))
    assert types(events) == [
        "run_started",
        "text_delta",
        "text_delta",
        "message_completed",
        "run_ended",
    ]


def test_closing_a_sync_stream_stops_the_run() -> None:
    model = ScriptedModel([LONG], chunk_size=4, chunk_delay=0.02)
    agent = Agent("talker", model)
    events = agent.stream_sync("talk")
    assert next(events).type == "run_started"
    assert next(events).type == "text_delta"
    events.close()  # type: ignore[attr-defined]
    partial = agent.memory._msgs[-1]  # type: ignore[attr-defined]
    assert partial.metadata["interrupted"] is True


def test_with_model_keeps_the_agent_and_measures_the_new_model() -> None:
    def counter(msgs: Any) -> int:
        return 1

    first = ScriptedModel(["a"], context_size=1000)
    second = ScriptedModel(["b"], context_size=4000)
    agent = Agent("x", first, system_prompt="p", tools=[add], token_counter=counter)
    other = agent.with_model(second)
    assert (other.model, agent.model) == (second, first)
    assert (other.name, other.system_prompt, other.toolkit) == ("x", "p", agent.toolkit)
    assert other.budget.model is second
    assert other.budget.limit != agent.budget.limit
    assert other.budget._counter is counter  # a custom counter goes along
    assert other.reply_sync("hi").text == "b"
    assert agent.reply_sync("hi").text == "a"
