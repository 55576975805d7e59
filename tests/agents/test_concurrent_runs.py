"""One agent, several conversations: runs on one memory go one at a time, others run freely."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from parley.agents import Agent, InMemoryMemory, TextDelta
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


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The garbage collector off: only what the run does itself may free its memory."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def talker() -> Agent:
    words = "one two three four five six seven eight"
    return Agent("talker", ScriptedModel([words, "again"], stream=True, chunk_size=4))


async def test_leaving_an_async_for_early_frees_the_memory(no_collector: None) -> None:
    agent = talker()
    async for event in agent.stream("first"):
        if isinstance(event, TextDelta):
            break  # no aclose, no `async with`: the loop is just left
    assert (await agent.reply("second")).text == "again"
    # The first run was closed as a cancel closes one: its answer so far kept, marked, before
    # the second question.
    history = await agent.memory.get()
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1].text.startswith("one ")
    assert history[1].metadata["interrupted"] is True
    assert [history[2].text, history[3].text] == ["second", "again"]
    assert agent.memory.active_run is None


async def test_a_run_held_after_its_loop_was_left_is_closed_too(no_collector: None) -> None:
    agent = talker()
    run = agent.stream("first")
    async for event in run:
        if isinstance(event, TextDelta):
            break
    assert (await agent.reply("second")).text == "again"
    assert run.status == "interrupted"
    await run.aclose()  # closing it again is harmless
    assert [e async for e in run] == []  # and it has nothing more to say


def test_leaving_a_sync_stream_early_frees_the_memory(no_collector: None) -> None:
    agent = talker()
    for event in agent.stream_sync("first"):
        if isinstance(event, TextDelta):
            break
    assert agent.reply_sync("second").text == "again"
