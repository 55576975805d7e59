"""Agents: the tool-calling loop's own cost, parallel tools and a run's memory, side by side.

Everything runs against parley's `ScriptedModel` (no network, no model weights), so what is
measured is the loop itself:

1. the loop's cost per iteration: an agent run of K tool rounds (the model asks for a tool, the
   tool answers at once; then a final text), through `Agent.reply` and through `Agent.stream`
   (every event consumed), against a hand-written minimal loop that calls the same scripted
   model (`model.chat_stream`, as the agent does; `model.chat` for contrast) and the same tool
   function directly: append the messages, call the tool, repeat. The model answers from the
   same script, a function of the request, in every arm, so its own cost is the same in each;
2. N slow tools (N = 1, 4, 16; 0.2 s each, `asyncio.sleep` tools and `time.sleep` tools that
   parley runs on its tool threads) called in one round: the round's wall time against the
   slowest tool's own time, with `parallel_tool_calls` on (about 1 expected) and off (about N);
3. a 20-tool-round run's memory: tracemalloc's peak during the run and what the agent's memory
   retains after it, against the hand-written loop's list and a list of the same messages
   built by hand with `Msg`'s constructors.

Timings come from interleaved rounds (each round runs every arm back to back, the first to go
rotating), the garbage collector on; a figure is the median over rounds (the best is shown
too) and a ratio or difference is the median of the per-round ones.

Run: `python benchmarks/agents.py [--quick] [--profile]`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from _harness import print_heading, print_profile
from parley.agents import Agent, InMemoryMemory, MessageCompleted
from parley.agents.budget import tiktoken_counter
from parley.messages import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from parley.models.base import ChatRequest
from parley.models.response import ChatResponse, ChatUsage
from parley.models.testing import ScriptedModel
from parley.tools import FunctionTool, Toolkit, tool
from parley.tools.executor import tool_executor

NAME = "bench"
SYSTEM = "You are a helpful assistant. Use the tools when they help."
QUESTION = "Look up the items one by one, then tell me what you found."
ANSWER = "I looked every item up: they are all in stock."
USAGE = ChatUsage(input_tokens=100, output_tokens=10)
SLEEP = 0.2
"""Seconds each slow tool takes."""


@dataclass(frozen=True)
class Settings:
    """How much to run."""

    loop_rounds: int
    runs_per_round: int
    tool_rounds: int
    parallel_reps: int
    sequential_reps: int
    sequential_sync: bool
    memory_reps: int
    memory_rounds: int = 20
    fan_out: tuple[int, ...] = (1, 4, 16)


DEFAULT = Settings(
    loop_rounds=40,
    runs_per_round=10,
    tool_rounds=10,
    parallel_reps=5,
    sequential_reps=2,
    sequential_sync=True,
    memory_reps=5,
)
QUICK = Settings(
    loop_rounds=12,
    runs_per_round=5,
    tool_rounds=10,
    parallel_reps=2,
    sequential_reps=1,
    sequential_sync=False,
    memory_reps=3,
)


# -- the tools ------------------------------------------------------------------------------


def _answer(item: int) -> str:
    return f"item {item}: in stock"


@tool
async def lookup(item: int) -> str:
    """Look an item up.

    Args:
        item: The item's number.
    """
    return _answer(item)


@tool(name="lookup")
def lookup_sync(item: int) -> str:
    """Look an item up.

    Args:
        item: The item's number.
    """
    return _answer(item)


NAPS: list[float] = []
"""Each slow tool's own time, measured inside it."""


@tool
async def nap(item: int) -> str:
    """Wait a while (asyncio.sleep), then answer.

    Args:
        item: The item's number.
    """
    started = time.perf_counter()
    await asyncio.sleep(SLEEP)
    NAPS.append(time.perf_counter() - started)
    return _answer(item)


@tool(name="nap")
def nap_sync(item: int) -> str:
    """Wait a while (time.sleep, blocking), then answer.

    Args:
        item: The item's number.
    """
    started = time.perf_counter()
    time.sleep(SLEEP)
    NAPS.append(time.perf_counter() - started)
    return _answer(item)


# -- the model's side -----------------------------------------------------------------------


