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
import functools
import gc
import importlib
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _chat_bench import (
    DEFAULT,
    PROVIDERS,
    QUICK,
    TOOL,
    URL,
    ParleyChat,
    PerScenario,
    Settings,
    WireContender,
    dict_messages,
    expected_text,
    pair_figures,
)
from _harness import (
    Figure,
    ServerProcess,
    child_json,
    paired_ratio,
    print_header,
    print_profile,
    report,
)

HERE = Path(__file__).resolve().parent
SERVER_SCRIPT = HERE / "_openai_bench_server.py"
MODEL = "gpt-4o-mini"

# -- contenders on the OpenAI wire format ---------------------------------------------------


class ParleyContender(ParleyChat):
    """parley's `OpenAIChatModel`, one per scenario URL, fed prepared `Msg`s."""

    def __init__(self, url: URL, timeout: float | None = None) -> None:
        super().__init__(url)
        self._timeout = {"timeout": timeout} if timeout else {}

    def connect(self, url: str) -> Any:
        from parley.providers.openai import OpenAIChatModel, OpenAICredential  # noqa: PLC0415

        return OpenAIChatModel(OpenAICredential(api_key="x", base_url=url), MODEL, **self._timeout)

    async def keep(self, chunks: int) -> list[Any]:
        return [chunk async for chunk in self.client(chunks).chat_stream(self.messages)]

    def kept_text(self, kept: list[Any]) -> str:
        assert kept[-1].is_last
        return "".join(chunk.text for chunk in kept[:-1])


class RawSDKContender(PerScenario):
    """The `openai` SDK's `AsyncOpenAI`, one client per scenario URL, fed prepared dicts."""

    name = "raw SDK"

    def __init__(self, url: URL, timeout: float | None = None) -> None:
        super().__init__(url)
        self._timeout = {"timeout": timeout} if timeout else {}
        self.messages = dict_messages()

    def connect(self, url: str) -> Any:
        from openai import AsyncOpenAI  # noqa: PLC0415

        return AsyncOpenAI(api_key="x", base_url=url, **self._timeout)

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

    async def _events(self, chunks: int) -> Any:
        # The same request as parley's: usage in the last chunk.
        return await self.client(chunks).chat.completions.create(
            model=MODEL,
            messages=self.messages,
            stream=True,
            stream_options={"include_usage": True},
        )

    async def stream(self, chunks: int) -> str:
        parts = [
            chunk.choices[0].delta.content
            async for chunk in await self._events(chunks)
            if chunk.choices and chunk.choices[0].delta.content
        ]
        return "".join(parts)

    async def keep(self, chunks: int) -> list[Any]:
        return [chunk async for chunk in await self._events(chunks)]

    def kept_text(self, kept: list[Any]) -> str:
        return "".join(
            chunk.choices[0].delta.content
            for chunk in kept
            if chunk.choices and chunk.choices[0].delta.content
        )


CONTENDERS: dict[str, type[ParleyContender] | type[RawSDKContender]] = {
    "parley": ParleyContender,
    "raw": RawSDKContender,
}


async def wire_figures(server: ServerProcess, settings: Settings) -> list[Figure]:
    """OpenAI's wire figures: calls, streams dropped and kept, what a kept chunk holds."""
    pair = [ParleyContender(server.url), RawSDKContender(server.url)]
    return await pair_figures(
        pair, settings, lambda pair: held_figures(pair, settings.short), keep=True
    )


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


def run_burst(server: ServerProcess, key: str, settings: Settings, trace: bool) -> dict[str, Any]:
    url = server.url(settings.stream_chunks)
    command = [sys.executable, __file__, "--burst", key, "--url", url]
    command += ["--streams", str(settings.streams), "--chunks", str(settings.stream_chunks)]
    command += ["--tracemalloc"] if trace else []
    result: dict[str, Any] = child_json(command, f"the {key} burst failed")
    if result["bad"]:
        raise SystemExit(f"{key}: {result['bad']} of the concurrent streams came back wrong")
    return result


def burst_runs(
    server: ServerProcess, settings: Settings, rounds: int, trace: bool
) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"parley": [], "raw": []}
    for round_ in range(rounds):
        for key in ("parley", "raw") if round_ % 2 == 0 else ("raw", "parley"):
            runs[key].append(run_burst(server, key, settings, trace))
    return runs


def burst_figures(server: ServerProcess, settings: Settings, trace: bool) -> list[Figure]:
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


DEFAULT_REFERENCE = "the raw `openai` SDK (AsyncOpenAI), or llama-cpp-python called directly"


def provider_rows(name: str, settings: Settings) -> list[Figure]:
    """A provider's figures from `benchmarks/models_<name>.py`, labelled with its name."""
    module = importlib.import_module(f"models_{name}")
    figures: list[Figure] = asyncio.run(module.provider_figures(settings))
    for figure in figures:
        if not figure.label.startswith(f"{name}:"):
            figure.label = f"{name}: {figure.label}"
    return figures


# -- profiling ------------------------------------------------------------------------------


async def _calls_then_stream(contender: Any, calls: int, chunks: int) -> None:
    for _ in range(calls):
        await contender.call()
    await contender.stream(chunks)


def profile(server: ServerProcess, settings: Settings, top: int = 25) -> None:
    async def run() -> None:
        for contender in (ParleyContender(server.url), RawSDKContender(server.url)):
            await _calls_then_stream(contender, 1, settings.short)  # warm
            job = functools.partial(_calls_then_stream, contender, 50, settings.long)
            title = f"\n{contender.name} profile (50 calls, one {settings.long:,}-chunk stream):"
            await print_profile(job, title, top)
            await contender.aclose()

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
    print_header(("parley", "openai", "httpx2", "jiter", "llama_cpp_python"))
    started = time.perf_counter()
    notes: list[str] = []
    with ServerProcess(SERVER_SCRIPT, path="/v1") as server:
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
        references.append(f"{name}: {PROVIDERS[name].reference}")
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
