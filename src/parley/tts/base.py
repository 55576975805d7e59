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
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from parley._sync import run_sync
from parley.errors import ModelError, ModelOutputError, UserError
from parley.messages import AudioBlock, new_id
from parley.models._provider import adopt_provider_class, check_credential, check_parameters
from parley.models.cards import TTSModelCard, load_cards
from parley.models.credentials import Credential
from parley.models.parameters import ParametersBase
from parley.models.retry import DEFAULT_RETRYABLE, Retryable, RetryPolicy, retry_wait
from parley.tts._audio import PCMFormat, pcm_format, wav_file

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


@dataclass(slots=True)
class _RawAudio:
    """The bytes a `TTSResponse` was made from, and the block built from them (once built)."""

    data: bytes
    media_type: str
    block: AudioBlock | None = None


class TTSResponse(BaseModel):
    """Audio from a TTS model: the whole, or one piece of a stream.

    `content` is an audio block carrying its bytes as base64 data; its media type says the
    format (`audio/wav`, or `audio/pcm;rate=24000` for a streamed piece). A stream's last
    response has `is_last=True` and the usage; its `content` is None when no audio was left.

    A response made from raw bytes (`of_audio`, as every TTS model makes its pieces) keeps
    them and builds its block on first need: when `content` is read, or the response is
    dumped or compared. `audio_bytes` and `media_type` read the bytes themselves, so a
    caller that only plays or joins the audio never pays for base64 (about a third of a
    whole stream's time, benchmarks/tts_openai.py).
    """

    model_config = ConfigDict(extra="forbid")

    content: AudioBlock | None = None
    is_last: bool = True
    usage: TTSUsage | None = None
    id: str = Field(default_factory=new_id)
    metadata: dict[str, Any] | None = None
    type: Literal["tts"] = "tts"
    # The bytes a response was built from, and the block they went into once built.
    _audio: _RawAudio | None = PrivateAttr(default=None)

    @classmethod
    def of_audio(
        cls, data: bytes, media_type: str, *, is_last: bool, usage: TTSUsage | None = None
    ) -> TTSResponse:
        """A response carrying `data` (of `media_type`) as its audio block, built on first need.

        Raises:
            ValueError: `media_type` is not an audio media type (pydantic's error).
        """
        if type(data) is not bytes:
            data = bytes(data)
        _check_media_type(media_type)
        response = _new(cls)
        # What pydantic's `model_construct` does, without `content`: `__getattr__` builds it.
        _set_dict(
            response,
            {"is_last": is_last, "usage": usage, "id": new_id(), "metadata": None, "type": "tts"},
        )
        _set_fields_set(response, {"content", "is_last", "usage"})
        _set_extra(response, None)
        _set_private(response, {"_audio": _RawAudio(data, media_type)})
        return response

    if not TYPE_CHECKING:  # as pydantic's own: typed, mypy would take any attribute name

        def __getattr__(self, name: str) -> Any:
            if name == "content":
                return self._built()
            return super().__getattr__(name)

    def _built(self) -> AudioBlock | None:
        """`content`, its block built from the raw bytes now if it was not yet."""
        values = self.__dict__
        if "content" in values:
            block: AudioBlock | None = values["content"]
            if next(iter(values)) != "content":  # assigned before it was built: put it first
                _set_dict(self, {"content": block, **values})
            return block
        audio = self._raw_audio()
        if audio is None:  # not made by `of_audio`, yet no content: pydantic's own error
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'content'")
        block = audio.block = AudioBlock.from_bytes(audio.data, audio.media_type)
        # First, as the field comes first: dumps and reprs list the fields in that order.
        _set_dict(self, {"content": block, **values})
        return block

    def _raw_audio(self) -> _RawAudio | None:
        private = self.__pydantic_private__
        return private.get("_audio") if private else None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]  # noqa: ANN202
        # No return annotation: pydantic would make it the JSON schema of a dumped response.
        self._built()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        # By value: the fields, not the raw bytes kept beside them (pydantic's own `==` also
        # compares private attributes, so a response made from bytes would equal no other).
        if not isinstance(other, TTSResponse):
            return NotImplemented
        self._built()
        other._built()
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # as pydantic's models: compared by value

    def __iter__(self) -> Any:
        self._built()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._built()
        return super().__repr_args__()

    def __getstate__(self) -> dict[Any, Any]:
        self._built()
        return super().__getstate__()

    @property
    def audio_bytes(self) -> bytes:
        """The audio's bytes (empty when there is none)."""
        private = self.__pydantic_private__
        audio: _RawAudio | None = private.get("_audio") if private else None
        if audio is not None and "content" not in self.__dict__:
            return audio.data  # a piece of a stream, as a player reads it: the bytes as they came
        held = self._held()
        if held is None:
            return b""
        if isinstance(held, _RawAudio):
            return held.data
        source = held.source
        if source.type != "base64":
            raise UserError("this response's audio is at a URL, not carried inline")
        return source.to_bytes()

    @property
    def media_type(self) -> str | None:
        """The audio's media type, when there is audio."""
        held = self._held()
        if held is None:
            return None
        if isinstance(held, _RawAudio):
            return held.media_type
        return held.source.media_type if held.source.type == "base64" else None

    def _held(self) -> _RawAudio | AudioBlock | None:
        """What the response holds: the raw bytes it was made from, or its block.

        The bytes while `content` is their block (built or not), else `content` (given, or
        assigned since).
        """
        audio = self._raw_audio()
        content = self.__dict__.get("content", _UNBUILT)
        if audio is not None and (
            content is _UNBUILT or (content is not None and content is audio.block)
        ):
            return audio
        return None if content is _UNBUILT else content


