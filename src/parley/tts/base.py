"""`TTSModel`: the base every text-to-speech provider builds on (seed 003's `TTSModelBase`).

A provider implements one method, `_call_api(text, parameters)`, an async generator of
`AudioChunk`s (raw bytes and their media type) for one request. The base does the rest:

- `synthesize(text)` gives one `TTSResponse` with the whole audio (`stream=False`; raw PCM
  is handed out as a WAV file), or an async iterator of responses, one per piece of audio as
  it arrives, the last with `is_last=True` and the usage (`stream=True`);
- failures are retried under the model layer's policy (`parley.models.retry`). A stream of
  raw PCM that breaks after some audio was handed out is asked again and the audio already
  handed out is skipped, so nothing is heard twice (this assumes the provider renders the
  same text to the same samples, as a voice at fixed settings does); a compressed stream
  that breaks fails instead;
- cards (`TTSModelCard`) come from a `_models/` folder beside the provider, their `voices`
  an enum on the `voice` parameter, the first voice the default.

Realtime (streaming-input) models build on `parley.tts.realtime.RealtimeTTSModel`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from parley._sync import run_sync
from parley.errors import ModelError, ModelOutputError, UserError
from parley.messages import AudioBlock, new_id
from parley.models._provider import adopt_provider_class, check_credential, check_parameters
from parley.models.cards import TTSModelCard, load_cards
from parley.models.credentials import Credential
from parley.models.parameters import ParametersBase
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, retry_wait
from parley.tts._audio import PCMFormat, pcm_format, wav_bytes

__all__ = ["AudioChunk", "TTSModel", "TTSParameters", "TTSResponse", "TTSUsage"]


class TTSParameters(ParametersBase):
    """Parameters every speech API takes; providers subclass it to add their own."""

    voice: str | None = Field(
        default=None, description="The voice to speak with; the model's first voice if unset."
    )


class TTSUsage(BaseModel):
    """What a synthesis consumed.

    Tokens when the provider counts them, the characters spoken (what per-character prices
    bill: tts-1, Qwen3-TTS, CosyVoice) and the seconds taken.
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = None
    output_tokens: int | None = None
    characters: int | None = None
    time: float = 0.0


class TTSResponse(BaseModel):
    """Audio from a TTS model: the whole, or one piece of a stream.

    `content` is an audio block carrying its bytes as base64 data; its media type says the
    format (`audio/wav`, or `audio/pcm;rate=24000` for a streamed piece). A stream's last
    response has `is_last=True` and the usage; its `content` is None when no audio was left.
    """

    model_config = ConfigDict(extra="forbid")

    content: AudioBlock | None = None
    is_last: bool = True
    usage: TTSUsage | None = None
    id: str = Field(default_factory=new_id)
    metadata: dict[str, Any] | None = None
    type: Literal["tts"] = "tts"
    # The bytes a response was built from, beside the block they went into: reading them
    # back needs no base64 decoding (a second of speech is 48-64 KB).
    _raw: tuple[AudioBlock, bytes] | None = PrivateAttr(default=None)

    @classmethod
    def of_audio(
        cls, data: bytes, media_type: str, *, is_last: bool, usage: TTSUsage | None = None
    ) -> TTSResponse:
        """A response carrying `data` (of `media_type`) as its audio block."""
        block = AudioBlock.from_bytes(data, media_type)
        response = cls(content=block, is_last=is_last, usage=usage)
        response._raw = (block, data)
        return response

    @property
    def audio_bytes(self) -> bytes:
        """The audio's bytes (empty when there is none)."""
        if self.content is None:
            return b""
        if self._raw is not None and self._raw[0] is self.content:
            return self._raw[1]
        source = self.content.source
        if source.type != "base64":
            raise UserError("this response's audio is at a URL, not carried inline")
        return source.to_bytes()

    @property
    def media_type(self) -> str | None:
        """The audio's media type, when there is audio."""
        if self.content is None or self.content.source.type != "base64":
            return None
        return self.content.source.media_type


@dataclass
class AudioChunk:
    """What a provider's `_call_api` yields: audio bytes as they arrive.

    Args:
        data: The bytes (raw PCM for streams, so pieces concatenate).
        media_type: Their format: `audio/pcm;rate=24000`, `audio/mpeg`, `audio/wav`...
        input_tokens: The input tokens the provider counted so far, when it says.
        output_tokens: The output tokens the provider counted so far, when it says.
    """

    data: bytes
    media_type: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@functools.lru_cache(maxsize=64)
