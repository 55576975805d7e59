"""OpenAI speech: parley's `OpenAITTSModel` beside the raw `openai` SDK.

Against a local server that speaks `/v1/audio/speech` (this file, run with `--serve`, in a
process of its own; the loop is `_harness.RenderingServer`'s, each distinct answer rendered
once), parley and the SDK's `AsyncOpenAI.audio.speech` speak the same paragraph (about 600
characters: 6 s of 24 kHz PCM, 284 KB, sent in 4,800-byte HTTP chunks as OpenAI's server
streams them), taking turns round by round:

1. time to first audio: from the call to the first piece of audio in hand (parley's
   `synthesize_stream`; the SDK's `with_streaming_response.create(...)` and `iter_bytes()`),
   the rest of the stream then read and checked, untimed;
2. the whole stream: every piece, joined;
3. the whole as a WAV file: parley's `synthesize_whole`; the SDK's `create(...)` read whole
   and put in a WAV file with the standard library's `wave`, as a caller would to play it.

The reference is the SDK as it comes (on httpx2's own transport); the same figures are then
given against the SDK on its `DefaultAioHttpClient` (httpx2's interface on aiohttp's
connections, the transport parley's speech model sends through), which isolates what parley
adds on top of the transport. The audio is the test server's scripted voice (`speech_pcm`),
so both sides' bytes are checked before any timing.

Run: `python benchmarks/tts_openai.py [--quick]`.
"""

from __future__ import annotations

import gc
import io
import json
import statistics
import sys
import time
import wave
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from _embedding_bench import EmbeddingSettings, embedding_main
from _harness import (
    Figure,
    RenderingServer,
    ServerProcess,
    at_most,
    chunked_response,
    close_all,
    http,
    interleaved,
    time_figure,
)
from parley.providers.openai.server import speech_pcm

MODEL = "gpt-4o-mini-tts"
VOICE = "coral"
CHUNK = 4800  # bytes per HTTP chunk: 100 ms of 24 kHz 16-bit PCM
PARAGRAPH = (
    "Text to speech turns written words into sound. A good voice reads a paragraph like this "
    "one at an even pace, pausing at commas and stopping at full stops, so that a listener "
    "follows without effort. Streaming matters because a listener hears the first words "
    "while the rest are still being made: the time to the first audio, not the time to the "
    "whole answer, is what a conversation feels. The audio arrives as raw samples, sixteen "
    "bits each, twenty four thousand a second, in pieces that join into one recording. "
    "Whatever sits between the service and the speaker should add as little as it can."
)
EXPECTED = speech_pcm(PARAGRAPH)
REFERENCE = (
    "the raw `openai` SDK (AsyncOpenAI.audio.speech, response_format='pcm') as it comes, on "
    "httpx2; [vs SDK on aiohttp]: the same on its DefaultAioHttpClient, parley's transport"
)
PACKAGES = ("openai", "httpx2", "aiohttp")


def answer(text: str) -> bytes:
    """The PCM of `text`, chunked as a streaming server sends it."""
    return chunked_response("audio/pcm", _pieces(speech_pcm(text)))


