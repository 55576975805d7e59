"""Chat models: parley beside each provider's raw SDK and raw llama-cpp-python, interleaved.

Against a local OpenAI-compatible server (`_openai_bench_server.py`, in a process of its own),
parley's `OpenAIChatModel` and the SDK's `AsyncOpenAI` take turns, round by round, so that
drift in the machine's speed hits both:

1. a non-streaming call, and a non-streaming tool-call response: time per call;
2. consuming a 2,000- and a 20,000-chunk stream, and whether parley's time is linear in the
   stream's length: with each chunk dropped once read, and with every chunk kept in a list
   (as a UI or a logger keeps them), where the garbage collector's passes over the kept
   chunks are part of the cost; and what each kept chunk holds (GC-tracked objects, bytes);
3. 500 concurrent 200-chunk streams: wall time and peak memory, each round in a fresh
   process per contender (the growth of resident memory over the process's level before the
   streams start);
4. `import parley` plus building a model against `import openai` plus `AsyncOpenAI(...)`, in
   a fresh process each time, best of N;
5. the embedded local model: tokens per second streamed through parley's `LocalChatModel`
   against llama-cpp-python's `Llama.create_chat_completion(stream=True)` called directly on
   the same GGUF file with the same settings;
6. the other providers (Anthropic, Gemini, Ollama, DashScope's native API), each against its
   own raw SDK on a local server speaking its wire format (`models_<provider>.py`, runnable on
   its own too): a non-streaming call, a tool-call response, 2,000- and 20,000-chunk streams
   and their linearity.

Each contender's answers are checked before anything is timed. The table gives every figure,
parley's against the reference's, and whether the goal of the issue is met.

Run: `python benchmarks/models.py [--quick] [--skip-local] [--providers a,b] [--tracemalloc]
[--profile]`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import importlib
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = HERE / "_openai_bench_server.py"
MODEL = "gpt-4o-mini"
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs")
"""What the server streams, one word a chunk (kept in step with `_openai_bench_server.py`)."""

SYSTEM = "You are a helpful assistant. Answer briefly."
CONVERSATION = [
    ("user", "What is the weather like in Paris?"),
    ("assistant", "I can look that up. Which days do you mean?"),
    ("user", "The next three days, in celsius please."),
]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}
TOOL_ARGUMENTS = {"city": "Paris", "unit": "celsius", "days": 3}


def expected_text(chunks: int) -> str:
    return "".join(" " + WORDS[i % len(WORDS)] for i in range(chunks))


@dataclass(frozen=True)
class Settings:
    """How much to run: rounds of each measurement (every round runs both contenders)."""

    call_rounds: int
    calls_per_round: int
    stream_rounds: int
    long_stream_rounds: int
    burst_rounds: int
    import_runs: int
    local_rounds: int
    local_tokens: int
    streams: int = 500
    stream_chunks: int = 200
    short: int = 2_000
    long: int = 20_000


# Short rounds, many of them: each round runs both contenders back to back, so that a burst
# of load from elsewhere on the machine lands on one pair rather than on one contender.
DEFAULT = Settings(
    call_rounds=30,
    calls_per_round=25,
    stream_rounds=15,
    long_stream_rounds=7,
    burst_rounds=3,
    import_runs=7,
    local_rounds=6,
    local_tokens=256,
)
QUICK = Settings(
    call_rounds=10,
    calls_per_round=20,
    stream_rounds=5,
    long_stream_rounds=3,
    burst_rounds=1,
    import_runs=3,
    local_rounds=1,
    local_tokens=128,
)


# -- the server --------------------------------------------------------------------------


class BenchServer(AbstractContextManager["BenchServer"]):
    """`_openai_bench_server.py` in a child process; it stops when its stdin closes."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def __enter__(self) -> BenchServer:
        self._process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        if not line.startswith("PORT "):
            self._process.kill()
            raise SystemExit(f"the benchmark server did not start: {line!r}")
        self.port = int(line.split()[1])
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()

    def url(self, chunks: int | None = None) -> str:
        """The base URL of a scenario: streams of `chunks` chunks (the default: 200)."""
        prefix = f"/n{chunks}" if chunks else ""
        return f"http://127.0.0.1:{self.port}{prefix}/v1"


# -- contenders on the OpenAI wire format ---------------------------------------------------


class WireContender(Protocol):
    name: str

    async def call(self) -> str: ...
    async def tool_call(self) -> dict[str, Any]: ...
    async def stream(self, chunks: int) -> str: ...
    async def keep(self, chunks: int) -> list[Any]: ...
    def kept_text(self, kept: list[Any]) -> str: ...
    async def aclose(self) -> None: ...


