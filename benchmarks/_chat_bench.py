"""What the chat benchmarks share (`models.py`, OpenAI's, and `models_<provider>.py`).

- **The conversation** every contender sends (`SYSTEM`, `CONVERSATION`, the `TOOL` it may
  call), and what the servers answer (`_harness.TEXT`, `_harness.word`): each contender's
  answers are checked against it before anything is timed (`check_answers`).
- **The contenders**: `ParleyChat`, parley's chat model of a provider, and `PerScenario`, the
  base of a raw SDK's; each keeps one client per scenario (a base URL whose path prefix says
  how many chunks a stream has: `ServerProcess.url`), made on first use.
- **The rounds** (`wire_rounds`): a non-streaming call, a tool call, a short and a long stream
  and the long one's linearity, with each chunk dropped or (`keep`) kept; the contenders take
  turns, round by round.
- **The providers' table** (`PROVIDERS`): what each `models_<provider>.py` compares parley
  with; `served_figures` and `main` run such a file against its own server (the file run
  with `--serve`).
"""

from __future__ import annotations

import functools
import gc
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from _harness import (
    WORDS,
    Figure,
    RenderingServer,
    ServerProcess,
    at_most,
    close_all,
    interleaved,
    paired_ratio,
    provider_main,
    time_figure,
    timed_cpu,
    word,
)

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
URL = Callable[[int | None], str]
"""A scenario's base URL, given the chunks of its streams (`ServerProcess.url`)."""


def expected_text(chunks: int) -> str:
    return "".join(word(i) for i in range(chunks))


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


# -- contenders ------------------------------------------------------------------------------


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


class PerScenario:
    """A contender's clients (or models), one per scenario URL, made on first use."""

    name: str

    def __init__(self, url: URL) -> None:
        self._url = url
        self._clients: dict[int | None, Any] = {}

    def client(self, chunks: int | None = None) -> Any:
        """The client for streams of `chunks` chunks (None: the server's default)."""
        client = self._clients.get(chunks)
        if client is None:
            client = self._clients[chunks] = self.connect(self._url(chunks))
        return client

    def connect(self, url: str) -> Any:
        """A new client (or model) for the scenario at `url`."""
        raise NotImplementedError

    async def disconnect(self, client: Any) -> None:
        await client.close()

    async def aclose(self) -> None:
        for client in self._clients.values():
            await self.disconnect(client)


class ParleyChat(PerScenario):
    """parley's chat model of a provider, one per scenario URL, fed prepared `Msg`s; a
    provider's subclass makes the model (`connect`)."""

    name = "parley"

    def __init__(self, url: URL) -> None:
        from parley import Msg  # noqa: PLC0415

        super().__init__(url)
        self.messages = [Msg.system(SYSTEM)] + [
            Msg.user(text) if role == "user" else Msg.assistant(text) for role, text in CONVERSATION
        ]

    async def disconnect(self, client: Any) -> None:
        await client.aclose()

    async def call(self) -> str:
        response = await self.client().chat(self.messages)
        return str(response.text)

    async def tool_call(self) -> dict[str, Any]:
        response = await self.client().chat(self.messages, tools=[TOOL])
        return dict(response.tool_calls[0].input)

    async def stream(self, chunks: int) -> str:
        final = None
        async for chunk in self.client(chunks).chat_stream(self.messages):
            final = chunk
        assert final is not None
        assert final.is_last
        return str(final.text)


def dict_messages(*, system: bool = True) -> list[dict[str, Any]]:
    """The conversation as the dicts raw SDKs take, the system prompt first (`system`)."""
    head = [{"role": "system", "content": SYSTEM}] if system else []
    return head + [{"role": role, "content": text} for role, text in CONVERSATION]


async def check_answers(contender: Any, short: int, *, kept: bool = False) -> None:
    """Fail loudly if a contender's answers are not what the server sent (with `kept`, its
    kept stream's too)."""
    text = await contender.call()
    arguments = await contender.tool_call()
    streamed = await contender.stream(short)
    problems = []
    if not text.startswith(" ".join(WORDS)):
        problems.append(f"call: {text[:60]!r}")
    if arguments != TOOL_ARGUMENTS:
        problems.append(f"tool call: {arguments!r}")
    if streamed != expected_text(short):
        problems.append(f"stream: {len(streamed)} characters, {streamed[:60]!r}")
    if kept and (kept_text := await stream_kept(contender, short)) != expected_text(short):
        problems.append(f"kept stream: {len(kept_text)} characters, {kept_text[:60]!r}")
    if problems:
        raise SystemExit(f"{contender.name} answered wrongly: {'; '.join(problems)}")


