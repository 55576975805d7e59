"""One agent, several conversations: runs on one memory go one at a time, others run freely."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from parley.agents import Agent, InMemoryMemory
from parley.errors import UserError
from parley.messages import ToolCallBlock
from parley.models import ChatResponse
from parley.models.testing import ScriptedModel, UnexpectedCallError
from parley.tools import tool


def calling(call_id: str, label: str) -> ChatResponse:
    block = ToolCallBlock(id=call_id, name="slow_echo", input={"label": label})
    return ChatResponse(content=[block], finish_reason="tool_calls")


def make_agent(script: list[Any], started: asyncio.Event, go_on: asyncio.Event) -> Agent:
    @tool
    async def slow_echo(label: str) -> str:
        """Echo once let through.

        Args:
            label: What to echo.
        """
        started.set()
        await asyncio.wait_for(go_on.wait(), 10)
        return label

    return Agent("echo", ScriptedModel(script), tools=[slow_echo])


async def test_a_second_run_on_a_memory_in_use_is_a_clear_error_and_harms_nothing() -> None:
    started, go_on = asyncio.Event(), asyncio.Event()
    agent = make_agent([calling("c1", "one"), "first done", "second done"], started, go_on)

    first = asyncio.ensure_future(agent.reply("first"))
    await asyncio.wait_for(started.wait(), 10)  # the first run is in its tool call
    with pytest.raises(UserError, match=r"in use by run run_\w+: one run at a time on a memory"):
        await agent.reply("second")
    go_on.set()
    assert (await first).text == "first done"

    roles = [(m.role, m.text) for m in await agent.memory.get()]
    assert roles == [
        ("user", "first"),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", "first done"),
    ]
    # Once the first run ended, the memory takes the next one.
    assert (await agent.reply("second")).text == "second done"


async def test_concurrent_runs_on_their_own_memories_keep_their_conversations_apart() -> None:
    started, go_on = asyncio.Event(), asyncio.Event()
    # The scripted model answers in request order: A's call, B's call, then both answers.
    script = [calling("a1", "A"), calling("b1", "B"), "answer 1", "answer 2"]
    agent = make_agent(script, started, go_on)
    memory_a, memory_b = InMemoryMemory(), InMemoryMemory()

    run_a = asyncio.ensure_future(agent.reply("question A", memory=memory_a))
    await asyncio.wait_for(started.wait(), 10)
    run_b = asyncio.ensure_future(agent.reply("question B", memory=memory_b))
    await asyncio.sleep(0.05)
    go_on.set()
    await asyncio.gather(run_a, run_b)

    for memory, label, call_id in ((memory_a, "A", "a1"), (memory_b, "B", "b1")):
        history = await memory.get()
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[0].text == f"question {label}"
        assert [c.id for c in history[1].tool_calls] == [call_id]
        assert history[2].tool_results[0].output == label
    assert len(agent.memory) == 0  # the agent's own memory was not touched


async def test_a_closed_or_failed_run_frees_its_memory() -> None:
    started, go_on = asyncio.Event(), asyncio.Event()
    agent = make_agent([calling("c1", "x"), "after"], started, go_on)
    run = agent.stream("first")
    async with run:
        async for _ in run:
            break  # leave after RunStarted
    assert agent.memory.active_run is None
    go_on.set()
    assert (await agent.reply("again")).text == "after"
    assert agent.memory.active_run is None

    failing = Agent("broken", ScriptedModel([]))  # no step left: the model call fails
    with pytest.raises(UnexpectedCallError, match="unexpected"):
        await failing.reply("hello")
    assert failing.memory.active_run is None
