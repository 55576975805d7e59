"""Build, serialize to JSON and parse back messages: parley beside its peers, in one process.

Every contender handles the same fixed mix of messages (user text; user text and an image URL;
an assistant tool call; a tool result), built from the same prepared inputs, with its own
idiomatic API:

- parley: `Msg.user(...)` and friends, `msg.model_dump_json()`, `Msg.model_validate_json(s)`;
- Qwen-Agent 0.0.34 (`qwen_agent.llm.schema`): `Message(...)`, `m.model_dump_json()`, and
  `Message(**json.loads(s))` as Qwen-Agent reads its own cache;
- AgentScope 2.0.11 (`agentscope.message`): `UserMsg` / `AssistantMsg` (a tool result lives in
  an assistant message there), `m.model_dump_json()`, `Msg.model_validate_json(s)`, as its
  storages do;
- plain pydantic v2: models written here with what parley's `Msg` holds (role, blocks
  discriminated on `type`, name, id, created_at, metadata) and no rules: the practical limit
  for a typed message layer;
- plain dicts with the standard `json` module: the floor.

Each phase (build all, dump all, parse all) is timed with the garbage collector off, as
`timeit` does; the whole is repeated and the best (or median) repetition is reported. Rounds
interleave the contenders (each round runs every one in turn, the order rotating), so a load
that comes and goes falls on all of them alike, and the clock is the process's CPU time by
default (`--clock wall` for `time.perf_counter`): the work is single-threaded and never waits,
so CPU time is its cost without the time other processes on the machine took.

Run: `python benchmarks/messages.py [-n 100000] [--repeat 5] [--clock cpu|wall]
[--require-peers] [--profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, Field

KINDS = ("user_text", "user_image", "assistant_tool_call", "tool_result")


class Spec(NamedTuple):
    """The inputs of one message; every contender builds from the same ones."""

    kind: str
    text: str
    url: str
    call_id: str
    tool: str
    args: dict[str, Any]
    output: str


@dataclass(frozen=True)
class Contender:
    name: str
    version: str
    build: Callable[[Spec], Any]
    dump: Callable[[Any], str]
    load: Callable[[str], Any]


class Timing(NamedTuple):
    build: float
    dump: float
    load: float

    @property
    def total(self) -> float:
        return self.build + self.dump + self.load


def make_specs(n: int) -> list[Spec]:
    """`n` messages cycling through the four kinds, with inputs that vary a little."""
    specs = []
    for i in range(n):
        city = f"City{i % 97}"
        specs.append(
            Spec(
                kind=KINDS[i % len(KINDS)],
                text=f"What is the weather in {city} today? Please answer briefly. ({i})",
                url=f"https://example.com/images/{i % 1000}.png",
                call_id=f"call_{i:08d}",
                tool="get_weather",
                args={"city": city, "unit": "celsius", "days": i % 7 + 1},
                output=f'{{"city": "{city}", "temperature": {i % 35}, "sky": "clear"}}',
            )
        )
    return specs


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


# -- contenders ------------------------------------------------------------------------------


def parley_contender() -> Contender:
    from parley import ImageBlock, Msg, ToolCallBlock  # noqa: PLC0415

    builders: dict[str, Callable[[Spec], Msg]] = {
        "user_text": lambda s: Msg.user(s.text),
        "user_image": lambda s: Msg.user(s.text, ImageBlock.from_url(s.url)),
        "assistant_tool_call": lambda s: Msg.assistant(
            ToolCallBlock(id=s.call_id, name=s.tool, input=s.args)
        ),
        "tool_result": lambda s: Msg.tool_result(s.call_id, s.output, name=s.tool),
    }
    return Contender(
        name="parley",
        version=_version("parley"),
        build=lambda s: builders[s.kind](s),
        dump=lambda m: m.model_dump_json(),
        load=Msg.model_validate_json,
    )


def qwen_contender() -> Contender:
    from qwen_agent.llm.schema import ContentItem, FunctionCall, Message  # noqa: PLC0415

    builders: dict[str, Callable[[Spec], Message]] = {
        "user_text": lambda s: Message("user", s.text),
        "user_image": lambda s: Message(
            "user", [ContentItem(text=s.text), ContentItem(image=s.url)]
        ),
        # Qwen-Agent carries one call per message, its arguments as a JSON string.
        "assistant_tool_call": lambda s: Message(
            "assistant",
            "",
            function_call=FunctionCall(s.tool, json.dumps(s.args, ensure_ascii=False)),
            extra={"function_id": s.call_id},
        ),
        "tool_result": lambda s: Message(
            "function", s.output, name=s.tool, extra={"function_id": s.call_id}
        ),
    }
    return Contender(
        name="qwen-agent",
        version=_version("qwen-agent"),
        build=lambda s: builders[s.kind](s),
        dump=lambda m: m.model_dump_json(),
        # As Qwen-Agent reads its own cache (llm/base.py): json.loads, then Message(**m).
        load=lambda text: Message(**json.loads(text)),
    )


def agentscope_contender() -> Contender:
    from agentscope.message import (  # noqa: PLC0415
        AssistantMsg,
        DataBlock,
        Msg,
        TextBlock,
        ToolCallBlock,
        ToolResultBlock,
        URLSource,
        UserMsg,
    )

    builders: dict[str, Callable[[Spec], Msg]] = {
        "user_text": lambda s: UserMsg("user", s.text),
        "user_image": lambda s: UserMsg(
            "user",
            [
                TextBlock(text=s.text),
                DataBlock(source=URLSource(url=s.url, media_type="image/png")),
            ],
        ),
        # AgentScope keeps the arguments as the raw JSON string.
        "assistant_tool_call": lambda s: AssistantMsg(
            "assistant",
            [ToolCallBlock(id=s.call_id, name=s.tool, input=json.dumps(s.args))],
        ),
        # AgentScope has no tool role: the result joins an assistant message.
        "tool_result": lambda s: AssistantMsg(
            "assistant",
            [ToolResultBlock(id=s.call_id, name=s.tool, output=s.output, state="success")],
        ),
    }
    return Contender(
        name="agentscope",
        version=_version("agentscope"),
        build=lambda s: builders[s.kind](s),
        dump=lambda m: m.model_dump_json(),
        load=Msg.model_validate_json,
    )


class _Text(BaseModel):
    type: Literal["text"] = "text"
    text: str


class _URL(BaseModel):
    type: Literal["url"] = "url"
    url: str
    media_type: str | None = None


class _Image(BaseModel):
    type: Literal["image"] = "image"
    source: _URL


class _ToolCall(BaseModel):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: dict[str, Any]


class _ToolResult(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    output: str


_Block = Annotated[_Text | _Image | _ToolCall | _ToolResult, Field(discriminator="type")]


def _new_id() -> str:
    return os.urandom(16).hex()


def _now() -> datetime:
    return datetime.now(UTC)


class _PlainMsg(BaseModel):
    """What parley's Msg holds, with no rules beyond the types."""

    role: Literal["system", "user", "assistant", "tool"]
    content: list[_Block] = Field(default_factory=list)
    name: str | None = None
    id: str = Field(default_factory=_new_id)
    created_at: datetime = Field(default_factory=_now)
    metadata: dict[str, Any] = Field(default_factory=dict)


