"""The two offline engines behind the local voice: Piper in-process, espeak-ng as a subprocess.

Both yield raw 16-bit mono PCM as it is made: Piper a sentence at a time (its graph runs in a
worker thread, so the event loop stays free), espeak-ng as its standard output arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import struct
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.errors import MissingDependencyError, ModelError, UserError

if TYPE_CHECKING:
    from piper import PiperVoice

__all__ = ["ESPEAK_RATE", "EspeakSettings", "PiperSettings", "espeak_pcm", "piper_pcm"]

ESPEAK_RATE = 22050
"""The sample rate espeak-ng writes."""
_ESPEAK_WPM = 175
"""espeak-ng's default speed in words per minute (`speed=1.0`)."""
_END = object()


@dataclass(frozen=True)
class PiperSettings:
    """How Piper speaks: its speed and how much it varies (0: the same text, the same audio)."""

    speed: float = 1.0
    noise_scale: float | None = None
    noise_w_scale: float | None = None
    volume: float = 1.0


@dataclass(frozen=True)
class EspeakSettings:
    """How espeak-ng speaks: its voice (`en-us`, `en-gb`...), speed and pitch (0-99)."""

    voice: str = "en-us"
    speed: float = 1.0
    pitch: int | None = None


@functools.lru_cache(maxsize=4)
def load_piper(voice_package: str) -> PiperVoice:
    """The Piper voice whose weights ship in `voice_package`, loaded once per process.

    Raises:
        MissingDependencyError: piper-tts or the voice package is not installed.
    """
    try:
        from piper import PiperVoice  # noqa: PLC0415  (GPL engine, extra `tts-piper`)
    except ImportError:
        raise MissingDependencyError("piper-tts", "tts-piper") from None
    try:
        package = __import__(voice_package)
    except ImportError:
        raise MissingDependencyError(voice_package.replace("_", "-"), "tts-piper") from None
    return PiperVoice.load(package.model_path(), package.config_path(), download_dir=None)


def piper_rate(voice: PiperVoice) -> int:
    """The sample rate a Piper voice speaks at."""
    return int(voice.config.sample_rate)


async def piper_pcm(voice: PiperVoice, text: str, settings: PiperSettings) -> AsyncIterator[bytes]:
    """Speak `text` with Piper, a sentence of PCM at a time.

    The graph runs in a worker thread that hands each sentence to the loop; leaving the
    iterator early stops the thread after the sentence it is on.
    """
    from piper import SynthesisConfig  # noqa: PLC0415

    config = SynthesisConfig(
        length_scale=1.0 / settings.speed,
        noise_scale=settings.noise_scale,
        noise_w_scale=settings.noise_w_scale,
        volume=settings.volume,
    )
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()

    def hand(item: Any) -> None:
        # A reader that left may have let its loop close while this sentence was spoken.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def work() -> None:
        try:
            for chunk in voice.synthesize(text, config):
                if stop.is_set():
                    break
                hand(chunk.audio_int16_bytes)
        except Exception as exc:  # handed to the loop, raised there
            hand(exc)
        finally:
            hand(_END)

    worker = threading.Thread(target=work, name="parley-piper", daemon=True)
    worker.start()
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, Exception):
                raise ModelError(f"piper failed: {item}", provider="local") from item
            yield item
    finally:
        stop.set()


def espeak_path() -> str:
    """The espeak-ng executable.

    Raises:
        MissingDependencyError: espeak-ng is not on PATH.
    """
    found = shutil.which("espeak-ng")
    if found is None:
        raise MissingDependencyError(
            "espeak-ng (a system package: apt-get install espeak-ng)", "tts-piper"
        )
    return found


async def espeak_pcm(text: str, settings: EspeakSettings) -> AsyncIterator[bytes]:
    """Speak `text` with espeak-ng, PCM as its output arrives (22,050 Hz)."""
    command = [espeak_path(), "--stdout", "--stdin", "-v", settings.voice]
    command += ["-s", str(round(_ESPEAK_WPM * settings.speed))]
    if settings.pitch is not None:
        command += ["-p", str(settings.pitch)]
    # The text goes on stdin, never on the command line: it cannot be read as an option.
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(text.encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
        await _skip_wav_header(process.stdout)
        carry = b""
        while block := await process.stdout.read(8192):
            block = carry + block
            cut = len(block) - len(block) % 2  # whole samples only
            carry = block[cut:]
            if cut:
                yield block[:cut]
        error = (await process.stderr.read()).decode(errors="replace") if process.stderr else ""
        if await process.wait() != 0:
            raise UserError(f"espeak-ng failed: {error.strip() or process.returncode}")
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def _skip_wav_header(stream: asyncio.StreamReader) -> None:
    """Read past a streamed WAV header to its `data` chunk (its sizes are placeholders)."""
    header = await stream.readexactly(12)
    if header[:4] != b"RIFF" or header[8:12] != b"WAVE":
        raise ModelError("espeak-ng wrote no WAV header", provider="local")
    while True:
        chunk_id, size = struct.unpack("<4sI", await stream.readexactly(8))
        if chunk_id == b"data":
            return
        await stream.readexactly(size + size % 2)
