"""Speaking an agent's answer: how soon the first audio comes, and what parley adds.

With the local voice (Piper's `piper-joe`, variation 0, so every round renders the same audio)
and a `ScriptedModel` streaming a 120-word answer at a writing pace (`--delay`, 30 ms per
delta of about one word, 6 characters):

(a) time to first audio through `TTSMiddleware`: the realtime voice (`LocalRealtimeTTSModel`,
    each sentence spoken once complete) against the plain one (`LocalTTSModel`, the text
    block spoken once the answer has ended); the ratio plain / realtime;
(b) the engines' real-time factor (seconds of synthesis per second of audio) for
    `piper-joe` and `espeak-ng`, on the whole answer;
(c) the middleware's own cost: time to first audio for an answer already written (one text
    delta, no delay) through an agent and the middleware, against the engine called directly
    (`synthesize_stream(text)`, first piece); the ratio middleware / direct.

Rounds are interleaved (`--rounds`, the median is shown). Run:
`python benchmarks/tts.py [--rounds 5] [--delay 0.03]`. About a minute on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time

from parley.agents import Agent, AudioDelta
from parley.agents.speech import TTSMiddleware
from parley.models.testing import ScriptedModel
from parley.providers.local.speech import LocalRealtimeTTSModel, LocalTTSModel
from parley.tts import read_wav
from parley.tts.base import TTSModel

ANSWER = (
    "Paris is the capital of France and its largest city. It sits on the river Seine, in the "
    "north of the country. About two million people live in the city itself, and more than "
    "twelve million in the wider region around it. The city is known for its museums, such as "
    "the Louvre and the Musee d'Orsay, and for buildings like the Eiffel Tower and Notre Dame. "
    "It has been a centre of art, science and politics for centuries. Visitors come for the "
    "food, the cafes and the long walks along the river. The metro makes it easy to get "
    "around, and most sights are close to a station. Spring and autumn are the best seasons."
)
WORD_CHARS = 6  # one delta of about a word (ScriptedModel cuts by characters)
FIXED = {"variation": 0}


async def first_audio(voice: TTSModel, *, delay: float, chunk: int) -> float:
    """Seconds from the question to the first audio event of an agent's spoken answer."""
    model = ScriptedModel([ANSWER], stream=True, chunk_size=chunk, chunk_delay=delay)
    agent = Agent("bench", model, middleware=[TTSMiddleware(voice)])
    started = time.perf_counter()
    run = agent.stream("Tell me about Paris.")
    try:
        async for event in run:
            if isinstance(event, AudioDelta):
                return time.perf_counter() - started
    finally:
        await run.aclose()
    raise RuntimeError("no audio came")


async def direct_first_audio(voice: TTSModel) -> float:
    """Seconds to the engine's first piece of audio for the whole answer."""
    started = time.perf_counter()
    pieces = voice.synthesize_stream(ANSWER)
    try:
        async for piece in pieces:
            if piece.content is not None:
                return time.perf_counter() - started
    finally:
        await pieces.aclose()
    raise RuntimeError("no audio came")


async def real_time_factor(voice: TTSModel) -> tuple[float, float]:
    """(synthesis seconds / audio seconds, audio seconds) for the whole answer."""
    started = time.perf_counter()
    response = await voice.synthesize_whole(ANSWER)
    took = time.perf_counter() - started
    pcm, fmt = read_wav(response.audio_bytes)
    return took / fmt.duration(len(pcm)), fmt.duration(len(pcm))


async def main(rounds: int, delay: float) -> None:
    plain = LocalTTSModel(model="piper-joe", parameters=FIXED)
    realtime = LocalRealtimeTTSModel(model="piper-joe", parameters=FIXED)
    espeak = LocalTTSModel(model="espeak-ng")
    await plain.synthesize_whole("Warm up.")  # the voice's load is not what is measured
    print(f"answer: {len(ANSWER.split())} words; {delay * 1000:.0f} ms per ~word delta")

    rt: list[float] = []
    pl: list[float] = []
    for _ in range(rounds):  # interleaved: a slow moment hits both
        rt.append(await first_audio(realtime, delay=delay, chunk=WORD_CHARS))
        pl.append(await first_audio(plain, delay=delay, chunk=WORD_CHARS))
    rt_s, pl_s = statistics.median(rt), statistics.median(pl)

    factors = {}
    for name, voice in (("piper-joe", plain), ("espeak-ng", espeak)):
        runs = [await real_time_factor(voice) for _ in range(rounds)]
        factors[name] = (statistics.median(r[0] for r in runs), runs[0][1])

    through: list[float] = []
    direct: list[float] = []
    for _ in range(rounds):
        through.append(await first_audio(plain, delay=0.0, chunk=len(ANSWER)))
        direct.append(await direct_first_audio(plain))
    th_s, di_s = statistics.median(through), statistics.median(direct)

    rows = [
        ("(a) first audio, realtime voice", f"{rt_s * 1000:.0f} ms", ""),
        ("(a) first audio, plain voice", f"{pl_s * 1000:.0f} ms", f"{pl_s / rt_s:.1f}x realtime"),
    ]
    for name, (factor, seconds) in factors.items():
        rows.append((f"(b) real-time factor, {name}", f"{factor:.3f}", f"{seconds:.1f} s audio"))
    rows += [
        ("(c) first audio, engine direct", f"{di_s * 1000:.0f} ms", ""),
        ("(c) first audio, via middleware", f"{th_s * 1000:.0f} ms", f"{th_s / di_s:.2f}x direct"),
    ]
    # Piper's threads finish the sentence they are on: let them, so the process exits cleanly.
    while any(t.name == "parley-piper" for t in threading.enumerate()):
        await asyncio.sleep(0.05)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'median':>9}  ratio")
    for label, value, ratio in rows:
        print(f"{label:<{width}}  {value:>9}  {ratio}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.03, help="seconds per text delta")
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.delay))