def pydantic_contender() -> Contender:
    builders: dict[str, Callable[[Spec], _PlainMsg]] = {
        "user_text": lambda s: _PlainMsg(role="user", content=[_Text(text=s.text)]),
        "user_image": lambda s: _PlainMsg(
            role="user", content=[_Text(text=s.text), _Image(source=_URL(url=s.url))]
        ),
        "assistant_tool_call": lambda s: _PlainMsg(
            role="assistant", content=[_ToolCall(id=s.call_id, name=s.tool, input=s.args)]
        ),
        "tool_result": lambda s: _PlainMsg(
            role="tool", content=[_ToolResult(tool_call_id=s.call_id, name=s.tool, output=s.output)]
        ),
    }
    return Contender(
        name="plain pydantic",
        version=_version("pydantic"),
        build=lambda s: builders[s.kind](s),
        dump=lambda m: m.model_dump_json(exclude_none=True),
        load=_PlainMsg.model_validate_json,
    )


def _dict_msg(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": role,
        "content": content,
        "id": os.urandom(16).hex(),
        "created_at": datetime.now(UTC).isoformat(),
        "metadata": {},
    }


def dict_contender() -> Contender:
    builders: dict[str, Callable[[Spec], dict[str, Any]]] = {
        "user_text": lambda s: _dict_msg("user", [{"type": "text", "text": s.text}]),
        "user_image": lambda s: _dict_msg(
            "user",
            [
                {"type": "text", "text": s.text},
                {"type": "image", "source": {"type": "url", "url": s.url}},
            ],
        ),
        "assistant_tool_call": lambda s: _dict_msg(
            "assistant",
            [{"type": "tool_call", "id": s.call_id, "name": s.tool, "input": s.args}],
        ),
        "tool_result": lambda s: _dict_msg(
            "tool",
            [
                {
                    "type": "tool_result",
                    "tool_call_id": s.call_id,
                    "name": s.tool,
                    "output": s.output,
                }
            ],
        ),
    }
    return Contender(
        name="dicts + json",
        version=f"python {sys.version.split()[0]}",
        build=lambda s: builders[s.kind](s),
        dump=json.dumps,
        load=json.loads,
    )


PEERS: dict[str, Callable[[], Contender]] = {
    "qwen-agent": qwen_contender,
    "agentscope": agentscope_contender,
}
REFERENCES: dict[str, Callable[[], Contender]] = {
    "plain pydantic": pydantic_contender,
    "dicts + json": dict_contender,
}


# -- measuring -------------------------------------------------------------------------------