async def pair_figures(
    pair: Sequence[Any],
    settings: Settings,
    more: Callable[[Sequence[Any]], Awaitable[list[Figure]]] | None = None,
    **labels: Any,
) -> list[Figure]:
    """Check both contenders, then their `wire_rounds` (`labels`: its keywords) and what
    `more` adds; close them at the end."""
    try:
        for contender in pair:
            await check_answers(contender, settings.short, kept=labels.get("keep", False))
            await contender.stream(settings.long)  # warm the long scenario's connection
        figures = await wire_rounds(pair, settings, **labels)
        return figures + (await more(pair) if more else [])
    finally:
        await close_all(pair)


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
    call_figures = at_most(
        [
            time_figure(label("non-streaming call"), "µs/call", 1e6, calls),
            time_figure(label(tool_call), "µs/call", 1e6, tools),
        ],
        1.0,
    )
    stream_figures = at_most(
        [
            time_figure(label(f"{s.short:,}-chunk stream"), "ms", 1e3, short),
            time_figure(label(f"{s.long:,}-chunk stream"), "ms", 1e3, long),
        ],
        0.5,
    )
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
                    seconds = await timed_cpu(functools.partial(arm.stream, chunks), times)
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


# -- the other providers ----------------------------------------------------------------


@dataclass(frozen=True)
class Provider:
    """Another provider's benchmark (`models_<name>.py`, beside this file): what it compares
    parley with, and how it runs."""

    reference: str
    packages: tuple[str, ...]
    """The distributions whose versions head its output (the SDK second)."""
    sdk: str
    """The module its run needs."""
    tool_call: str = "tool-call response (non-streaming)"
    """The label of its tool-call row."""
    path: str = ""
    """The API's root on its server (`ServerProcess`'s `path`)."""


# The other providers' benchmarks, each in its own module beside this one (its row labels
# start with the provider's name here).
PROVIDERS = {
    "anthropic": Provider(
        "the raw `anthropic` SDK (AsyncAnthropic.messages, on httpx2's own transport)",
        ("parley", "anthropic", "httpx2", "aiohttp", "jiter"),
        "anthropic",
        tool_call="tool-use response (non-streaming)",
    ),
    "gemini": Provider(
        "the raw `google-genai` SDK (client.aio.models)",
        ("parley", "google-genai", "httpx2", "aiohttp", "jiter"),
        "google.genai",
        tool_call="function-call response (non-streaming)",
        path="/",  # the SDK adds `v1/models/...`
    ),
    "ollama": Provider(
        "the raw `ollama` SDK (AsyncClient.chat, on httpx's own transport)",
        ("parley", "ollama", "httpx", "aiohttp", "pydantic_core"),
        "ollama",
    ),
    "dashscope": Provider(
        "the `dashscope` SDK: AsyncClient (2.0), and [vs ...] rows as labelled",
        ("dashscope", "httpx", "aiohttp"),
        "dashscope",
        tool_call="tool-call response",
        path="/api/v1",
    ),
}


def _provider(script: str) -> tuple[str, Provider]:
    """The name and entry of `models_<name>.py`."""
    name = Path(script).stem.removeprefix("models_")
    return name, PROVIDERS[name]


async def served_figures(
    script: str, parley: Callable[[URL], Any], raw: Callable[[URL], Any], settings: Settings
) -> list[Figure]:
    """A provider's rows (`models_<name>.py`, `script`): `parley` against `raw`, each made for
    the scenarios of the file's server (the file run with `--serve`)."""
    name, provider = _provider(script)
    with ServerProcess(script, "--serve", path=provider.path) as server:
        pair = [parley(server.url), raw(server.url)]
        return await pair_figures(pair, settings, prefix=f"{name}: ", tool_call=provider.tool_call)


def main(
    script: str,
    doc: str,
    server: Callable[[], RenderingServer] | None,
    figures_of: Callable[[Settings], Awaitable[list[Figure]]],
    reference: str | None = None,
) -> int:
    """The `main` of `models_<name>.py` (`script`): its rows on their own."""
    name, provider = _provider(script)
    sdk = provider.packages[1] if provider.packages[0] == "parley" else provider.packages[0]
    return provider_main(
        None,
        doc=doc,
        settings=(DEFAULT, QUICK),
        server=server,
        figures_of=figures_of,
        packages=provider.packages,
        reference=reference or provider.reference,
        needs=(provider.sdk, f"models_{name}.py needs {sdk}: pip install -e '.[{name}]'"),
    )