async def stream_kept(contender: WireContender, chunks: int) -> str:
    """A stream with every chunk kept in a list, as a UI or a logger keeps them; its text."""
    return contender.kept_text(await contender.keep(chunks))


class ParleyContender:
    """parley's `OpenAIChatModel`, one per scenario URL, fed prepared `Msg`s."""

    name = "parley"

    def __init__(self, url: Callable[[int | None], str], timeout: float | None = None) -> None:
        from parley import Msg  # noqa: PLC0415
        from parley.providers.openai import OpenAIChatModel, OpenAICredential  # noqa: PLC0415

        self._url = url
        self._timeout = {"timeout": timeout} if timeout else {}
        self._model_class = OpenAIChatModel
        self._credential_class = OpenAICredential
        self._models: dict[int | None, Any] = {}
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    def model(self, chunks: int | None = None) -> Any:
        model = self._models.get(chunks)
        if model is None:
            credential = self._credential_class(api_key="x", base_url=self._url(chunks))
            model = self._model_class(credential, MODEL, **self._timeout)
            self._models[chunks] = model
        return model

    async def call(self) -> str:
        response = await self.model().chat(self.messages)
        return str(response.text)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.model().chat(self.messages, tools=[TOOL])
        return dict(response.tool_calls[0].input)

    async def stream(self, chunks: int) -> str:
        final = None
        async for chunk in self.model(chunks).chat_stream(self.messages):
            final = chunk
        assert final is not None
        assert final.is_last
        return str(final.text)

    async def keep(self, chunks: int) -> list[Any]:
        return [chunk async for chunk in self.model(chunks).chat_stream(self.messages)]

    def kept_text(self, kept: list[Any]) -> str:
        assert kept[-1].is_last
        return "".join(chunk.text for chunk in kept[:-1])

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()


class RawSDKContender:
    """The `openai` SDK's `AsyncOpenAI`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: Callable[[int | None], str], timeout: float | None = None) -> None:
        from openai import AsyncOpenAI  # noqa: PLC0415

        self._url = url
        self._timeout = {"timeout": timeout} if timeout else {}
        self._client_class = AsyncOpenAI
        self._clients: dict[int | None, Any] = {}
        self.messages = [{"role": "system", "content": SYSTEM}] + [
            {"role": role, "content": text} for role, text in CONVERSATION
        ]

    def client(self, chunks: int | None = None) -> Any:
        client = self._clients.get(chunks)
        if client is None:
            client = self._client_class(api_key="x", base_url=self._url(chunks), **self._timeout)
            self._clients[chunks] = client
        return client

    async def call(self) -> str:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages
        )
        return str(completion.choices[0].message.content)

    async def tool_call(self) -> dict[str, Any]:
        completion = await self.client().chat.completions.create(
            model=MODEL, messages=self.messages, tools=[TOOL]
        )
        call = completion.choices[0].message.tool_calls[0]
        # What parley hands over: the arguments parsed.
        return dict(json.loads(call.function.arguments))

    async def stream(self, chunks: int) -> str:
        # The same request as parley's: usage in the last chunk.
        stream = await self.client(chunks).chat.completions.create(
            model=MODEL,
            messages=self.messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts = [
            chunk.choices[0].delta.content
            async for chunk in stream
            if chunk.choices and chunk.choices[0].delta.content
        ]
        return "".join(parts)

    async def keep(self, chunks: int) -> list[Any]:
        stream = await self.client(chunks).chat.completions.create(
            model=MODEL,
            messages=self.messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        return [chunk async for chunk in stream]

    def kept_text(self, kept: list[Any]) -> str:
        return "".join(
            chunk.choices[0].delta.content
            for chunk in kept
            if chunk.choices and chunk.choices[0].delta.content
        )

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()


CONTENDERS: dict[str, type[ParleyContender] | type[RawSDKContender]] = {
    "parley": ParleyContender,
    "raw": RawSDKContender,
}


async def check_wire(contender: WireContender, short: int) -> None:
    """Fail loudly if a contender's answers are not what the server sent."""
    text = await contender.call()
    arguments = await contender.tool_call()
    streamed = await contender.stream(short)
    kept = await stream_kept(contender, short)
    problems = []
    if not text.startswith(" ".join(WORDS)):
        problems.append(f"call: {text[:60]!r}")
    if arguments != TOOL_ARGUMENTS:
        problems.append(f"tool call: {arguments!r}")
    if streamed != expected_text(short):
        problems.append(f"stream: {len(streamed)} characters, {streamed[:60]!r}")
    if kept != expected_text(short):
        problems.append(f"kept stream: {len(kept)} characters, {kept[:60]!r}")
    if problems:
        raise SystemExit(f"{contender.name} answered wrongly: {'; '.join(problems)}")


# -- measuring in this process --------------------------------------------------------------