def _pieces(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


class Server(RenderingServer):
    """`/v1/audio/speech` answers, each distinct one rendered once."""

    def answer(self, path: bytes, body: bytes) -> bytes:
        if path.split(b"?", 1)[0] != b"/v1/audio/speech":
            error = json.dumps({"error": {"message": f"no route {path!r}"}}).encode()
            return http("404 Not Found", "application/json", error)
        text = str(json.loads(body)["input"])
        return self.rendered((text,), lambda: answer(text))


def wav_file(pcm: bytes) -> bytes:
    """`pcm` (24 kHz, 16-bit, mono) in a WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(24000)
        out.writeframes(pcm)
    return buffer.getvalue()


class Contender(Protocol):
    name: str

    async def first_audio(self) -> tuple[float, bytes]: ...
    async def stream(self) -> bytes: ...
    async def whole(self) -> bytes: ...
    async def aclose(self) -> None: ...


class ParleyContender:
    """parley's `OpenAITTSModel`."""

    name = "parley"

    def __init__(self, url: str) -> None:
        from parley.providers.openai import OpenAICredential  # noqa: PLC0415
        from parley.providers.openai.speech import OpenAITTSModel  # noqa: PLC0415

        credential = OpenAICredential(api_key="x", base_url=url)
        self.model = OpenAITTSModel(credential, MODEL, parameters={"voice": VOICE})

    async def first_audio(self) -> tuple[float, bytes]:
        started = time.perf_counter()
        first = None
        parts = []
        async for piece in self.model.synthesize_stream(PARAGRAPH):
            if first is None:
                first = time.perf_counter() - started
            parts.append(piece.audio_bytes)
        assert first is not None
        return first, b"".join(parts)

    async def stream(self) -> bytes:
        return b"".join([p.audio_bytes async for p in self.model.synthesize_stream(PARAGRAPH)])

    async def whole(self) -> bytes:
        return (await self.model.synthesize_whole(PARAGRAPH)).audio_bytes

    async def aclose(self) -> None:
        await self.model.aclose()


class RawSDKContender:
    """`AsyncOpenAI.audio.speech`, streamed or read whole."""

    name = "raw SDK"

    def __init__(self, url: str) -> None:
        from openai import AsyncOpenAI  # noqa: PLC0415

        self.client = AsyncOpenAI(api_key="x", base_url=url, max_retries=0, **self.transport())
        self.fields: dict[str, Any] = {
            "model": MODEL,
            "voice": VOICE,
            "input": PARAGRAPH,
            "response_format": "pcm",
        }

    async def first_audio(self) -> tuple[float, bytes]:
        started = time.perf_counter()
        first = None
        parts = []
        speech = self.client.audio.speech.with_streaming_response
        async with speech.create(**self.fields) as response:
            async for data in response.iter_bytes():
                if first is None:
                    first = time.perf_counter() - started
                parts.append(data)
        assert first is not None
        return first, b"".join(parts)

    async def stream(self) -> bytes:
        speech = self.client.audio.speech.with_streaming_response
        async with speech.create(**self.fields) as response:
            return b"".join([data async for data in response.iter_bytes()])

    async def whole(self) -> bytes:
        response = await self.client.audio.speech.create(**self.fields)
        return wav_file(response.content)

    def transport(self) -> dict[str, Any]:
        """The client's HTTP client: the SDK's default (httpx2's own transport)."""
        return {}

    async def aclose(self) -> None:
        await self.client.close()


class AiohttpSDKContender(RawSDKContender):
    """The same calls on the SDK's `DefaultAioHttpClient`, the transport parley gives it:
    the SDK's own per-piece work on parley's transport."""

    def transport(self) -> dict[str, Any]:
        from openai import DefaultAioHttpClient  # noqa: PLC0415

        return {"http_client": DefaultAioHttpClient()}


async def check(pair: Sequence[Contender]) -> None:
    """Both sides give the expected audio, every way, before anything is timed."""
    for contender in pair:
        _, first_audio = await contender.first_audio()
        streamed = await contender.stream()
        whole = await contender.whole()
        if first_audio != EXPECTED or streamed != EXPECTED or whole != wav_file(EXPECTED):
            raise SystemExit(f"{contender.name} gave the wrong audio")


async def first_audio_runs(
    pair: Sequence[Contender], rounds: int, calls: int
) -> dict[str, list[float]]:
    """Each round's median time to first audio, per contender, the first to go alternating."""
    runs: dict[str, list[float]] = {c.name: [] for c in pair}
    for round_ in range(rounds):
        for contender in pair if round_ % 2 == 0 else list(reversed(pair)):
            gc.collect()
            times = [(await contender.first_audio())[0] for _ in range(calls)]
            runs[contender.name].append(statistics.median(times))
    return runs


async def provider_figures(settings: EmbeddingSettings) -> list[Figure]:
    """Time to first audio, the whole stream, the whole as WAV: parley beside the SDK as it
    comes, then beside the SDK on aiohttp."""
    with ServerProcess(__file__, "--serve", path="/v1") as server:
        url = server.url()
        rows = await figures(url, settings, RawSDKContender)
        return rows + await figures(url, settings, AiohttpSDKContender, " [vs SDK on aiohttp]")


async def figures(
    url: str, settings: EmbeddingSettings, reference: type[RawSDKContender], suffix: str = ""
) -> list[Figure]:
    """The rows, against the server at `url`, beside `reference`."""
    pair: list[Contender] = [ParleyContender(url), reference(url)]
    try:
        await check(pair)

        def job(method: str) -> Callable[[Any], Callable[[], Awaitable[Any]]]:
            return lambda c: getattr(c, method)

        rounds, calls = settings.rounds, settings.calls_per_round
        rows = [
            time_figure(
                "openai tts: time to first audio" + suffix,
                "µs",
                1e6,
                await first_audio_runs(pair, rounds, calls),
            ),
            time_figure(
                f"openai tts: whole stream, {len(EXPECTED) // 1000} KB" + suffix,
                "µs/call",
                1e6,
                await interleaved(pair, job("stream"), rounds, calls),
            ),
            time_figure(
                "openai tts: whole as WAV" + suffix,
                "µs/call",
                1e6,
                await interleaved(pair, job("whole"), rounds, calls),
            ),
        ]
    finally:
        await close_all(pair)
    return at_most(rows, 1.0)


if __name__ == "__main__":
    sys.exit(embedding_main(__doc__, Server, provider_figures, PACKAGES, REFERENCE))
