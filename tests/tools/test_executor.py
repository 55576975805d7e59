"""Sync tools run on threads of their own: a round runs together, a hung call gives way."""

from __future__ import annotations

import asyncio
import threading

import pytest

from parley.errors import ToolError
from parley.messages import ToolCallBlock
from parley.tools import Toolkit, tool
from parley.tools.executor import ToolExecutor, tool_executor

WAIT = 10.0  # a bound on every wait below: a failure fails, it never hangs


def call(name: str, call_id: str, **args: object) -> ToolCallBlock:
    return ToolCallBlock(id=call_id, name=name, input=dict(args))


async def test_sixteen_sync_tools_in_one_round_all_run_at_once() -> None:
    # The barrier opens only when 16 threads wait at it together: on asyncio's default pool
    # (6 threads on 2 cores) the first 6 would wait, the rest never start, and it breaks.
    barrier = threading.Barrier(16, timeout=WAIT)

    @tool
    def meet(n: int) -> int:
        """Wait for the other calls of the round."""
        barrier.wait()
        return n

    results = await Toolkit([meet]).run_all([call("meet", f"c{n}", n=n) for n in range(16)])
    assert [r.output for r in results] == [str(n) for n in range(16)]
    assert not any(r.is_error for r in results)


async def test_a_hung_sync_tool_times_out_and_starves_nothing() -> None:
    executor = tool_executor()
    release = threading.Event()
    entered = threading.Event()

    @tool(timeout=0.3)
    def hang() -> str:
        """Never returns on its own."""
        entered.set()
        release.wait(60)
        return "late"

    barrier = threading.Barrier(executor.max_workers, timeout=WAIT)

    @tool
    def meet() -> str:
        """Wait for every other thread the executor may run at once."""
        barrier.wait()
        return "met"

    kit = Toolkit([hang, meet])
    abandoned_before = executor.abandoned
    try:
        hung = await kit.run(call("hang", "h"))
        assert entered.is_set()
        assert hung.is_error
        assert "did not finish within 0.3 seconds" in hung.text
        assert executor.abandoned == abandoned_before + 1
        # The hung call's thread no longer counts: a full round of max_workers still meets.
        calls = [call("meet", f"m{n}") for n in range(executor.max_workers)]
        results = await kit.run_all(calls)
        assert {r.output for r in results} == {"met"}
        # asyncio's own pool, which the rest of the process uses, was never touched.
        assert await asyncio.to_thread(lambda: "free") == "free"
    finally:
        release.set()
    for _ in range(int(WAIT / 0.01)):  # the abandoned call ends once released
        if executor.abandoned == abandoned_before:
            break
        await asyncio.sleep(0.01)
    assert executor.abandoned == abandoned_before


async def test_too_many_hung_calls_are_refused_not_grown_without_end() -> None:
    executor = ToolExecutor(max_workers=2, max_abandoned=2)
    release = threading.Event()

    def hang() -> str:
        release.wait(60)
        return "late"

    try:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await executor.run(hang)
        assert executor.abandoned == 2
        with pytest.raises(ToolError, match="2 sync tool calls are still running"):
            await executor.run(hang)
    finally:
        release.set()
    for _ in range(int(WAIT / 0.01)):
        if executor.abandoned == 0:
            break
        await asyncio.sleep(0.01)
    assert await executor.run(lambda: "again") == "again"


async def test_a_call_waits_for_a_thread_when_all_are_busy_and_errors_reach_the_caller() -> None:
    executor = ToolExecutor(max_workers=1)
    gate = threading.Event()
    order: list[str] = []

    def first() -> None:
        gate.wait(WAIT)
        order.append("first")

    def second() -> None:
        order.append("second")
        raise ValueError("from the tool")

    running = asyncio.ensure_future(executor.run(first))
    waiting = asyncio.ensure_future(executor.run(second))
    await asyncio.sleep(0.05)
    assert order == []  # one thread: the second call waits behind the first
    assert executor.threads == 1
    gate.set()
    await running
    with pytest.raises(ValueError, match="from the tool"):
        await waiting
    assert order == ["first", "second"]


async def test_idle_threads_end() -> None:
    executor = ToolExecutor(max_workers=4, idle_seconds=0.05)
    await asyncio.gather(*(executor.run(lambda: None) for _ in range(4)))
    assert executor.threads >= 1
    for _ in range(int(WAIT / 0.01)):
        if executor.threads == 0:
            break
        await asyncio.sleep(0.01)
    assert executor.threads == 0
    assert await executor.run(lambda: "back") == "back"  # and come back on demand


async def test_a_call_cancelled_before_it_started_never_runs() -> None:
    executor = ToolExecutor(max_workers=1)
    gate = threading.Event()
    ran: list[str] = []

    blocker = asyncio.ensure_future(executor.run(gate.wait, WAIT))
    queued = asyncio.ensure_future(executor.run(ran.append, "queued"))
    await asyncio.sleep(0.05)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.set()
    await blocker
    assert await executor.run(lambda: "next") == "next"
    assert ran == []
    assert executor.abandoned == 0