async def _time(job: Callable[[], Awaitable[Any]], times: int = 1) -> float:
    """Seconds per run of `job`, over `times` runs in a row."""
    return (await _time_cpu(job, times))[0]


async def _time_cpu(job: Callable[[], Awaitable[Any]], times: int = 1) -> tuple[float, float]:
    """Seconds per run of `job`, wall-clock and the process's CPU time, over `times` runs."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(times):
        await job()
    return (time.perf_counter() - start) / times, (time.process_time() - cpu) / times


async def interleaved(
    pair: Sequence[WireContender],
    job: Callable[[WireContender], Callable[[], Awaitable[Any]]],
    rounds: int,
    times: int = 1,
) -> dict[str, list[float]]:
    """Seconds per job for each contender, round by round, the first to go alternating."""
    results: dict[str, list[float]] = {c.name: [] for c in pair}
    for round_ in range(rounds):
        order = pair if round_ % 2 == 0 else list(reversed(pair))
        for contender in order:
            gc.collect()  # start without the other contender's garbage
            results[contender.name].append(await _time(job(contender), times))
    return results


@dataclass
class Figure:
    """One row of the table: parley's figure against the reference's, and the goal."""

    label: str
    unit: str
    parley: float
    reference: float | None
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    scale: float = 1.0
    """What the unit multiplies the stored seconds (or other value) by, for printing."""


def paired_ratio(parley: Sequence[float], reference: Sequence[float]) -> float:
    """The median over rounds of parley's figure over the reference's in the same round."""
    return statistics.median(p / r for p, r in zip(parley, reference, strict=True))


def time_figure(label: str, unit: str, scale: float, runs: dict[str, list[float]]) -> Figure:
    """A time row: the median of rounds, and the paired ratio; the goal is set by the caller."""
    parley, raw = runs["parley"], runs["raw SDK"]
    ratio = paired_ratio(parley, raw)
    median = statistics.median
    return Figure(label, unit, median(parley), median(raw), ratio=ratio, scale=scale)


async def wire_figures(server: BenchServer, settings: Settings) -> list[Figure]:
    pair: list[WireContender] = [ParleyContender(server.url), RawSDKContender(server.url)]
    try:
        for contender in pair:
            await check_wire(contender, settings.short)
            await contender.stream(settings.long)  # warm the long scenario's connection
        figures = await wire_rounds(pair, settings, keep=True)
        return [*figures, *await held_figures(pair, settings.short)]
    finally:
        for contender in pair:
            await contender.aclose()


async def wire_rounds(
    pair: Sequence[Any],
    settings: Settings,
    *,
    prefix: str = "",
    suffix: str = "",
    tool_call: str = "tool-call response (non-streaming)",
    keep: bool = False,
) -> list[Figure]:
    """The wire figures of two contenders, interleaved: calls, tool calls, streams, linearity.

    Every provider's benchmark measures these the same way; `prefix` and `suffix` go around
    each row's label (a provider's name, a variant of the reference). With `keep`, each
    contender also streams in the same rounds keeping every chunk (`KeptArm`).
    """
    s = settings

    def label(text: str) -> str:
        return f"{prefix}{text}{suffix}"

    calls = await interleaved(pair, lambda c: c.call, s.call_rounds, s.calls_per_round)
    tools = await interleaved(pair, lambda c: c.tool_call, s.call_rounds, s.calls_per_round)
    runs = await stream_rounds([*pair, *(KeptArm(c) for c in pair)] if keep else pair, s)
    short, long = runs.short, runs.long
    call_figures = [
        time_figure(label("non-streaming call"), "µs/call", 1e6, calls),
        time_figure(label(tool_call), "µs/call", 1e6, tools),
    ]
    for figure in call_figures:
        figure.goal, figure.met = "ratio <= 1.0", (figure.ratio or 0) <= 1.0
    stream_figures = [
        time_figure(label(f"{s.short:,}-chunk stream"), "ms", 1e3, short),
        time_figure(label(f"{s.long:,}-chunk stream"), "ms", 1e3, long),
    ]
    for figure in stream_figures:
        figure.goal, figure.met = "ratio <= 0.5", (figure.ratio or 0) <= 0.5
    figures = [*call_figures, *stream_figures, *linearity_figures(short, long, s)]
    if keep:
        figures += kept_figures(runs, s)
    return figures


Runs = dict[str, list[float]]
"""Seconds per run of each arm (contender, or contender and way), round by round."""


@dataclass
class StreamRuns:
    """Seconds per short and per long stream of each arm, round by round, wall-clock and CPU.

    The CPU time is the client process's own (the server runs in another), which other work
    on the machine moves much less than the wall-clock time.
    """

    short: Runs
    long: Runs
    short_cpu: Runs
    long_cpu: Runs
    full_passes: dict[str, list[int]] = field(default_factory=dict)
    """Full garbage collections (of the oldest generation) during each arm's long stream."""