class Script:
    """The model's part of a run: `rounds` turns calling `calls` tools each, then the answer.

    One step, a function of the request, serves every call: it counts the tool messages since
    the last user message, so any loop, the agent's or the hand-written one, gets the same
    answers for the same work. The responses are built once and carry their usage, so the
    model's cost does not grow with the conversation.
    """

    def __init__(self, rounds: int, calls: int = 1, tool_name: str = "lookup") -> None:
        self.rounds = rounds
        self.turns = [
            ChatResponse(
                content=[
                    ToolCallBlock(id=f"call_{r}_{c}", name=tool_name, input={"item": r * calls + c})
                    for c in range(calls)
                ],
                finish_reason="tool_calls",
                usage=USAGE,
            )
            for r in range(rounds)
        ]
        self.answer = ChatResponse(
            content=[TextBlock(text=ANSWER)], finish_reason="stop", usage=USAGE
        )

    def __call__(self, request: ChatRequest) -> ChatResponse:
        done = 0
        for msg in reversed(request.messages):
            if msg.role == "user":
                break
            if msg.role == "tool":
                done += 1
        return self.turns[done] if done < self.rounds else self.answer


def scripted_model(script: Script) -> ScriptedModel:
    model = ScriptedModel()
    # It records every request: record none, so no arm pays for (or keeps alive) a record.
    model.requests = deque(maxlen=0)  # type: ignore[assignment]
    model.steps = _Forever(script)
    return model


class _Forever(deque[Any]):
    """A script that never runs out: every call takes the same step (the `Script`)."""

    def __init__(self, step: Script) -> None:
        super().__init__([step])

    def popleft(self) -> Any:
        return self[0]


# -- the hand-written loop ------------------------------------------------------------------


ToolCaller = Callable[[ToolCallBlock], Awaitable[str]]


def direct(fn: FunctionTool) -> ToolCaller:
    """Call a tool's own function with the call's arguments, no toolkit in between."""
    function = fn.fn
    if asyncio.iscoroutinefunction(function):

        async def call_async(call: ToolCallBlock) -> str:
            return await function(**call.input)

        return call_async

    async def call_sync(call: ToolCallBlock) -> str:
        return function(**call.input)

    return call_sync


async def hand_loop(
    model: ScriptedModel, specs: list[Any], call_tool: ToolCaller, *, stream: bool = True
) -> list[Msg]:
    """The least a tool loop does: call the model, append, run the calls, append, repeat."""
    system = Msg.system(SYSTEM)
    msgs = [Msg.user(QUESTION)]
    while True:
        if stream:
            chunks = model.chat_stream([system, *msgs], specs, None, parallel_tool_calls=True)
            async for chunk in chunks:
                if chunk.is_last:
                    break
            response = chunks.response
            assert response is not None
        else:
            response = await model.chat([system, *msgs], specs, None, parallel_tool_calls=True)
        msg = response.to_msg(name=NAME)
        msgs.append(msg)
        if not msg.tool_calls:
            return msgs
        results = [
            ToolResultBlock(tool_call_id=c.id, name=c.name, output=await call_tool(c))
            for c in msg.tool_calls
        ]
        msgs.append(Msg(role="tool", content=results))


async def agent_reply(agent: Agent) -> list[Msg]:
    memory = InMemoryMemory()
    await agent.reply(QUESTION, memory=memory)
    return await memory.get()


async def agent_stream(agent: Agent) -> list[Msg]:
    memory = InMemoryMemory()
    async with agent.stream(QUESTION, memory=memory) as run:
        async for _event in run:
            pass
    return await memory.get()


def check_conversation(label: str, msgs: Sequence[Msg], rounds: int, calls: int = 1) -> None:
    """Fail loudly unless `msgs` is the scripted conversation, answered right."""
    expected_roles = ["user", *["assistant", "tool"] * rounds, "assistant"]
    problems = []
    if [m.role for m in msgs] != expected_roles:
        problems.append(f"roles {[m.role for m in msgs]}")
    else:
        for r in range(rounds):
            outputs = [b.output for b in msgs[2 + 2 * r].tool_results]
            wanted = [_answer(r * calls + c) for c in range(calls)]
            if outputs != wanted:
                problems.append(f"round {r}: {outputs}")
        if msgs[-1].text != ANSWER:
            problems.append(f"answer {msgs[-1].text!r}")
    if problems:
        raise SystemExit(f"{label}: not the scripted conversation: {'; '.join(problems)}")


# -- 1. the loop's own cost ------------------------------------------------------------------