def check(contender: Contender) -> None:
    """Fail loudly if a contender's JSON does not come back the same, kind by kind."""
    for spec in make_specs(len(KINDS)):
        text = contender.dump(contender.build(spec))
        again = contender.dump(contender.load(text))
        if again != text:
            raise SystemExit(f"{contender.name}: {spec.kind} does not round-trip:\n{text}\n{again}")


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def _timed(function: Callable[[], Any], clock: Callable[[], float]) -> tuple[float, Any]:
    start = clock()
    result = function()
    return clock() - start, result


def run_once(
    contender: Contender, specs: Sequence[Spec], clock: Callable[[], float] = time.process_time
) -> Timing:
    build, dump, load = contender.build, contender.dump, contender.load
    gc.disable()
    try:
        build_s, built = _timed(lambda: [build(s) for s in specs], clock)
        dump_s, texts = _timed(lambda: [dump(m) for m in built], clock)
        load_s, _ = _timed(lambda: [load(t) for t in texts], clock)
    finally:
        gc.enable()
    return Timing(build_s, dump_s, load_s)


def measure(
    contenders: Sequence[Contender],
    specs: Sequence[Spec],
    repeat: int,
    stat: str,
    clock: Callable[[], float],
) -> dict[str, Timing]:
    """Each contender's timing, from rounds that run every contender in turn."""
    runs: dict[str, list[Timing]] = {c.name: [] for c in contenders}
    for round_ in range(repeat):
        shift = round_ % len(contenders)  # each contender goes first in turn
        for contender in [*contenders[shift:], *contenders[:shift]]:
            gc.collect()  # start each round without the last one's garbage
            runs[contender.name].append(run_once(contender, specs, clock))
    if stat == "best":
        return {name: min(timings, key=lambda t: t.total) for name, timings in runs.items()}
    return {
        name: Timing(*(statistics.median(phase) for phase in zip(*timings, strict=True)))
        for name, timings in runs.items()
    }


def profile_parley(specs: Sequence[Spec], top: int = 25) -> None:
    contender = parley_contender()
    gc.collect()
    profiler = cProfile.Profile()
    profiler.runcall(run_once, contender, specs)
    print("\nparley profile (one round, by own time):")
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(top)


# -- reporting -------------------------------------------------------------------------------


def _row(name: str, version: str, timing: Timing, n: int, parley_rate: float) -> str:
    rate = n / timing.total
    per = [1e6 * phase / n for phase in timing]
    return (
        f"{name:<16}{version:<14}{per[0]:>9.2f}{per[1]:>9.2f}{per[2]:>9.2f}"
        f"{rate:>13,.0f}{rate / parley_rate:>10.2f}x"
    )


def report(results: dict[str, tuple[Contender, Timing]], n: int, notes: list[str]) -> None:
    parley_rate = n / results["parley"][1].total
    print(
        f"{'':<30}{'µs per message':^27}\n"
        f"{'name':<16}{'version':<14}{'build':>9}{'to JSON':>9}{'parse':>9}"
        f"{'messages/s':>13}{'vs parley':>11}"
    )
    for name, (contender, timing) in results.items():
        print(_row(name, contender.version, timing, n, parley_rate))
    print()
    peers = [(n / results[p][1].total, p) for p in PEERS if p in results]
    if peers:
        best_rate, best = max(peers)
        print(f"parley vs the faster peer ({best}): {parley_rate / best_rate:.2f}x")
    for reference in REFERENCES:
        if reference in results:
            rate = n / results[reference][1].total
            print(f"parley vs {reference}: {parley_rate / rate:.2f}x")
    for note in notes:
        print(f"note: {note}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000, help="messages per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per contender")
    parser.add_argument("--stat", choices=["best", "median"], default="best")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="cpu", help="process CPU time, or wall time"
    )
    parser.add_argument(
        "--require-peers", action="store_true", help="exit 1 if a peer library is missing"
    )
    parser.add_argument("--profile", action="store_true", help="profile parley's round")
    return parser.parse_args(argv)


def load_contenders(require_peers: bool) -> tuple[list[Contender], list[str]]:
    contenders, missing = [parley_contender()], []
    for name, factory in {**PEERS, **REFERENCES}.items():
        try:
            contenders.append(factory())
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing and require_peers:
        raise SystemExit(f"missing: {', '.join(missing)}; install with benchmarks/setup.sh")
    notes = [f"skipped {name}; install it with benchmarks/setup.sh" for name in missing]
    return contenders, notes


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    contenders, notes = load_contenders(args.require_peers)
    specs = make_specs(args.n)
    print(
        f"{args.n:,} messages per round ({', '.join(KINDS)} in turn), "
        f"{args.stat} of {args.repeat} interleaved rounds, {args.clock} time; "
        f"python {sys.version.split()[0]}\n"
    )
    for contender in contenders:
        check(contender)
    timings = measure(contenders, specs, args.repeat, args.stat, CLOCKS[args.clock])
    results = {c.name: (c, timings[c.name]) for c in contenders}
    report(results, args.n, notes)
    if args.profile:
        profile_parley(specs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
