"""The test voice of the speech servers: each character a short sine tone.

The audio any text must give is known exactly, however the text was cut into pieces.

A character lasts 20 ms (480 samples at 24 kHz, 16-bit little-endian mono, 960 bytes), one
audio token at DashScope's 50 tokens a second; its pitch follows its code point.
"""

from __future__ import annotations

import functools
import math
import struct

__all__ = ["BYTES_PER_CHAR", "SAMPLES_PER_CHAR", "SAMPLE_RATE", "render"]

SAMPLE_RATE = 24000
SAMPLES_PER_CHAR = 480
BYTES_PER_CHAR = SAMPLES_PER_CHAR * 2
_AMPLITUDE = 8000


@functools.lru_cache(maxsize=512)
def _tone(char: str) -> bytes:
    frequency = 200 + (ord(char) % 64) * 20
    step = 2 * math.pi * frequency / SAMPLE_RATE
    samples = (round(_AMPLITUDE * math.sin(step * n)) for n in range(SAMPLES_PER_CHAR))
    return struct.pack(f"<{SAMPLES_PER_CHAR}h", *samples)


def render(text: str) -> bytes:
    """The PCM the test voice says for `text`: a tone per character, in order."""
    return b"".join(_tone(char) for char in text)
