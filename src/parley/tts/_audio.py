"""Audio formats the TTS layer passes around: raw PCM named by its media type, and WAV.

Streamed speech travels as raw 16-bit little-endian PCM, named `audio/pcm;rate=24000` (and
`;channels=2` when not mono), because pieces of PCM concatenate into longer PCM; a whole
answer is handed out as `audio/wav`, which every player opens.
"""

from __future__ import annotations

import io
import re
import struct
import wave
from collections.abc import Iterable
from dataclasses import dataclass

from parley.errors import UserError

__all__ = [
    "PCMFormat",
    "pcm_format",
    "pcm_media_type",
    "read_wav",
    "wav_bytes",
    "wav_file",
    "wav_header",
]

_PCM = re.compile(r"^audio/(?:pcm|l16)\s*(?P<params>(?:;.*)?)$", re.IGNORECASE)
_PARAM = re.compile(r";\s*(?P<name>[a-z]+)\s*=\s*(?P<value>\d+)", re.IGNORECASE)
# RIFF's header of a PCM WAV file: little-endian, 44 bytes.
_WAV_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")


@dataclass(frozen=True)
class PCMFormat:
    """Raw PCM's layout: samples per second, channels, bytes per sample."""

    rate: int
    channels: int = 1
    sample_width: int = 2

    @property
    def media_type(self) -> str:
        """How a block of this PCM names its format (`audio/pcm;rate=24000`)."""
        return pcm_media_type(self.rate, self.channels)

    @property
    def frame_size(self) -> int:
        """Bytes per sample frame (all channels)."""
        return self.channels * self.sample_width

    def duration(self, size: int) -> float:
        """Seconds of sound in `size` bytes."""
        return size / (self.rate * self.frame_size)


def pcm_media_type(rate: int, channels: int = 1) -> str:
    """The media type of 16-bit PCM at `rate` Hz: `audio/pcm;rate=24000`."""
    return f"audio/pcm;rate={rate}" + (f";channels={channels}" if channels != 1 else "")


def pcm_format(media_type: str) -> PCMFormat | None:
    """The PCM layout a media type names, or None when it is not raw PCM.

    Raises:
        UserError: Raw PCM without a rate (it cannot be played without one).
    """
    match = _PCM.match(media_type.strip())
    if match is None:
        return None
    params = {m["name"].lower(): int(m["value"]) for m in _PARAM.finditer(match["params"])}
    if "rate" not in params:
        raise UserError(f"{media_type!r} names raw PCM without its rate (audio/pcm;rate=24000)")
    return PCMFormat(rate=params["rate"], channels=params.get("channels", 1))


def wav_header(size: int, fmt: PCMFormat) -> bytes:
    """The 44-byte header of a WAV file holding `size` bytes of `fmt`'s PCM.

    RIFF's canonical layout (a `fmt ` chunk for integer PCM, then the `data` chunk), as the
    standard library's `wave` writes it.
    """
    return _WAV_HEADER.pack(
        b"RIFF",
        36 + size,
        b"WAVE",
        b"fmt ",
        16,  # the size of the `fmt ` chunk's body
        1,  # WAVE_FORMAT_PCM
        fmt.channels,
        fmt.rate,
        fmt.rate * fmt.frame_size,  # bytes per second
        fmt.frame_size,  # block align
        fmt.sample_width * 8,
        b"data",
        size,
    )


def wav_file(pcm: Iterable[bytes], fmt: PCMFormat) -> bytes:
    """The pieces of `pcm`, in order, in one WAV file.

    The header and the pieces are joined in one copy: `wave` writes the samples into a
    buffer and copies the buffer out again (twice the copying, for a whole answer of a
    megabyte or more).
    """
    parts = list(pcm)
    size = sum(len(part) for part in parts)
    return b"".join([wav_header(size, fmt), *parts])


def wav_bytes(pcm: bytes, fmt: PCMFormat) -> bytes:
    """`pcm` in a WAV file."""
    return wav_file((pcm,), fmt)


def read_wav(data: bytes) -> tuple[bytes, PCMFormat]:
    """The PCM samples of a WAV file and their layout.

    Raises:
        UserError: `data` is not a PCM WAV file.
    """
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            fmt = PCMFormat(wav.getframerate(), wav.getnchannels(), wav.getsampwidth())
            return wav.readframes(wav.getnframes()), fmt
    except (wave.Error, EOFError) as exc:
        raise UserError(f"not a PCM WAV file: {exc}") from None
