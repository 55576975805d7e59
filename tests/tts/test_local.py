"""The local voice on its real engines: Piper's "joe" voice in-process and espeak-ng."""

from __future__ import annotations

import array
import math
import threading

import pytest
from tests._requires import require_module

from parley.errors import ConfigurationError, UserError
from parley.providers.local.model import LocalCredential
from parley.providers.local.speech import LocalRealtimeTTSModel, LocalTTSModel, default_local_voice
from parley.providers.local.speech.model import split_ready
from parley.tts import PCMFormat, TTSResponse, read_wav
from parley.tts.spec import tts_model_from_spec

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(autouse=True)
def _piper() -> None:
    require_module("piper", "the extra tts-piper")


def loudness(pcm: bytes) -> float:
    """The root mean square of 16-bit samples, from 0 (silence) to 32767."""
    samples = array.array("h", pcm)
    return math.sqrt(sum(s * s for s in samples) / max(len(samples), 1))


def seconds(response: TTSResponse) -> float:
    pcm, fmt = read_wav(response.audio_bytes)
    return fmt.duration(len(pcm))


async def test_a_sentence_is_a_wav_file_of_plausible_length_and_sound(engine: str) -> None:
    voice = LocalTTSModel(model=engine)
    response = await voice.synthesize(SENTENCE)
    assert isinstance(response, TTSResponse)
    assert response.media_type == "audio/wav"
    pcm, fmt = read_wav(response.audio_bytes)
    assert fmt == PCMFormat(22050)
    # Nine words at a speaking pace of 2-4 words a second.
    assert 1.5 < fmt.duration(len(pcm)) < 6.0
    assert loudness(pcm) > 300  # speech, not silence
    assert response.usage is not None
    assert response.usage.time > 0


async def test_streamed_pieces_concatenate_to_the_whole(engine: str) -> None:
    # variation=0 makes Piper repeatable; espeak-ng always is.
    voice = LocalTTSModel(
        model=engine, parameters={"variation": 0} if engine != "espeak-ng" else {}
    )
    text = "First sentence here. And a second one, a little longer than the first."
    pieces = [piece async for piece in voice.synthesize_stream(text)]
    assert pieces[-1].is_last
    assert all(not p.is_last for p in pieces[:-1])
    assert len(pieces) >= 3  # at least two pieces of audio, then the end
    assert pieces[0].media_type == "audio/pcm;rate=22050"
    streamed = b"".join(p.audio_bytes for p in pieces)
    whole, _ = read_wav((await voice.synthesize_whole(text)).audio_bytes)
    assert streamed == whole


async def test_piper_is_repeatable_without_variation_and_varies_with_it() -> None:
    fixed = LocalTTSModel(model="piper-joe", parameters={"variation": 0})
    first = (await fixed.synthesize_whole(SENTENCE)).audio_bytes
    assert (await fixed.synthesize_whole(SENTENCE)).audio_bytes == first
    varied = LocalTTSModel(model="piper-joe", parameters={"variation": 1.0})
    assert (await varied.synthesize_whole(SENTENCE)).audio_bytes != first


async def test_speed_changes_the_length(engine: str) -> None:
    slow = LocalTTSModel(model=engine, parameters={"speed": 0.75})
    fast = LocalTTSModel(model=engine, parameters={"speed": 1.5})
    slow_s = seconds(await slow.synthesize_whole(SENTENCE))
    fast_s = seconds(await fast.synthesize_whole(SENTENCE))
    assert fast_s < slow_s * 0.75


@pytest.mark.usefixtures("espeak_ng")
async def test_espeak_voices_differ_and_unknown_ones_are_refused() -> None:
    us = await LocalTTSModel(model="espeak-ng").synthesize_whole("tomato")
    gb = await LocalTTSModel(model="espeak-ng", parameters={"voice": "en-gb"}).synthesize_whole(
        "tomato"
    )
    assert us.audio_bytes != gb.audio_bytes
    with pytest.raises(UserError, match="no voice '--help'"):
        LocalTTSModel(model="espeak-ng", parameters={"voice": "--help"})


@pytest.mark.usefixtures("espeak_ng")
async def test_text_that_looks_like_an_option_is_spoken() -> None:
    # The text goes to espeak-ng on stdin: "--version" is read aloud, not obeyed.
    response = await LocalTTSModel(model="espeak-ng").synthesize_whole("--version")
    pcm, fmt = read_wav(response.audio_bytes)
    assert fmt.duration(len(pcm)) > 0.3
    assert loudness(pcm) > 300


async def test_leaving_a_piper_stream_early_stops_its_thread() -> None:
    voice = LocalTTSModel(model="piper-joe")
    text = " ".join(f"Sentence number {n}." for n in range(40))
    stream = voice.synthesize_stream(text)
    first = await anext(stream)
    assert first.content is not None
    await stream.aclose()
    for _ in range(200):  # bounded: the thread ends after the sentence it is on
        if not any(t.name == "parley-piper" for t in threading.enumerate()):
            break
        await __import__("asyncio").sleep(0.05)
    assert not any(t.name == "parley-piper" for t in threading.enumerate())