def _cards(location: str | Path, parameters: type[TTSParameters]) -> tuple[Any, ...]:
    # Read once per process: building a model looks its card up.
    return tuple(load_cards(location, parameters.model_json_schema(), TTSModelCard))


class TTSModel:
    """A text-to-speech model: `await model.synthesize(text)` gives its audio.

    Args:
        credential: The provider's credential; None builds the default one (environment).
        model: The model's name at the provider.
        parameters: The provider's `Parameters` (or a dict), e.g. `{"voice": "Cherry"}`.
        stream: Whether `synthesize` yields pieces of audio as they arrive.
        max_retries: Tries after the first on retryable failures.
        retry_delay: Seconds before the first retry (then growing, with jitter).
        timeout: Seconds to wait for the provider between two pieces of audio.
    """

    provider: ClassVar[str] = "base"
    parameters_class: ClassVar[type[TTSParameters]] = TTSParameters
    credential_class: ClassVar[type[Credential] | None] = None
    cards_location: ClassVar[str | Path | None] = None
    """A package whose `_models/` folder holds the cards, or a folder."""
    realtime: ClassVar[bool] = False
    """Whether the model takes its text in pieces (`RealtimeTTSModel`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        adopt_provider_class(cls, TTSParameters)

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: TTSParameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        max_retries: int = 3,
        retry_delay: float = 0.5,
        *,
        timeout: float = 60.0,
    ) -> None:
        if not model:
            raise UserError(f"{type(self).__name__} needs a model name")
        if max_retries < 0:
            raise UserError(f"max_retries must be 0 or more, got {max_retries}")
        self.credential = check_credential(type(self), self.credential_class, credential)
        self.model = model
        self.parameters = self._with_default_voice(
            check_parameters(type(self), self.parameters_class, parameters)
        )
        self.stream = stream
        self.retry = RetryPolicy(max_retries=max_retries, initial_delay=retry_delay)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, voice={self.parameters.voice!r})"

    @classmethod
    def _get_retryable_exceptions(cls) -> Retryable:
        """The exception classes a failed call is retried on (AgentScope's hook).

        `DEFAULT_RETRYABLE` unless a provider overrides it (see `parley.models.retry`).
        """
        return DEFAULT_RETRYABLE

    # -- cards --------------------------------------------------------------------------------

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[TTSModelCard]:
        """The model cards for this class (from `custom_yaml_dir` when given)."""
        location = custom_yaml_dir or cls.cards_location
        if location is None:
            return []
        return [card.model_copy(deep=True) for card in _cards(location, cls.parameters_class)]

    @classmethod
    def default_model(cls) -> str | None:
        """The model to use when none is named: the first card's (None: no card)."""
        cards = cls.list_models()
        return cards[0].name if cards else None

    def card(self) -> TTSModelCard | None:
        """This model's card, when there is one."""
        return next((c for c in self.list_models() if c.name == self.model), None)

    @property
    def voices(self) -> list[str]:
        """The voices this model's card lists (empty: no card, or any voice)."""
        card = self.card()
        return list(card.voices) if card else []

    def _with_default_voice(self, parameters: TTSParameters) -> TTSParameters:
        voices = self.voices
        if parameters.voice is None and voices:
            return parameters.merged(voice=voices[0])
        self._check_voice(parameters, voices)
        return parameters

    def _check_voice(self, parameters: TTSParameters, voices: list[str]) -> None:
        if not voices or parameters.voice is None or parameters.voice in voices:
            return
        card = self.card()
        if card is not None and card.custom_voices:
            return  # a voice of the user's own (cloned, designed) is the provider's to check
        raise UserError(
            f"{self.model} has no voice {parameters.voice!r}; its voices: {', '.join(voices)}"
        )

    # -- calling ------------------------------------------------------------------------------

    async def synthesize(
        self, text: str, **overrides: Any
    ) -> TTSResponse | AsyncGenerator[TTSResponse, None]:
        """Speak `text`: the whole audio (`stream=False`), or its pieces as they come.

        Args:
            text: What to say.
            **overrides: Parameters for this call only (e.g. `voice="Ethan"`).

        Raises:
            UserError: Empty text, or bad parameters.
            ModelError: The provider failed (after retries) or answered wrongly.
        """
        if self.stream:
            return self.synthesize_stream(text, **overrides)
        return await self.synthesize_whole(text, **overrides)

    async def synthesize_whole(self, text: str, **overrides: Any) -> TTSResponse:
        """Speak `text` and return the whole audio at once, whatever `stream` says.

        Raw PCM comes back as a WAV file (`audio/wav`); other formats as the provider sent
        them.
        """
        parts: list[bytes] = []
        media_type = ""
        usage = TTSUsage()
        # The provider's chunks joined as they are: through `synthesize_stream` each would be
        # put in base64 and read back (half the time of a whole answer, benchmarks/tts_openai.py).
        async for item in self._audio(text, overrides):
            if isinstance(item, TTSUsage):
                usage = item
            elif item.data:
                parts.append(item.data)
                media_type = media_type or item.media_type
        if not parts:
            raise ModelOutputError(f"{self.model} returned no audio", provider=self.provider)
        data, media_type = _whole(b"".join(parts), media_type)
        return TTSResponse.of_audio(data, media_type, is_last=True, usage=usage)

    async def synthesize_stream(
        self, text: str, **overrides: Any
    ) -> AsyncGenerator[TTSResponse, None]:
        """Speak `text`, yielding audio as it arrives, whatever `stream` says.

        Every response but the last has `is_last=False`; the last carries the usage.
        """
        async for item in self._audio(text, overrides):
            if isinstance(item, TTSUsage):
                yield TTSResponse(content=None, is_last=True, usage=item)
            elif item.data:
                yield TTSResponse.of_audio(item.data, item.media_type, is_last=False)

    async def _audio(
        self, text: str, overrides: dict[str, Any]
    ) -> AsyncGenerator[AudioChunk | TTSUsage, None]:
        """The provider's chunks under retries, then the usage."""
        text = _check_text(text)
        parameters = self.parameters.merged(**overrides)
        if overrides:
            self._check_voice(parameters, self.voices)
        started = time.perf_counter()
        tokens: list[int | None] = [None, None]
        async for chunk in self._resumable(text, parameters):
            tokens = [
                chunk.input_tokens if chunk.input_tokens is not None else tokens[0],
                chunk.output_tokens if chunk.output_tokens is not None else tokens[1],
            ]
            yield chunk
        yield TTSUsage(
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            characters=len(text),
            time=time.perf_counter() - started,
        )

    def synthesize_sync(self, text: str, **overrides: Any) -> TTSResponse:
        """The sync twin of `synthesize_whole`."""
        return run_sync(self.synthesize_whole(text, **overrides))

    async def aclose(self) -> None:
        """Release the provider's connections; a model may be used again afterwards."""

    async def _resumable(
        self, text: str, parameters: TTSParameters
    ) -> AsyncGenerator[AudioChunk, None]:
        """`_call_api` under the retry policy, skipping audio already handed out on a retry."""
        handed_out = 0
        attempt = 0
        while True:
            skip = handed_out
            try:
                async for chunk in self._call_api(text, parameters):
                    if skip:
                        if pcm_format(chunk.media_type) is None:
                            raise ModelError(  # not retryable: compressed audio has no offset
                                f"{self.model}'s stream broke after {handed_out} bytes of "
                                f"{chunk.media_type}, which cannot be resumed",
                                provider=self.provider,
                            )
                        dropped = min(skip, len(chunk.data))
                        skip -= dropped
                        chunk.data = chunk.data[dropped:]
                    handed_out += len(chunk.data)
                    yield chunk
                return
            except Exception as exc:
                attempt += 1
                describe = f"{self.provider} speech ({self.model})"
                wait = retry_wait(
                    self.retry,
                    attempt,
                    exc,
                    describe=describe,
                    retry_on=self._get_retryable_exceptions(),
                )
                if wait is None:
                    raise
                await asyncio.sleep(wait)

    def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        """Speak `text` in one request, yielding its audio as it arrives.

        Providers implement it as an async generator.
        """
        raise NotImplementedError


def _check_text(text: str) -> str:
    if not isinstance(text, str):
        raise UserError(f"text to speak must be a str, got {type(text).__name__}")
    if not text.strip():
        raise UserError("there is no text to speak: it is empty")
    return text


def _whole(data: bytes, media_type: str) -> tuple[bytes, str]:
    """Raw PCM as a WAV file; anything else as it is."""
    fmt: PCMFormat | None = pcm_format(media_type)
    if fmt is None:
        return data, media_type
    return wav_bytes(data, fmt), "audio/wav"