@dataclass
class Arm:
    """One way of running the scripted conversation."""

    label: str
    job: Callable[[], Awaitable[list[Msg]]]
    reference: str | None = None
    """The label of the arm this one's overhead is taken against."""
    times: list[float] = field(default_factory=list)
    """Seconds per run, one per round."""


async def interleaved(arms: Sequence[Arm], rounds: int, runs: int) -> None:
    """Time `runs` runs of each arm per round, the first to go rotating round by round."""
    for round_ in range(rounds):
        shift = round_ % len(arms)
        for arm in [*arms[shift:], *arms[:shift]]:
            gc.collect()  # start without the other arms' garbage
            started = time.perf_counter()
            for _ in range(runs):
                await arm.job()
            arm.times.append((time.perf_counter() - started) / runs)


@dataclass
class Section:
    title: str
    unit: str
    per: int
    """What a run's time is divided by: model calls per run (1 for per-run figures)."""
    arms: list[Arm]


def loop_sections(settings: Settings) -> list[Section]:
    k = settings.tool_rounds
    script = Script(k)
    model = scripted_model(script)
    specs = Toolkit([lookup]).specs()

    def agent(tools: list[FunctionTool], **kwargs: Any) -> Agent:
        return Agent(NAME, kwargs.pop("model", model), SYSTEM, tools, max_iters=k + 1, **kwargs)

    plain = agent([lookup])
    budgeted = agent([lookup], model=scripted_model(script))
    budgeted.model.context_size = 128_000  # the context budget counts tokens before each call
    threaded = agent([lookup_sync])
    ref = "hand loop, chat_stream"
    calls = k + 1
    per_iter = f"µs per iteration ({calls} model calls, {k} tool rounds a run)"
    async_tool = Section(
        f"{k} tool rounds, an async tool",
        per_iter,
        calls,
        [
            Arm(ref, lambda: hand_loop(model, specs, direct(lookup))),
            Arm(
                "hand loop, chat",
                lambda: hand_loop(model, specs, direct(lookup), stream=False),
                ref,
            ),
            Arm("Agent.reply", lambda: agent_reply(plain), ref),
            Arm("Agent.stream, every event consumed", lambda: agent_stream(plain), ref),
            Arm("Agent.reply, context budget on (128k)", lambda: agent_reply(budgeted), ref),
        ],
    )
    sync_tool = Section(
        f"{k} tool rounds, a sync tool",
        per_iter,
        calls,
        [
            Arm(ref, lambda: hand_loop(model, specs, direct(lookup_sync))),
            Arm("Agent.reply (the tool in a worker thread)", lambda: agent_reply(threaded), ref),
        ],
    )
    one = Script(0)
    one_model = scripted_model(one)
    one_agent = Agent(NAME, one_model, SYSTEM, [lookup], max_iters=1)
    fixed = Section(
        "one model call, no tool call: a run's fixed cost",
        "µs per run",
        1,
        [
            Arm(ref, lambda: hand_loop(one_model, specs, direct(lookup))),
            Arm("Agent.reply", lambda: agent_reply(one_agent), ref),
            Arm("Agent.stream, every event consumed", lambda: agent_stream(one_agent), ref),
        ],
    )
    return [async_tool, sync_tool, fixed]


async def loop_figures(settings: Settings) -> list[Section]:
    sections = loop_sections(settings)
    for section in sections:
        rounds = section.per - 1
        for arm in section.arms:
            check_conversation(arm.label, await arm.job(), rounds)
            for _ in range(3):  # warm-up: imports, caches, the worker threads
                await arm.job()
    for section in sections:
        await interleaved(section.arms, settings.loop_rounds, settings.runs_per_round)
    return sections


def report_loop(sections: list[Section]) -> None:
    median = statistics.median
    header = f"{'arm':<44}{'median':>9}{'best':>9}{'overhead':>11}{'ratio':>8}"
    for section in sections:
        print(f"{section.title}; {section.unit}")
        print_heading(header)
        by_label = {arm.label: arm for arm in section.arms}
        for arm in section.arms:
            scale = 1e6 / section.per
            cells = f"{median(arm.times) * scale:>9.1f}{min(arm.times) * scale:>9.1f}"
            if arm.reference is not None:
                ref = by_label[arm.reference].times
                pairs = list(zip(arm.times, ref, strict=True))
                overhead = median(a - r for a, r in pairs) * scale
                ratio = median(a / r for a, r in pairs)
                cells += f"{overhead:>+11.1f}{ratio:>7.2f}x"
            else:
                cells += f"{'(reference)':>19}"
            print(f"{arm.label:<44}{cells}")
        print()