class _FullPasses:
    """Counts the garbage collector's full passes while it is on (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            self.count += 1

    def __enter__(self) -> _FullPasses:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self)


async def stream_rounds(arms: Sequence[Any], settings: Settings) -> StreamRuns:
    """Each arm's short and long streams, round by round.

    Each round runs every arm in turn (the first to go alternating), each arm its short
    streams (their mean is the round's figure) and then its long one, so that a round's long
    stream is set against the short ones of the same arm run just before it: a drift in the
    machine's speed between rounds moves both.
    """
    s = settings
    per_round = max(1, round(s.stream_rounds / s.long_stream_rounds))
    runs = StreamRuns(*({arm.name: [] for arm in arms} for _ in range(4)))
    for round_ in range(s.long_stream_rounds):
        for arm in arms if round_ % 2 == 0 else list(reversed(arms)):
            for chunks, times, wall, cpu in (
                (s.short, per_round, runs.short, runs.short_cpu),
                (s.long, 1, runs.long, runs.long_cpu),
            ):
                gc.collect()  # start without the other arm's garbage
                with _FullPasses() as passes:
                    seconds = await _time_cpu(functools.partial(arm.stream, chunks), times)
                wall[arm.name].append(seconds[0])
                cpu[arm.name].append(seconds[1])
                if chunks == s.long:
                    runs.full_passes.setdefault(arm.name, []).append(passes.count)
    return runs


def linearity_figures(short: Runs, long: Runs, settings: Settings) -> list[Figure]:
    """Time per chunk at both lengths, and how much longer the long stream took."""
    s = settings
    scale_up = s.long / s.short
    growth = paired_ratio(long["parley"], short["parley"])
    linear = Figure(
        f"linearity: {s.long:,}-chunk time / {s.short:,}-chunk time",
        "ratio",
        growth,
        paired_ratio(long["raw SDK"], short["raw SDK"]),
        goal=f"~{scale_up:g} (<= {scale_up * 1.1:g})",
        met=growth <= scale_up * 1.1,
    )
    return [
        per_chunk_figure("  per chunk at {n}", short, s.short),
        per_chunk_figure("  per chunk at {n}", long, s.long),
        linear,
    ]


def per_chunk_figure(label: str, runs: Runs, chunks: int, way: str = "") -> Figure:
    """Median time per chunk of both contenders (`way`: the suffix of their arms' names)."""
    parley, raw = (statistics.median(runs[name + way]) / chunks for name in ("parley", "raw SDK"))
    return Figure(label.format(n=f"{chunks:,}"), "µs", parley, raw, scale=1e6)


KEPT_GOAL = 1.05
"""How much more a kept chunk may cost in the long stream than in the short one (issue 13)."""


class KeptArm:
    """A contender's streams with every chunk kept in a list: an arm of its own in the rounds.

    Dropped, a chunk is freed as soon as it is read and the garbage collector hardly runs;
    kept, every chunk's GC-tracked objects stay, the collector's passes over them are part of
    the cost, and a full pass (over every object of the process) comes once enough of them
    have piled up. Both ways run in the same rounds, so that their ratio is paired.
    """

    def __init__(self, contender: WireContender) -> None:
        self.contender = contender
        self.name = f"{contender.name}{KEPT}"

    async def stream(self, chunks: int) -> str:
        return await stream_kept(self.contender, chunks)


KEPT = ", kept"
"""What a `KeptArm`'s name adds to its contender's."""


def kept_figures(runs: StreamRuns, settings: Settings) -> list[Figure]:
    """Kept beside dropped: the kept streams, per chunk, long over short, kept over dropped.

    The ratios are paired (a round's long stream over the same arm's short ones in that
    round; an arm's kept stream over its dropped one), in wall-clock and in CPU time.
    """
    s = settings
    names = ("parley", "raw SDK")
    kept_times = [
        time_figure(
            f"{n:,}-chunk stream, chunks kept",
            "ms",
            1e3,
            {name: wall[name + KEPT] for name in names},
        )
        for n, wall in ((s.short, runs.short), (s.long, runs.long))
    ]
    figures = [
        *kept_times,
        per_chunk_figure("  per chunk at {n}, kept", runs.short, s.short, KEPT),
        per_chunk_figure("  per chunk at {n}, kept", runs.long, s.long, KEPT),
    ]
    clocks = (("", runs.short, runs.long), ("CPU: ", runs.short_cpu, runs.long_cpu))
    for clock, short, long in clocks:
        for how, way in (("dropped", ""), ("kept", KEPT)):
            parley, raw = (
                paired_ratio(long[name + way], short[name + way]) / (s.long / s.short)
                for name in names
            )
            label = f"{clock}per-chunk cost {s.long:,} / {s.short:,}, {how}"
            goal, met = f"<= {KEPT_GOAL}", parley <= KEPT_GOAL
            figures.append(Figure(label, "ratio", parley, raw, goal=goal, met=met))
    for clock, short, long in clocks:
        for n, by_arm in ((s.short, short), (s.long, long)):
            parley, raw = (paired_ratio(by_arm[k + KEPT], by_arm[k]) for k in names)
            label = f"{clock}per-chunk cost kept / dropped, at {n:,}"
            figures.append(Figure(label, "ratio", parley, raw))
    # Whether the collector's first full pass fell inside the long stream: it walks every
    # object of the process, and moves the kept per-chunk cost by a tenth or more.
    for how, way in (("dropped", ""), ("kept", KEPT)):
        parley, raw = (statistics.median(runs.full_passes[name + way]) for name in names)
        label = f"full GC passes in a {s.long:,}-chunk stream, {how}"
        figures.append(Figure(label, "passes", parley, raw))
    return figures


async def held_per_chunk(contender: WireContender, chunks: int) -> tuple[float, float]:
    """What each kept chunk of a stream holds: GC-tracked objects, and bytes (tracemalloc).

    Counted over the whole stream's chunks, in a list, after a collection: what stays alive
    because the caller kept them, the final chunk included.
    """
    await contender.keep(chunks)  # warm: lazy imports, the connection, caches
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        kept = await contender.keep(chunks)
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    objects = len(gc.get_objects()) - objects
    assert contender.kept_text(kept) == expected_text(chunks)
    return objects / chunks, size / chunks


async def held_figures(pair: Sequence[WireContender], chunks: int) -> list[Figure]:
    """What each contender's kept chunks hold, counted over one stream of `chunks` chunks."""
    held = {c.name: await held_per_chunk(c, chunks) for c in pair}
    parley, raw = held["parley"], held["raw SDK"]
    return [
        Figure("a kept chunk holds: GC-tracked objects", "objects", *held_ratio(parley[0], raw[0])),
        Figure("a kept chunk holds: bytes (tracemalloc)", "B", *held_ratio(parley[1], raw[1])),
    ]


def held_ratio(parley: float, raw: float) -> tuple[float, float, float]:
    return parley, raw, parley / raw


# -- 500 concurrent streams, each round in a fresh process ----------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Reset the process's resident-memory high-water mark (`VmHWM`; Linux 4.0 and later)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError as exc:
        raise SystemExit(
            f"cannot reset the peak resident memory (Linux 4.0+ only): {exc}"
        ) from None


async def burst_child(
    key: str, url: str, streams: int, chunks: int, *, trace: bool = False
) -> dict[str, Any]:
    """In a fresh process: one contender's `streams` concurrent streams; time and memory.

    Memory is the growth of the resident set: its high-water mark during the streams over
    its size just before them. With `trace`, it is instead tracemalloc's peak of Python
    allocations (which slows the run, so the time is then not worth reporting).
    """
    # With tracemalloc on, the SDK's 5-second connect timeout trips while 500 connections
    # wait for a loop slowed down by the tracing; a long timeout for both keeps the run whole.
    contender = CONTENDERS[key](lambda _: url, 600.0 if trace else None)
    try:
        await check_burst(contender, chunks)
        gc.collect()
        if trace:
            tracemalloc.start()
        else:
            _reset_peak()
        before = _status_kib("VmRSS")
        start = time.perf_counter()
        texts = await asyncio.gather(*(contender.stream(chunks) for _ in range(streams)))
        seconds = time.perf_counter() - start
        if trace:
            growth = tracemalloc.get_traced_memory()[1] / 1024
            tracemalloc.stop()
        else:
            growth = _status_kib("VmHWM") - before
    finally:
        await contender.aclose()
    wrong = sum(text != expected_text(chunks) for text in texts)
    return {"seconds": seconds, "growth_kib": growth, "bad": wrong}


async def check_burst(contender: WireContender, chunks: int) -> None:
    # Warm up (lazy imports, the first connection) and check the answer.
    if await contender.stream(chunks) != expected_text(chunks):
        raise SystemExit(f"{contender.name} streamed a wrong answer")


def run_burst(server: BenchServer, key: str, settings: Settings, trace: bool) -> dict[str, Any]:
    url = server.url(settings.stream_chunks)
    command = [sys.executable, __file__, "--burst", key, "--url", url]
    command += ["--streams", str(settings.streams), "--chunks", str(settings.stream_chunks)]
    command += ["--tracemalloc"] if trace else []
    output = subprocess.run(command, capture_output=True, text=True, check=False)
    if output.returncode != 0:
        raise SystemExit(f"the {key} burst failed:\n{output.stderr}")
    result: dict[str, Any] = json.loads(output.stdout.strip().splitlines()[-1])
    if result["bad"]:
        raise SystemExit(f"{key}: {result['bad']} of the concurrent streams came back wrong")
    return result


def burst_runs(
    server: BenchServer, settings: Settings, rounds: int, trace: bool
) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"parley": [], "raw": []}
    for round_ in range(rounds):
        for key in ("parley", "raw") if round_ % 2 == 0 else ("raw", "parley"):
            runs[key].append(run_burst(server, key, settings, trace))
    return runs


def burst_figures(server: BenchServer, settings: Settings, trace: bool) -> list[Figure]:
    runs = burst_runs(server, settings, settings.burst_rounds, trace=False)
    wall = [[r["seconds"] for r in runs[k]] for k in ("parley", "raw")]
    rss = [[r["growth_kib"] / 1024 for r in runs[k]] for k in ("parley", "raw")]
    label = f"{settings.streams} concurrent {settings.stream_chunks}-chunk streams"
    median = statistics.median
    rss_ratio = paired_ratio(*rss)
    figures = [
        Figure(f"{label}: wall", "s", median(wall[0]), median(wall[1]), paired_ratio(*wall)),
        Figure(
            f"{label}: peak RSS growth",
            "MiB",
            median(rss[0]),
            median(rss[1]),
            rss_ratio,
            goal="ratio <= 1.0",
            met=rss_ratio <= 1.0,
        ),
    ]
    if trace:
        traced = burst_runs(server, settings, 1, trace=True)
        heap = [traced[k][0]["growth_kib"] / 1024 for k in ("parley", "raw")]
        label = "  tracemalloc peak (Python allocations), 1 round"
        figures.append(Figure(label, "MiB", heap[0], heap[1], heap[0] / heap[1]))
    return figures


# -- import and build, in a fresh process ---------------------------------------------------

_IMPORT_PARLEY = """
import time
start = time.perf_counter()
import parley
from parley.providers.openai import OpenAIChatModel, OpenAICredential
model = OpenAIChatModel(OpenAICredential(api_key="x", base_url="{url}"), "gpt-4o-mini")
elapsed = time.perf_counter() - start
import sys
print(elapsed, "openai" in sys.modules)
"""
_IMPORT_RAW = """
import time
start = time.perf_counter()
import openai
client = openai.AsyncOpenAI(api_key="x", base_url="{url}")
elapsed = time.perf_counter() - start
print(elapsed, True)
"""
_FIRST_CLIENT = """
import time
start = time.perf_counter()
import asyncio
import parley
from parley.providers.openai import OpenAIChatModel, OpenAICredential
model = OpenAIChatModel(OpenAICredential(api_key="x", base_url="{url}"), "gpt-4o-mini")
async def client():
    model.client()
asyncio.run(client())
elapsed = time.perf_counter() - start
print(elapsed, True)
"""


def _fresh(code: str) -> tuple[float, bool]:
    """Seconds the code reports from a fresh interpreter, and whether it imported openai."""
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    if output.returncode != 0:
        raise SystemExit(f"the import check failed:\n{output.stderr}")
    seconds, imported = output.stdout.split()
    return float(seconds), imported == "True"


def import_figures(settings: Settings) -> list[Figure]:
    url = "http://127.0.0.1:9/v1"
    times: dict[str, list[float]] = {"parley": [], "raw": [], "first": []}
    eager = False
    for round_ in range(settings.import_runs):
        order = ("parley", "raw", "first") if round_ % 2 == 0 else ("first", "raw", "parley")
        for key in order:
            code = {"parley": _IMPORT_PARLEY, "raw": _IMPORT_RAW, "first": _FIRST_CLIENT}[key]
            seconds, imported = _fresh(code.format(url=url))
            times[key].append(seconds)
            eager = eager or (key == "parley" and imported)
    parley, raw, first = (min(times[k]) for k in ("parley", "raw", "first"))
    label = f"import + build a model (best of {settings.import_runs})"
    figures = [
        Figure(label, "ms", parley, raw, parley / raw, "< 300 ms", parley < 0.3, scale=1e3),
        Figure("  ... and its first client (imports openai)", "ms", first, raw, scale=1e3),
    ]
    if eager:
        figures[0].label += " [imported openai!]"
    return figures


# -- the local model ------------------------------------------------------------------------

LOCAL_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a long story about a dragon who learns to bake bread."},
]
# parley's sampling defaults, given explicitly to both: greedy, top_p 0.9, repeat penalty 1.1.
LOCAL_SAMPLING = {"temperature": 0.0, "top_p": 0.9, "repeat_penalty": 1.1}


