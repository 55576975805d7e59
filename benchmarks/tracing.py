"""Tracing's cost: an agent run with tracing off, on, and on with content, side by side.

Every arm runs the same agent on parley's `ScriptedModel` (no network, no weights): a run of
10 tool rounds (the model calls a tool that answers at once, ten times, then writes the answer:
11 `chat` spans, 10 `execute_tool` spans, one `invoke_agent`), and a run of one model call.

- `off`: no tracer provider (the default): the hooks' no-op path.
- `on`: an SDK `TracerProvider` with a `SimpleSpanProcessor` into an `InMemorySpanExporter`
  (cleared each round): making, filling and ending the spans, no network.
- `content`: the same, recording prompts, answers and tool arguments (JSON on every span).

Timings come from interleaved rounds (each round runs every arm back to back, the first to go
rotating); a figure is the median over rounds, a ratio the median of the per-round ones.

`--arms off` runs the off arm alone: run it on another checkout of parley (`PYTHONPATH=...`)
to compare the hooks' cost with no hooks at all.

Run: `python benchmarks/tracing.py [--quick] [--arms off,on,content]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.response import ChatResponse, ChatUsage
from parley.models.testing import ScriptedModel
from parley.tools import tool

TOOL_ROUNDS = 10
USAGE = ChatUsage(input_tokens=100, output_tokens=10)


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: Which.
    """
    return f"{item}: in stock"


def script(rounds: int) -> Callable[[ChatRequest], ChatResponse]:
    """The model's answer, a function of the request: a tool call per round, then text."""

    def answer(request: ChatRequest) -> ChatResponse:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < rounds:
            call = ScriptedModel.tool_call("lookup", {"item": f"item {done}"})
            return call.model_copy(update={"usage": USAGE})
        return ChatResponse.model_validate(
            {"content": [{"type": "text", "text": "All in stock."}], "usage": USAGE}
        )

    return answer


async def one_run(rounds: int) -> None:
    model = ScriptedModel([script(rounds)] * (rounds + 1), chunk_size=64)
    agent = Agent("bench", model, "Use the tools.", tools=[lookup])
    await agent.reply("Look the items up.")


def set_arm(arm: str, state: dict[str, Any]) -> None:
    """Point parley's tracing at the arm's provider (none for `off`)."""
    if arm == "off":
        if "tracing" in state:
            state["tracing"].use_tracer_provider(None)
        return
    from parley import tracing  # noqa: PLC0415  (absent from a checkout without tracing)

    state["tracing"] = tracing
    if "provider" not in state:
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: PLC0415
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
            InMemorySpanExporter,
        )

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        state["provider"], state["exporter"] = provider, exporter
    state["exporter"].clear()
    tracing.use_tracer_provider(state["provider"])
    tracing.configure(False, capture_content=arm == "content")


async def timed(arm: str, rounds: int, runs: int, state: dict[str, Any]) -> float:
    set_arm(arm, state)
    started = time.perf_counter()
    for _ in range(runs):
        await one_run(rounds)
    elapsed = (time.perf_counter() - started) / runs
    set_arm("off", state)
    return elapsed


async def measure(arms: list[str], rounds: int, runs: int, repeat: int) -> dict[str, list[float]]:
    state: dict[str, Any] = {}
    for arm in arms:  # warm up: imports, caches
        await timed(arm, rounds, 2, state)
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for index in range(repeat):
        order = arms[index % len(arms) :] + arms[: index % len(arms)]
        for arm in order:
            times[arm].append(await timed(arm, rounds, runs, state))
    return times


def report(label: str, times: dict[str, list[float]]) -> None:
    print(f"\n{label}")
    base = times.get("off")
    for arm, values in times.items():
        line = f"  {arm:8} median {statistics.median(values) * 1e6:8.0f} µs/run"
        line += f"  best {min(values) * 1e6:8.0f}"
        if base is not None and arm != "off":
            ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
            line += f"  x{ratio:.2f} of off"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--arms", default="off,on,content", help="comma-separated arms")
    args = parser.parse_args()
    arms = args.arms.split(",")
    repeat, runs = (10, 5) if args.quick else (30, 10)
    for rounds, label in ((TOOL_ROUNDS, f"a run of {TOOL_ROUNDS} tool rounds"), (0, "one call")):
        report(label, asyncio.run(measure(arms, rounds, runs, repeat)))


if __name__ == "__main__":
    main()