# -- 2. slow tools in parallel ---------------------------------------------------------------


@dataclass
class FanOut:
    kind: str
    n: int
    parallel: bool
    reps: int
    agent: Agent
    walls: list[float] = field(default_factory=list)
    slowest: list[float] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)


async def tool_round(agent: Agent) -> tuple[float, list[Msg]]:
    """The wall time from the model's calling turn complete to its tool results complete."""
    NAPS.clear()
    memory = InMemoryMemory()
    started = wall = 0.0
    async with agent.stream(QUESTION, memory=memory) as run:
        async for event in run:
            if isinstance(event, MessageCompleted):
                if event.msg.role == "assistant" and event.msg.tool_calls:
                    started = time.perf_counter()
                elif event.msg.role == "tool":
                    wall = time.perf_counter() - started
    return wall, await memory.get()


def fan_outs(settings: Settings) -> list[FanOut]:
    found = []
    for parallel in (True, False):
        for kind, fn in (("async", nap), ("sync, in threads", nap_sync)):
            if not parallel and kind != "async" and not settings.sequential_sync:
                continue
            reps = settings.parallel_reps if parallel else settings.sequential_reps
            for n in settings.fan_out:
                model = scripted_model(Script(1, calls=n, tool_name="nap"))
                agent = Agent(NAME, model, SYSTEM, [fn], max_iters=2, parallel_tool_calls=parallel)
                found.append(FanOut(kind, n, parallel, reps, agent))
    return found


async def fan_out_figures(settings: Settings) -> list[FanOut]:
    cases = fan_outs(settings)
    # Warm-up (and a check): the widest parallel fan-out of each kind starts the worker threads.
    for case in cases:
        if case.parallel and case.n == max(settings.fan_out):
            _, msgs = await tool_round(case.agent)
            check_conversation(f"{case.kind} x{case.n}", msgs, 1, case.n)
    for rep in range(max(c.reps for c in cases)):
        for case in cases:
            if rep >= case.reps:
                continue
            gc.collect()
            wall, msgs = await tool_round(case.agent)
            if len(NAPS) != case.n:
                raise SystemExit(f"{case.kind} x{case.n}: {len(NAPS)} tools ran")
            check_conversation(f"{case.kind} x{case.n}", msgs, 1, case.n)
            case.walls.append(wall)
            case.slowest.append(max(NAPS))
            case.totals.append(sum(NAPS))
    return cases


def report_fan_out(cases: list[FanOut]) -> None:
    median = statistics.median
    print(f"N slow tools in one round ({SLEEP:g} s each); wall time of the round, median of runs")
    header = (
        f"{'tools':<18}{'N':>4}{'parallel':>10}{'runs':>6}{'round ms':>10}{'slowest ms':>12}"
        f"{'round/slowest':>15}{'expected':>10}"
    )
    print_heading(header)
    for c in cases:
        ratio = median(w / s for w, s in zip(c.walls, c.slowest, strict=True))
        expected = "~1" if c.parallel else f"~{c.n}"
        print(
            f"{c.kind:<18}{c.n:>4}{'on' if c.parallel else 'off':>10}{len(c.walls):>6}"
            f"{median(c.walls) * 1e3:>10.1f}{median(c.slowest) * 1e3:>12.1f}"
            f"{ratio:>14.2f}x{expected:>10}"
        )
    default_pool = min(32, (os.cpu_count() or 1) + 4)
    print(
        f"(sync tools run on parley's tool threads, up to {tool_executor().max_workers} at "
        f"once; asyncio's default pool, which they used before, has {default_pool} here)\n"
    )


# -- 3. a 20-step run's memory ---------------------------------------------------------------


def by_hand(rounds: int) -> list[Msg]:
    """The same conversation, built with `Msg`'s constructors as a person would write it."""
    msgs = [Msg.user(QUESTION)]
    for r in range(rounds):
        call = ToolCallBlock(id=f"call_{r}_0", name="lookup", input={"item": r})
        msgs.append(Msg.assistant(call, name=NAME))
        msgs.append(Msg.tool_result(call.id, _answer(r), name="lookup"))
    msgs.append(Msg.assistant(ANSWER, name=NAME))
    return msgs