@dataclass
class LocalRun:
    seconds: float
    cpu: float
    """CPU seconds of the whole process (every thread) during the run."""
    tokens: int
    text: str


class LocalPair:
    """parley's `LocalChatModel` and a `Llama` of its own on the same file and settings."""

    def __init__(self, max_tokens: int) -> None:
        from llama_cpp import Llama  # noqa: PLC0415

        from parley import Msg  # noqa: PLC0415
        from parley.providers.local import LocalChatModel  # noqa: PLC0415

        self.max_tokens = max_tokens
        self.model = LocalChatModel()
        self.messages = [Msg.system(LOCAL_MESSAGES[0]["content"])]
        self.messages.append(Msg.user(LOCAL_MESSAGES[1]["content"]))
        key = self.model.key
        # As parley loads it (`parley.providers.local._engine._load`).
        self.llama = Llama(
            model_path=key.path,
            n_ctx=key.n_ctx,
            n_threads=key.n_threads,
            n_threads_batch=key.n_threads,
            flash_attn=True,  # as parley's engine loads it (see parley.providers.local._engine)
            verbose=False,
        )
        self.n_threads = key.n_threads

    async def parley(self) -> LocalRun:
        start, cpu = time.perf_counter(), time.process_time()
        stream = self.model.chat_stream(self.messages, max_tokens=self.max_tokens, **LOCAL_SAMPLING)
        final = None
        async for chunk in stream:
            final = chunk
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert final is not None
        assert final.usage is not None
        return LocalRun(seconds, cpu, final.usage.output_tokens, final.text)

    def raw(self) -> LocalRun:
        start, cpu = time.perf_counter(), time.process_time()
        chunks = self.llama.create_chat_completion(
            LOCAL_MESSAGES, stream=True, max_tokens=self.max_tokens, **LOCAL_SAMPLING
        )
        parts = []
        for chunk in chunks:
            content = chunk["choices"][0]["delta"].get("content")
            if content:
                parts.append(content)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        text = "".join(parts)
        tokens = len(self.llama.tokenize(text.encode(), add_bos=False, special=True))
        return LocalRun(seconds, cpu, tokens, text)

    def close(self) -> None:
        from parley.providers.local._engine import close_engines  # noqa: PLC0415

        self.llama.close()
        close_engines()


