"""The TTS base: whole and streamed synthesis, voices from cards, retries that skip what was
heard. A provider here renders each character to a fixed run of samples, so the audio an
input must give is known exactly."""

from __future__ import annotations

import base64
import copy
import io
import pickle
import wave
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from pydantic import BaseModel

from parley.errors import ModelConnectionError, ModelError, UserError
from parley.messages import AudioBlock
from parley.tts import (
    AudioChunk,
    PCMFormat,
    TTSModel,
    TTSParameters,
    TTSResponse,
    TTSUsage,
    pcm_format,
    read_wav,
)
from parley.tts._audio import wav_bytes, wav_file

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


# -- responses made from bytes: the block is built on first need --------------------------------


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the buffers put in base64 (anywhere) while a test runs."""
    sizes: list[int] = []
    encode = base64.b64encode

    def counting(data: bytes, altchars: bytes | None = None) -> bytes:
        sizes.append(len(data))
        return encode(data, altchars)

    monkeypatch.setattr(base64, "b64encode", counting)
    return sizes


async def test_playing_a_stream_or_a_whole_answer_puts_nothing_in_base64(
    encodings: list[int],
) -> None:
    voice = CharVoice(model="v")
    pieces = [p async for p in voice.synthesize_stream("abc")]
    assert b"".join(p.audio_bytes for p in pieces) == samples("abc")
    assert [p.media_type for p in pieces] == [FORMAT, FORMAT, FORMAT, None]
    whole = await voice.synthesize_whole("abc")
    assert read_wav(whole.audio_bytes)[0] == samples("abc")
    assert encodings == []
    # The block, when asked for, holds the same audio.
    block = pieces[0].content
    assert block is not None
    assert block.source.type == "base64"
    assert block.source.to_bytes() == samples("a")
    assert block.source.media_type == FORMAT
    assert encodings == [len(samples("a"))]
    assert pieces[0].content is block  # built once
    assert pieces[0].audio_bytes == samples("a")


def _pair() -> tuple[TTSResponse, TTSResponse]:
    """A response made from bytes, and the same response built from its block."""
    usage = TTSUsage(characters=3)
    lazy = TTSResponse.of_audio(b"\x01\x02\x03\x04", FORMAT, is_last=False, usage=usage)
    block = AudioBlock.from_bytes(b"\x01\x02\x03\x04", FORMAT)
    eager = TTSResponse(content=block, is_last=False, usage=usage, id=lazy.id)
    return lazy, eager


class _Holder(BaseModel):
    response: TTSResponse


@pytest.mark.parametrize(
    "view",
    [
        lambda r: r.model_dump(),
        lambda r: r.model_dump(exclude_unset=True)["content"],
        lambda r: r.model_dump_json(),
        lambda r: _Holder(response=r).model_dump_json(),
        lambda r: TTSResponse.model_validate_json(r.model_dump_json()).model_dump(),
        repr,
        dict,
        lambda r: pickle.loads(pickle.dumps(r)).model_dump(),
        lambda r: copy.copy(r).model_dump(),
        lambda r: copy.deepcopy(r).model_dump(),
        lambda r: r.model_copy().model_dump(),
        lambda r: (r.content, r.audio_bytes, r.media_type),
    ],
    ids=[
        "dump",
        "dump-set",
        "json",
        "nested",
        "round-trip",
        "repr",
        "iter",
        "pickle",
        "copy",
        "deepcopy",
        "model-copy",
        "fields",
    ],
)
def test_a_response_made_from_bytes_reads_as_one_built_from_its_block(
    view: Callable[[TTSResponse], object],
) -> None:
    lazy, eager = _pair()
    assert view(lazy) == view(eager)


def test_responses_compare_by_their_audio_not_by_how_they_were_made() -> None:
    lazy, eager = _pair()
    assert lazy == eager
    assert eager == lazy
    assert lazy == pickle.loads(pickle.dumps(lazy))
    other = TTSResponse.of_audio(b"\x09\x09", FORMAT, is_last=False, usage=lazy.usage)
    other.id = lazy.id
    assert lazy != other


def test_audio_assigned_after_the_response_was_made_is_what_it_holds() -> None:
    lazy, _ = _pair()
    lazy.content = AudioBlock.from_bytes(b"RIFF", "audio/wav")
    assert (lazy.audio_bytes, lazy.media_type) == (b"RIFF", "audio/wav")
    emptied, _ = _pair()
    emptied.content = None
    assert (emptied.audio_bytes, emptied.media_type) == (b"", None)
    read_first, _ = _pair()
    assert read_first.content is not None
    read_first.content = None
    assert read_first.audio_bytes == b""
    assert list(emptied.model_dump()) == list(TTSResponse.model_fields)  # `content` first


def test_a_response_is_refused_a_media_type_that_is_not_audio_when_made() -> None:
    with pytest.raises(ValueError, match="audio"):
        TTSResponse.of_audio(b"\x00\x00", "image/png", is_last=True)


@pytest.mark.parametrize("fmt", [PCMFormat(24000), PCMFormat(22050, 2)])
def test_wav_files_are_what_the_standard_library_writes(fmt: PCMFormat) -> None:
    pcm = bytes(range(256)) * 7
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(fmt.channels)
        out.setsampwidth(fmt.sample_width)
        out.setframerate(fmt.rate)
        out.writeframes(pcm)
    assert wav_bytes(pcm, fmt) == buffer.getvalue()
    assert wav_file([pcm[:100], pcm[100:]], fmt) == buffer.getvalue()
    assert read_wav(wav_bytes(pcm, fmt)) == (pcm, fmt)
