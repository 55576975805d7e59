"""The TTS base: whole and streamed synthesis, voices from cards, retries that skip what was
heard. A provider here renders each character to a fixed run of samples, so the audio an
input must give is known exactly."""

from __future__ import annotations

import io
import wave
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from parley.errors import ModelConnectionError, ModelError, UserError
from parley.tts import AudioChunk, PCMFormat, TTSModel, TTSParameters, pcm_format, read_wav

RATE = 16000
FORMAT = f"audio/pcm;rate={RATE}"


def samples(text: str) -> bytes:
    """What the test voice says for `text`: 8 bytes per character, from the character."""
    return b"".join(bytes([ord(c) % 256]) * 8 for c in text)


class CharVoice(TTSModel):
    """Speaks a character per chunk; `breaks` drops the connection after that many chunks."""

    provider = "test"

    def __init__(self, *args: object, breaks: list[int] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.breaks = list(breaks or [])
        self.calls = 0

    async def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        self.calls += 1
        cut = self.breaks.pop(0) if self.breaks else None
        for index, char in enumerate(text):
            if cut is not None and index == cut:
                raise ModelConnectionError("reset by peer")
            yield AudioChunk(samples(char), FORMAT, input_tokens=len(text), output_tokens=index + 1)


async def test_whole_synthesis_is_a_wav_file_of_the_samples() -> None:
    voice = CharVoice(model="v")
    response = await voice.synthesize("hello")
    assert response.is_last
    assert response.media_type == "audio/wav"
    pcm, fmt = read_wav(response.audio_bytes)
    assert pcm == samples("hello")
    assert fmt == PCMFormat(RATE)
    assert response.usage is not None
    assert response.usage.output_tokens == 5
    assert response.usage.characters == 5
    with wave.open(io.BytesIO(response.audio_bytes)) as wav:
        assert wav.getnframes() == len(samples("hello")) // 2


async def test_streamed_pieces_concatenate_to_the_whole() -> None:
    voice = CharVoice(model="v", stream=True)
    stream = await voice.synthesize("abc")
    assert not isinstance(stream, type(None))
    pieces = [piece async for piece in stream]  # type: ignore[union-attr]
    assert [p.is_last for p in pieces] == [False, False, False, True]
    assert b"".join(p.audio_bytes for p in pieces) == samples("abc")
    assert pieces[-1].content is None
    assert pieces[-1].usage is not None
    assert pieces[0].media_type == FORMAT


async def test_a_stream_broken_midway_is_resumed_without_repeating_audio() -> None:
    voice = CharVoice(model="v", breaks=[2, 4], retry_delay=0.001)
    pieces = [p async for p in voice.synthesize_stream("abcdef")]
    assert b"".join(p.audio_bytes for p in pieces) == samples("abcdef")
    assert voice.calls == 3


async def test_retries_run_out() -> None:
    voice = CharVoice(model="v", breaks=[1, 1, 1], max_retries=2, retry_delay=0.001)
    with pytest.raises(ModelConnectionError, match="reset"):
        await voice.synthesize("abc")


async def test_a_compressed_stream_that_broke_after_audio_is_not_resumed() -> None:
    class Mp3Voice(CharVoice):
        async def _call_api(
            self, text: str, parameters: TTSParameters
        ) -> AsyncIterator[AudioChunk]:
            async for chunk in super()._call_api(text, parameters):
                yield AudioChunk(chunk.data, "audio/mpeg")

    voice = Mp3Voice(model="v", breaks=[2], retry_delay=0.001)
    with pytest.raises(ModelError, match="cannot be resumed"):
        await voice.synthesize("abcd")


@pytest.mark.parametrize("text", ["", "   ", None])
async def test_no_text_is_refused(text: object) -> None:
    with pytest.raises(UserError, match="text"):
        await CharVoice(model="v").synthesize(text)  # type: ignore[arg-type]


def test_the_card_s_voices_are_an_enum_and_the_first_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "v.yaml").write_text(
        "name: v\nlabel: V\nrealtime: false\nvoices: [Cherry, Ethan]\n", encoding="utf-8"
    )

    class Carded(CharVoice):
        cards_location = tmp_path

    card = Carded.list_models()[0]
    field = card.parameter_schema["properties"]["voice"]
    assert field["enum"] == ["Cherry", "Ethan"]
    assert field["default"] == "Cherry"
    assert card.output_types == ["audio/wav"]
    assert card.input_types == ["text/plain"]
    assert Carded(model="v").parameters.voice == "Cherry"
    assert Carded(model="v", parameters={"voice": "Ethan"}).parameters.voice == "Ethan"
    with pytest.raises(UserError, match=r"no voice 'Nobody'.*Cherry, Ethan"):
        Carded(model="v", parameters={"voice": "Nobody"})


def test_pcm_media_types() -> None:
    assert pcm_format("audio/pcm;rate=24000") == PCMFormat(24000)
    assert pcm_format("audio/pcm; rate=22050; channels=2") == PCMFormat(22050, 2)
    assert pcm_format("audio/wav") is None
    with pytest.raises(UserError, match="rate"):
        pcm_format("audio/pcm")


def test_a_card_with_custom_voices_suggests_its_voices_and_passes_others_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "v.yaml").write_text(
        "name: v\nvoices: [Cherry, Ethan]\ncustom_voices: true\n", encoding="utf-8"
    )

    class Cloning(CharVoice):
        cards_location = tmp_path

    field = Cloning.list_models()[0].parameter_schema["properties"]["voice"]
    assert field["examples"] == ["Cherry", "Ethan"]
    assert "enum" not in field
    assert field["default"] == "Cherry"
    assert Cloning(model="v", parameters={"voice": "my-cloned-voice"}).parameters.voice == (
        "my-cloned-voice"
    )