async def local_figures(settings: Settings) -> tuple[list[Figure], list[str]]:
    pair = LocalPair(settings.local_tokens)
    runs: dict[str, list[LocalRun]] = {"parley": [], "raw": []}
    try:
        await pair.parley()  # load and warm both
        pair.raw()
        for round_ in range(settings.local_rounds):
            for key in ("parley", "raw") if round_ % 2 == 0 else ("raw", "parley"):
                run = await pair.parley() if key == "parley" else pair.raw()
                runs[key].append(run)
    finally:
        pair.close()
    notes = []
    tokens = statistics.median(r.tokens for r in runs["parley"])
    if all(p.text == r.text for p, r in zip(runs["parley"], runs["raw"], strict=True)):
        # The same greedy text: the same tokens, counted once (parley's usage) for both.
        for run in runs["raw"]:
            run.tokens = int(tokens)
    else:
        notes.append("the local model's two contenders generated different text")
    rates = {k: [r.tokens / r.seconds for r in runs[k]] for k in runs}
    ratio = paired_ratio(rates["parley"], rates["raw"])
    cpu = {k: [r.cpu / r.tokens for r in runs[k]] for k in runs}
    label = f"local model, {tokens:.0f} tokens, {pair.n_threads} llama.cpp thread(s)"
    median = statistics.median
    rate = Figure(
        label,
        "tokens/s",
        median(rates["parley"]),
        median(rates["raw"]),
        ratio,
        "ratio >= 0.95",
        ratio >= 0.95,
    )
    # CPU time hardly depends on what else the machine runs: a check on a noisy tokens/s.
    cpu_label = "  CPU time per token (the whole process)"
    cpu_ratio = paired_ratio(cpu["parley"], cpu["raw"])
    cpu_figure = Figure(
        cpu_label, "ms", median(cpu["parley"]), median(cpu["raw"]), cpu_ratio, scale=1e3
    )
    return [rate, cpu_figure], notes


