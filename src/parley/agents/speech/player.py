"""Hearing audio events: a player on PATH fed as the audio arrives, or a WAV file.

`AudioSink` takes a run's `AudioStarted`/`AudioDelta` events (`parley.agents.speech.middleware`) and
either plays them through an audio player, started at the first audio and fed on its
standard input while the answer is still being written, or gathers them into a WAV file.

The player: `PARLEY_AUDIO_PLAYER` (a command line that plays WAV from standard input), else
the first of `aplay`, `paplay`, `pw-play`, `ffplay` found on PATH (the first two read a
streamed WAV, the others raw PCM with its format on the command line), else `afplay`
(macOS; it reads only files, so each answer is played once it is whole).
"""

from __future__ import annotations

import asyncio
import base64
import os
import shlex
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from parley.agents.events import AgentEvent, AudioDelta, AudioStarted
from parley.errors import ConfigurationError
from parley.tts import PCMFormat, pcm_format, wav_bytes

__all__ = ["AudioPlayer", "AudioSink", "find_player", "streamed_wav_header"]

PLAYER_VARIABLE = "PARLEY_AUDIO_PLAYER"


@dataclass(frozen=True)
class AudioPlayer:
    """A command that plays audio, and what it reads.

    `argv` may hold `{rate}` and `{channels}`, filled in from the audio's format; `reads` is
    `wav` (a streamed WAV on stdin), `raw` (PCM on stdin) or `file` (a WAV file named last).
    """

    argv: tuple[str, ...]
    reads: str = "wav"  # "wav" | "raw" | "file"

    def command(self, fmt: PCMFormat) -> list[str]:
        """The command line for audio of format `fmt`."""
        return [a.format(rate=fmt.rate, channels=fmt.channels) for a in self.argv]


_KNOWN = [
    AudioPlayer(("aplay", "-q", "-")),
    AudioPlayer(("paplay",)),
    AudioPlayer(
        ("pw-play", "--rate", "{rate}", "--channels", "{channels}", "--format", "s16", "-"),
        "raw",
    ),
    AudioPlayer(
        (
            *("ffplay", "-nodisp", "-autoexit", "-loglevel", "error"),
            *("-f", "s16le", "-ar", "{rate}", "-ac", "{channels}", "-i", "-"),
        ),
        "raw",
    ),
    AudioPlayer(("afplay",), "file"),
]


def find_player() -> AudioPlayer:
    """The audio player to use (see the module's docstring).

    Raises:
        ConfigurationError: None is set or on PATH.
    """
    command = os.environ.get(PLAYER_VARIABLE, "").strip()
    if command:
        return AudioPlayer(tuple(shlex.split(command)))
    for player in _KNOWN:
        found = shutil.which(player.argv[0])
        if found is not None:
            return AudioPlayer((found, *player.argv[1:]), player.reads)
    raise ConfigurationError(
        "no audio player found to speak through: install one of aplay (alsa-utils), paplay "
        "(pulseaudio-utils), pw-play (pipewire), ffplay (ffmpeg), or set "
        f"{PLAYER_VARIABLE} to a command that plays WAV from standard input; or write the "
        "audio to a file with --speak-to answer.wav"
    )


def streamed_wav_header(fmt: PCMFormat) -> bytes:
    """A WAV header for PCM of unknown length (the sizes at their maximum, as for a pipe)."""
    unknown = 0xFFFFFFFF
    byte_rate = fmt.rate * fmt.frame_size
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, fmt.channels, fmt.rate, byte_rate, fmt.frame_size, 16)
        + b"data"
        + struct.pack("<I", unknown - 36)
    )


class AudioSink:
    """Where a run's audio events go: a player (`player`) or a WAV file (`path`).

    Feed it every event (`await sink.take(event)`), then `await sink.finish()`: the player
    is waited for (the answer is heard to its end), or the file written.
    """

    def __init__(self, *, player: AudioPlayer | None = None, path: Path | None = None) -> None:
        if (player is None) == (path is None):
            raise ConfigurationError("an AudioSink plays through a player or writes a file")
        self.player = player
        self.path = path
        self.format: PCMFormat | None = None
        self.pcm = bytearray()
        self._process: asyncio.subprocess.Process | None = None

    async def take(self, event: AgentEvent) -> None:
        """Play or keep the audio an event carries (other events are ignored)."""
        if isinstance(event, AudioStarted) and self.format is None:
            self.format = pcm_format(event.media_type)
            if self.format is None:
                raise ConfigurationError(f"cannot play {event.media_type}: raw PCM only")
        if not isinstance(event, AudioDelta) or self.format is None:
            return
        data = base64.b64decode(event.data)
        self.pcm += data
        if self.player is not None and self.player.reads != "file":
            await self._feed(data)

    async def _feed(self, data: bytes) -> None:
        assert self.player is not None
        assert self.format is not None
        if self._process is None:
            self._process = await asyncio.create_subprocess_exec(
                *self.player.command(self.format),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
            )
            if self.player.reads == "wav":
                data = streamed_wav_header(self.format) + data
        assert self._process.stdin is not None
        self._process.stdin.write(data)
        await self._process.stdin.drain()

    async def finish(self) -> None:
        """End the answer's audio: wait for the player, or write the file."""
        if self.format is None:
            return
        if self.path is not None:
            self.path.write_bytes(wav_bytes(bytes(self.pcm), self.format))
        elif self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            await self._process.wait()
        elif self.player is not None:  # a player that reads files only
            await _play_file(self.player, wav_bytes(bytes(self.pcm), self.format), self.format)
        self.format, self.pcm, self._process = None, bytearray(), None


async def _play_file(player: AudioPlayer, wav: bytes, fmt: PCMFormat) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answer.wav"
        path.write_bytes(wav)
        process = await asyncio.create_subprocess_exec(*player.command(fmt), str(path))
        await process.wait()
