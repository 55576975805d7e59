"""What the scripted OpenAI server answers to `POST /v1/audio/speech`: `Speech`, and its audio.

The scripted voice says each character as a fixed run of samples (`speech_pcm`): a square
wave whose period comes from the character, 10 ms long at normal speed (fewer samples when
faster), so a test computes the exact audio an input must give. The request is checked as
OpenAI checks it (API reference, "Create speech"): `model`, `input` (at most 4096
characters) and `voice` required, `voice` one of the model's built-in voices, `speed` 0.25
to 4, `response_format` one of mp3, opus, aac, flac, wav, pcm (OpenAI's default: mp3).
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_INPUT",
    "RATE",
    "VOICES",
    "Speech",
    "audio_file",
    "speech_error",
    "speech_pcm",
]

RATE = 24000
"""Samples per second of the speech endpoint's `pcm` (16-bit little-endian, mono)."""

MAX_INPUT = 4096
"""The most characters one request's `input` may hold."""

_OLD_VOICES = ("alloy", "ash", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer")
VOICES: dict[str, tuple[str, ...]] = {
    "tts-1": _OLD_VOICES,
    "tts-1-hd": _OLD_VOICES,
    "gpt-4o-mini-tts": (*_OLD_VOICES, "ballad", "verse", "marin", "cedar"),
}
"""The built-in voices of each model (another model name takes gpt-4o-mini-tts's)."""

_FORMATS = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
# What stands for an encoded file: the format's own first bytes, then the PCM.
_MAGIC = {"mp3": b"ID3", "opus": b"OggS", "aac": b"\xff\xf1", "flac": b"fLaC"}

_SAMPLES_PER_CHARACTER = 240  # 10 ms at 24 kHz
_AMPLITUDE = 8000


def speech_pcm(text: str, speed: float = 1.0) -> bytes:
    """The scripted voice's 16-bit PCM for `text` at `speed`: a short tone per character."""
    length = max(2, round(_SAMPLES_PER_CHARACTER / speed))
    out = bytearray()
    for char in text:
        half = 4 + ord(char) % 29  # half a period, in samples
        for i in range(length):
            value = _AMPLITUDE if (i // half) % 2 == 0 else -_AMPLITUDE
            out += value.to_bytes(2, "little", signed=True)
    return bytes(out)


def audio_file(pcm: bytes, response_format: str) -> tuple[bytes, str]:
    """The answer's bytes and content type in `response_format`.

    `pcm` is the samples; `wav` a real WAV file of them; the compressed formats, which a test
    server does not encode, are stood for by the format's first bytes and the samples.
    """
    if response_format == "pcm":
        return pcm, _FORMATS["pcm"]
    if response_format == "wav":
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(RATE)
            out.writeframes(pcm)
        return buffer.getvalue(), _FORMATS["wav"]
    return _MAGIC[response_format] + pcm, _FORMATS[response_format]


def _invalid(message: str, param: str, code: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def speech_error(body: Any) -> dict[str, Any] | None:
    """OpenAI's 400 error body for a bad speech request, or None when it is good."""
    if not isinstance(body, dict):
        return _invalid("The request body is not a JSON object.", "", "invalid_json")
    for name in ("model", "input", "voice"):
        if name not in body:
            message = f"Missing required parameter: '{name}'."
            return _invalid(message, name, "missing_required_parameter")
    text = body["input"]
    if not isinstance(text, str):
        return _invalid("Invalid type for 'input': expected a string.", "input", "invalid_type")
    if len(text) > MAX_INPUT:
        message = (
            f"Invalid 'input': string too long. Expected a string with maximum length "
            f"{MAX_INPUT}, but got a string with length {len(text)} instead."
        )
        return _invalid(message, "input", "string_above_max_length")
    return _voice_error(body) or _option_error(body)


def _voice_error(body: dict[str, Any]) -> dict[str, Any] | None:
    voices = VOICES.get(str(body["model"]), VOICES["gpt-4o-mini-tts"])
    voice = body["voice"]
    if isinstance(voice, dict) and isinstance(voice.get("id"), str):
        return None  # a custom voice, by id
    if voice not in voices:
        supported = ", ".join(f"'{v}'" for v in voices)
        message = f"Invalid value: '{voice}'. Supported values are: {supported}."
        return _invalid(message, "voice", "invalid_value")
    return None


def _option_error(body: dict[str, Any]) -> dict[str, Any] | None:
    speed = body.get("speed", 1.0)
    if not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
        message = f"Invalid 'speed': expected a number from 0.25 to 4.0, got {speed!r}."
        return _invalid(message, "speed", "invalid_value")
    response_format = body.get("response_format", "mp3")
    if response_format not in _FORMATS:
        supported = ", ".join(f"'{f}'" for f in _FORMATS)
        message = f"Invalid value: '{response_format}'. Supported values are: {supported}."
        return _invalid(message, "response_format", "invalid_value")
    if body.get("stream_format", "audio") != "audio":
        # Server-sent audio deltas are not scripted here.
        return _invalid("This test server streams raw audio only.", "stream_format", "test")
    return None


@dataclass
class Speech:
    """One scripted speech answer: the request's input in the scripted voice, streamed.

    The audio goes out with chunked transfer encoding, `chunk_size` bytes an HTTP chunk.

    Args:
        chunk_size: Bytes per chunk (default 4800: 100 ms of PCM).
        delay: Seconds before answering at all (a slow start).
        chunk_delay: Seconds before each chunk (a slow voice).
        cut_after: Drop the connection after this many bytes of audio (a stream cut
            mid-body).
        reset: Cut with a reset (RST) rather than a clean close.
    """

    chunk_size: int = 4800
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut_after: int | None = None
    reset: bool = True
    finished_at: float | None = field(default=None, compare=False)
    """When the server sent the answer's last byte (`time.perf_counter()`), once it has."""

    def audio(self, body: dict[str, Any]) -> tuple[bytes, str]:
        """The bytes and content type answering a (valid) request body."""
        pcm = speech_pcm(body["input"], float(body.get("speed", 1.0)))
        return audio_file(pcm, str(body.get("response_format", "mp3")))

    def chunks(self, data: bytes) -> list[bytes]:
        """`data` in the chunks to send, cut short at `cut_after`."""
        if self.cut_after is not None:
            data = data[: self.cut_after]
        size = max(1, self.chunk_size)
        return [data[i : i + size] for i in range(0, len(data), size)]