def try_local_figures(settings: Settings) -> tuple[list[Figure], list[str]]:
    """The local model's figures, or a note saying why there are none."""
    try:
        return asyncio.run(local_figures(settings))
    except ImportError as exc:  # llama-cpp-python or the GGUF package (extra `local`)
        return [], [f"skipped the local model: {exc}"]


# -- reporting ------------------------------------------------------------------------------


def _value(value: float | None, scale: float) -> str:
    if value is None:
        return "-"
    shown = value * scale
    return f"{shown:,.0f}" if shown >= 1000 else f"{shown:,.3g}"


DEFAULT_REFERENCE = "the raw `openai` SDK (AsyncOpenAI), or llama-cpp-python called directly"

# The other providers' benchmarks, each in its own module beside this one: what each compares
# with (its row labels start with the provider's name here).
PROVIDERS = {
    "anthropic": "the raw `anthropic` SDK (AsyncAnthropic.messages, on httpx2's own transport)",
    "gemini": "the raw `google-genai` SDK (client.aio.models)",
    "ollama": "the raw `ollama` SDK (AsyncClient.chat, on httpx's own transport)",
    "dashscope": "the `dashscope` SDK: AsyncClient (2.0), and [vs ...] rows as labelled",
}


def provider_rows(name: str, settings: Settings) -> list[Figure]:
    """A provider's figures from `benchmarks/models_<name>.py`, labelled with its name."""
    module = importlib.import_module(f"models_{name}")
    figures: list[Figure] = asyncio.run(module.provider_figures(settings))
    for figure in figures:
        if not figure.label.startswith(f"{name}:"):
            figure.label = f"{name}: {figure.label}"
    return figures