_UNBUILT: Any = object()
# The slots of every pydantic model, set straight through their descriptors (as
# `parley.messages._base.trusted` does).
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


@functools.lru_cache(maxsize=64)
def _check_media_type(media_type: str) -> None:
    """Refuse a media type an audio block would not take, when a response is made, not later."""
    AudioBlock.from_bytes(b"", media_type)


@dataclass(slots=True)
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
        text, parameters = self._prepared(text, overrides)
        tally = _Tally()
        parts: list[bytes] = []
        media_type = ""
        # The provider's chunks joined as they are: through `synthesize_stream` each would be
        # made a response first.
        async for chunk in self._resumable(text, parameters, tally):
            if chunk.data:
                parts.append(chunk.data)
                media_type = media_type or chunk.media_type
        usage = tally.usage(text)
        if not parts:
            raise ModelOutputError(f"{self.model} returned no audio", provider=self.provider)
        data, media_type = _whole(parts, media_type)
        return TTSResponse.of_audio(data, media_type, is_last=True, usage=usage)

    async def synthesize_stream(
        self, text: str, **overrides: Any
    ) -> AsyncGenerator[TTSResponse, None]:
        """Speak `text`, yielding audio as it arrives, whatever `stream` says.

        Every response but the last has `is_last=False`; the last carries the usage.
        """
        text, parameters = self._prepared(text, overrides)
        tally = _Tally()
        of_audio = TTSResponse.of_audio
        async for chunk in self._resumable(text, parameters, tally):
            if chunk.data:
                yield of_audio(chunk.data, chunk.media_type, is_last=False)
        yield TTSResponse(content=None, is_last=True, usage=tally.usage(text))

    def _prepared(self, text: str, overrides: dict[str, Any]) -> tuple[str, TTSParameters]:
        """The text checked, and the parameters with this call's overrides."""
        text = _check_text(text)
        parameters = self.parameters.merged(**overrides)
        if overrides:
            self._check_voice(parameters, self.voices)
        return text, parameters

    def synthesize_sync(self, text: str, **overrides: Any) -> TTSResponse:
        """The sync twin of `synthesize_whole`."""
        return run_sync(self.synthesize_whole(text, **overrides))

    async def aclose(self) -> None:
        """Release the provider's connections; a model may be used again afterwards."""

    async def _resumable(
        self, text: str, parameters: TTSParameters, tally: _Tally
    ) -> AsyncGenerator[AudioChunk, None]:
        """`_call_api` under the retry policy, skipping audio already handed out on a retry.

        The tokens the provider counted go in `tally`.
        """
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
                    if chunk.input_tokens is not None or chunk.output_tokens is not None:
                        tally.count(chunk)
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


class _Tally:
    """What one synthesis consumed so far: the provider's token counts and the time."""

    __slots__ = ("input_tokens", "output_tokens", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def count(self, chunk: AudioChunk) -> None:
        """Keep the latest counts a chunk carries (providers send running totals)."""
        if chunk.input_tokens is not None:
            self.input_tokens = chunk.input_tokens
        if chunk.output_tokens is not None:
            self.output_tokens = chunk.output_tokens

    def usage(self, text: str) -> TTSUsage:
        """The usage of speaking `text`, now."""
        return TTSUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            characters=len(text),
            time=time.perf_counter() - self.started,
        )


def _check_text(text: str) -> str:
    if not isinstance(text, str):
        raise UserError(f"text to speak must be a str, got {type(text).__name__}")
    if not text.strip():
        raise UserError("there is no text to speak: it is empty")
    return text


def _whole(parts: bytes | list[bytes], media_type: str) -> tuple[bytes, str]:
    """The audio (or its pieces, joined): raw PCM as a WAV file, anything else as it is."""
    if isinstance(parts, bytes):
        parts = [parts]
    fmt: PCMFormat | None = pcm_format(media_type)
    if fmt is None:
        return b"".join(parts), media_type
    return wav_file(parts, fmt), "audio/wav"