@pytest.mark.usefixtures("espeak_ng")
def test_unknown_model_and_empty_text_are_refused() -> None:
    with pytest.raises(UserError, match=r"no local voice 'nobody'.*piper-joe, espeak-ng"):
        LocalTTSModel(model="nobody")
    with pytest.raises(UserError, match="empty"):
        LocalTTSModel(model="espeak-ng").synthesize_sync("  ")


@pytest.mark.parametrize(
    ("text", "ready", "rest"),
    [
        ("Hello there", [], "Hello there"),
        ("Hello there. How", ["Hello there. "], "How"),
        ("It costs 3.", [], "It costs 3."),  # may yet be 3.5
        ("It costs 3.5 euros! Yes? ", ["It costs 3.5 euros! ", "Yes? "], ""),
        ("Line one\nLine two", ["Line one\n"], "Line two"),
        ("a" * 70 + ", and then", ["a" * 70 + ", "], "and then"),
        ("short, clause", [], "short, clause"),
    ],
)
def test_sentences_are_cut_where_they_end(text: str, ready: list[str], rest: str) -> None:
    assert split_ready(text) == (ready, rest)


async def test_realtime_speaks_each_sentence_once_it_is_complete(engine: str) -> None:
    options = {"variation": 0} if engine != "espeak-ng" else {}
    whole = LocalTTSModel(model=engine, parameters=options)
    voice = LocalRealtimeTTSModel(model=engine, parameters=options, stream=True)
    async with voice:
        early = await voice.push("Good morning")
        assert early.content is None  # half a sentence: nothing to say yet
        await voice.push(" to you. The weather")
        heard = await voice.receive()  # the first sentence's audio, before the rest is sent
        assert heard.content is not None
        rest = await voice.synthesize(" is fine today.")
        pieces = [heard, *[p async for p in rest]]  # type: ignore[union-attr]
    assert pieces[-1].is_last
    assert pieces[-1].usage is not None
    got = b"".join(p.audio_bytes for p in pieces)
    first, _ = read_wav((await whole.synthesize_whole("Good morning to you. ")).audio_bytes)
    second, _ = read_wav((await whole.synthesize_whole("The weather is fine today.")).audio_bytes)
    assert got == first + second


@pytest.mark.usefixtures("espeak_ng")
async def test_realtime_cold_start_holds_text_until_enough_words() -> None:
    voice = LocalRealtimeTTSModel(model="espeak-ng", cold_start_words=4)
    async with voice:
        await voice.push("One. ")
        await voice.push("Two. ")
        assert voice._sent == []  # held: two words so far
        await voice.push("Three four. ")
        assert voice._sent == ["One. Two. Three four. "]
        whole = await voice.synthesize()
    assert isinstance(whole, TTSResponse)
    assert whole.content is not None


@pytest.mark.usefixtures("espeak_ng")
async def test_realtime_without_text_is_refused() -> None:
    voice = LocalRealtimeTTSModel(model="espeak-ng")
    with pytest.raises(UserError, match="nothing was pushed"):
        await voice.synthesize()
    await voice.close()


@pytest.mark.usefixtures("espeak_ng")
def test_the_default_voice_is_piper_and_specs_build_models() -> None:
    assert default_local_voice() == "piper-joe"
    model = tts_model_from_spec("local")
    assert isinstance(model, LocalTTSModel)
    assert model.model == "piper-joe"
    assert model.parameters.voice == "joe"
    realtime = tts_model_from_spec("local:espeak-ng", realtime=True, stream=True)
    assert isinstance(realtime, LocalRealtimeTTSModel)
    assert realtime.model == "espeak-ng"
    assert realtime.parameters.voice == "en-us"
    with pytest.raises(ConfigurationError, match="unknown"):
        tts_model_from_spec("nowhere:voice")
    names = [card.name for card in LocalCredential.list_tts_models()]
    assert names == ["espeak-ng", "piper-joe"]
    card = LocalCredential.list_tts_models()[1]
    assert card.realtime
    assert card.parameter_schema["properties"]["voice"]["enum"] == ["joe"]
    assert "pitch" not in card.parameter_schema["properties"]


@pytest.mark.usefixtures("espeak_ng")
async def test_a_drain_left_early_does_not_leak_into_the_next_utterance() -> None:
    voice = LocalRealtimeTTSModel(model="espeak-ng", stream=True)
    whole = LocalTTSModel(model="espeak-ng")
    await voice.push("A first long sentence that makes plenty of audio to leave behind. ")
    stream = await voice.synthesize()
    await anext(stream)  # type: ignore[arg-type]
    await stream.aclose()  # type: ignore[union-attr]
    assert not voice.connected
    second = await voice.synthesize("Second.")
    got = b"".join([p.audio_bytes async for p in second])  # type: ignore[union-attr]
    expected, _ = read_wav((await whole.synthesize_whole("Second.")).audio_bytes)
    assert got == expected
    await voice.close()