def report(figures: list[Figure], notes: list[str], reference: str = DEFAULT_REFERENCE) -> None:
    header = (
        f"{'figure':<52}{'unit':>9}{'parley':>10}{'reference':>11}{'parley/ref':>12}"
        f"  {'goal':<18}{'met':>4}"
    )
    print(header)
    print("-" * len(header))
    for f in figures:
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "NO")
        print(
            f"{f.label:<52}{f.unit:>9}{_value(f.parley, f.scale):>10}"
            f"{_value(f.reference, f.scale):>11}{ratio:>12}  {f.goal:<18}{met:>4}"
        )
    print()
    print(f"reference: {reference}")
    print("times: median of rounds (import: best of runs); ratios are parley's over the reference")
    for note in notes:
        print(f"note: {note}")


# -- profiling ------------------------------------------------------------------------------


def profile(server: BenchServer, settings: Settings, top: int = 25) -> None:
    async def run() -> None:
        for contender in (ParleyContender(server.url), RawSDKContender(server.url)):
            await contender.call()
            await contender.stream(settings.short)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(50):
                await contender.call()
            await contender.stream(settings.long)
            profiler.disable()
            await contender.aclose()
            print(f"\n{contender.name} profile (50 calls, one {settings.long:,}-chunk stream):")
            pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(top)

    asyncio.run(run())


# -- main -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, a shorter run")
    parser.add_argument("--skip-local", action="store_true", help="leave out the local model")
    parser.add_argument(
        "--providers",
        default=",".join(PROVIDERS),
        help="the other providers to measure, comma-separated (empty: OpenAI's only)",
    )
    parser.add_argument("--profile", action="store_true", help="profile both wire contenders")
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="add a round of the concurrent streams measured by tracemalloc (slow)",
    )
    # For the child processes of the concurrent-streams measurement.
    parser.add_argument("--burst", choices=sorted(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, default=500, help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=int, default=200, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _versions() -> str:
    from importlib import metadata  # noqa: PLC0415

    names = ("parley", "openai", "httpx2", "jiter", "llama_cpp_python")
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.burst:
        child = burst_child(args.burst, args.url, args.streams, args.chunks, trace=args.tracemalloc)
        result = asyncio.run(child)
        print(json.dumps(result))
        return 0
    settings = QUICK if args.quick else DEFAULT
    try:
        import openai  # noqa: F401, PLC0415
    except ImportError:
        raise SystemExit(
            "models.py needs the openai SDK: pip install -e '.[openai,local]'"
        ) from None
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {_versions()}\n")
    started = time.perf_counter()
    notes: list[str] = []
    with BenchServer() as server:
        figures = asyncio.run(wire_figures(server, settings))
        figures += burst_figures(server, settings, args.tracemalloc)
        if args.profile:
            profile(server, settings)
    figures += import_figures(settings)
    references = [f"openai: {DEFAULT_REFERENCE}"]
    for name in filter(None, args.providers.split(",")):
        if name not in PROVIDERS:
            raise SystemExit(f"unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
        figures += provider_rows(name, settings)
        references.append(f"{name}: {PROVIDERS[name]}")
    if not args.skip_local:
        local, local_notes = try_local_figures(settings)
        figures += local
        notes += local_notes
    notes.append(
        "peak RSS growth: VmHWM after the streams minus VmRSS before them, the mark reset "
        "first, each round in a fresh process per contender"
    )
    report(figures, notes, reference="; ".join(references))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