@dataclass
class MemoryArm:
    label: str
    job: Callable[[], Awaitable[list[Msg]]]
    peaks: list[int] = field(default_factory=list)
    retained: list[int] = field(default_factory=list)
    messages: int = 0


async def traced(job: Callable[[], Awaitable[list[Msg]]]) -> tuple[int, int, int]:
    """Tracemalloc's peak during `job` and what its result retains, over the level before."""
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    kept = await job()
    peak = tracemalloc.get_traced_memory()[1] - base
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - base
    count = len(kept)
    del kept
    return peak, retained, count


async def memory_figures(settings: Settings) -> list[MemoryArm]:
    k = settings.memory_rounds
    model = scripted_model(Script(k))
    specs = Toolkit([lookup]).specs()
    agent = Agent(NAME, model, SYSTEM, [lookup], max_iters=k + 1)

    async def built() -> list[Msg]:
        return by_hand(k)

    arms = [
        MemoryArm("Agent.reply: the agent's memory", lambda: agent_reply(agent)),
        MemoryArm(
            "hand loop (chat_stream): its list", lambda: hand_loop(model, specs, direct(lookup))
        ),
        MemoryArm("the same messages built by hand", built),
    ]
    for arm in arms:
        check_conversation(arm.label, await arm.job(), k)
        await arm.job()  # warm-up: first-use caches are not the run's
    tracemalloc.start()
    try:
        for _ in range(settings.memory_reps):
            for arm in arms:
                peak, retained, arm.messages = await traced(arm.job)
                arm.peaks.append(peak)
                arm.retained.append(retained)
    finally:
        tracemalloc.stop()
    return arms


def report_memory(arms: list[MemoryArm], rounds: int) -> None:
    median = statistics.median
    print(
        f"a {rounds}-tool-round run's memory (tracemalloc, KiB; median of runs); "
        f"ratios against the messages built by hand"
    )
    header = (
        f"{'what':<38}{'msgs':>5}{'peak':>9}{'retained':>10}{'per msg':>9}{'retained ratio':>16}"
    )
    print_heading(header)
    hand = median(arms[-1].retained)
    for arm in arms:
        retained = median(arm.retained)
        print(
            f"{arm.label:<38}{arm.messages:>5}{median(arm.peaks) / 1024:>9.1f}"
            f"{retained / 1024:>10.1f}{retained / arm.messages / 1024:>9.2f}"
            f"{retained / hand:>15.2f}x"
        )
    print(
        "(peak: the most allocated at once during the run, over the level before it; "
        "retained: what is still allocated after it while its messages are kept)\n"
    )


# -- profiling -------------------------------------------------------------------------------


def profile(settings: Settings, top: int = 25) -> None:
    section = loop_sections(settings)[0]
    reply = next(a for a in section.arms if a.label == "Agent.reply")

    async def runs(times: int) -> None:
        for _ in range(times):
            await reply.job()

    async def run() -> None:
        await runs(5)
        title = f"Agent.reply profile (50 runs of {settings.tool_rounds} tool rounds, own time):"
        await print_profile(functools.partial(runs, 50), title, top)

    asyncio.run(run())


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument("--profile", action="store_true", help="profile Agent.reply's runs")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = QUICK if args.quick else DEFAULT
    try:
        version = metadata.version("parley")
    except metadata.PackageNotFoundError:
        version = "?"
    print(
        f"parley {version}, python {sys.version.split()[0]}, {os.cpu_count()} cores; "
        f"{settings.loop_rounds} rounds of {settings.runs_per_round} runs per arm\n"
    )
    started = time.perf_counter()
    report_loop(asyncio.run(loop_figures(settings)))
    report_fan_out(asyncio.run(fan_out_figures(settings)))
    report_memory(asyncio.run(memory_figures(settings)), settings.memory_rounds)
    counter = "tiktoken's o200k_base" if tiktoken_counter() else "the estimate (4 characters)"
    print(f"context budget: tokens counted with {counter}, once per message (cached by id)")
    print(
        "overhead: the arm's time minus the reference's in the same round, ratio: the arm's "
        "over the reference's (medians over rounds); the reference is the hand-written loop "
        "calling the same scripted model (chat_stream, as the agent does) and the same tool "
        "function"
    )
    if args.profile:
        print()
        profile(settings)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
