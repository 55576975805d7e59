"""AgentScope's text-to-speech models under `agentscope.tts`'s names, on parley's.

As in AgentScope: `await model.synthesize(text)` answers a `TTSResponse` whose `content` is
a `DataBlock` of base64 audio, or (streaming, the default) an async generator of them, each
an incremental piece, the last with `is_last=True`; no text answers `content=None`.
`OpenAITTSModel`, `DashScopeTTSModel` and `DashScopeRealtimeTTSModel` (text pushed in
pieces: `connect`, `push`, `synthesize`, `close`) wrap parley's (`to_parley()`). AgentScope's
`DashScopeCosyVoiceTTSModel` and `GeminiTTSModel` are not here: use parley's
`parley.providers.dashscope.speech.cosyvoice` directly; parley has no Gemini speech model.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from parley.compat.agentscope.message import DataBlock, blocks_from_parley
from parley.errors import UserError
from parley.messages import new_id
from parley.providers.dashscope.speech import DashScopeRealtimeTTSModel as _DashScopeRealtime
from parley.providers.dashscope.speech import DashScopeTTSModel as _DashScope
from parley.providers.openai.speech import OpenAITTSModel as _OpenAI
from parley.tts import base as tb
from parley.tts._audio import pcm_format
from parley.tts.base import TTSModel as TTSModelBase

__all__ = [
    "DashScopeRealtimeTTSModel",
    "DashScopeTTSModel",
    "OpenAITTSModel",
    "TTSModelBase",
    "TTSResponse",
    "TTSUsage",
]


@dataclass
class TTSUsage:
    """A speech call's tokens and seconds."""

    input_tokens: int
    output_tokens: int
    time: float
    type: Literal["tts"] = "tts"


@dataclass
class TTSResponse:
    """Audio (`content`, a `DataBlock`), whole or one incremental piece of a stream."""

    content: DataBlock | None
    id: str = field(default_factory=new_id)
    created_at: str = field(default_factory=lambda: datetime.now().isoformat())
    type: Literal["tts"] = "tts"
    usage: TTSUsage | None = None
    metadata: dict[str, Any] | None = None
    is_last: bool = True


def _response(answer: tb.TTSResponse, *, is_last: bool) -> TTSResponse:
    content = None
    if answer.content is not None:
        (block,) = blocks_from_parley([answer.content], text_id="", thinking_id="")
        assert isinstance(block, DataBlock)
        content = block
    usage = None
    if answer.usage is not None:
        usage = TTSUsage(
            input_tokens=answer.usage.input_tokens or 0,
            output_tokens=answer.usage.output_tokens or 0,
            time=answer.usage.time,
        )
    return TTSResponse(content=content, usage=usage, is_last=is_last)


class _ParleyTTSModel:
    """An AgentScope-style speech model on one of parley's (`_build` makes it)."""

    class Parameters(BaseModel):
        """The provider's speech parameters."""

    realtime: bool = False

    def __init__(
        self, credential: Any, model: str, parameters: BaseModel | None, stream: bool
    ) -> None:
        self.credential = credential
        self.model = model
        self.parameters = parameters or self.Parameters()
        self.stream = stream
        self._parley = self._build()

    def _build(self) -> TTSModelBase:
        raise NotImplementedError

    def _piece(self, piece: tb.TTSResponse, *, first: bool) -> tb.TTSResponse:
        """A streamed piece as AgentScope hands it out (as parley gives it, by default)."""
        return piece

    def to_parley(self) -> TTSModelBase:
        """The parley model this one wraps."""
        return self._parley

    async def synthesize(
        self, text: str | None = None, **kwargs: Any
    ) -> TTSResponse | AsyncGenerator[TTSResponse, None]:
        """Speak `text`: the whole audio, or (streaming) its pieces as they come."""
        if not text:
            return TTSResponse(content=None)
        if not self.stream:
            return _response(await self._parley.synthesize_whole(text, **kwargs), is_last=True)
        return self._pieces(text, kwargs)

    async def _pieces(self, text: str, kwargs: dict[str, Any]) -> AsyncGenerator[TTSResponse, None]:
        # As AgentScope: the last piece of audio is the one marked last, with the usage.
        pending: tb.TTSResponse | None = None
        async for piece in self._parley.synthesize_stream(text, **kwargs):
            if piece.content is None:
                if pending is not None:
                    pending.usage = piece.usage
                    yield _response(pending, is_last=True)
                else:
                    yield _response(piece, is_last=True)
                return
            if pending is not None:
                yield _response(pending, is_last=False)
            pending = self._piece(piece, first=pending is None)
        if pending is not None:
            yield _response(pending, is_last=True)

    async def aclose(self) -> None:
        """Close the wrapped model's connections."""
        await self._parley.aclose()


class OpenAITTSModel(_ParleyTTSModel):
    """OpenAI's `/v1/audio/speech`, as AgentScope's class (mp3 and voice `alloy` by default)."""

    class Parameters(BaseModel):
        """Speech parameters, as AgentScope names them."""

        voice: str = Field(default="alloy", description="The voice.")
        response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = Field(
            default="mp3", description="The audio's format."
        )
        instructions: str | None = Field(default=None, description="How to speak.")

    def __init__(
        self,
        credential: Any,
        model: str = "tts-1",
        parameters: OpenAITTSModel.Parameters | None = None,
        stream: bool = True,
    ) -> None:
        super().__init__(credential, model, parameters, stream)

    def _build(self) -> TTSModelBase:
        fields = self.parameters.model_dump(exclude_none=True)
        return _OpenAI(self.credential, self.model, fields, stream=self.stream)


def _streaming_wav_header(rate: int, channels: int, sample_width: int) -> bytes:
    """A 44-byte WAV header for PCM of unknown length (both sizes at their maximum).

    Players that read the format and take the rest as samples start on the first piece.
    """
    unknown = 0xFFFFFFFF
    fmt = struct.pack(
        "<HHIIHH",
        1,  # PCM
        channels,
        rate,
        rate * channels * sample_width,
        channels * sample_width,
        sample_width * 8,
    )
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVEfmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", unknown)
    )


class DashScopeTTSModel(_ParleyTTSModel):
    """Qwen-TTS (`qwen3-tts-flash`...) on DashScope's native API, as AgentScope's class.

    It takes AgentScope's `DashScopeCredential` (the compatible mode's) and, as AgentScope
    through the `dashscope` SDK, calls the native API: at `DASHSCOPE_HTTP_BASE_URL` when set,
    else DashScope's endpoint. Audio comes as WAV, as AgentScope hands it out: a whole
    answer is one WAV file; streamed, the first piece starts with a WAV header of unknown
    length and the others are the PCM that follows.
    """

    class Parameters(BaseModel):
        """Qwen-TTS parameters, as AgentScope names them."""

        voice: str = Field(default="Cherry", description="The voice.")

    def __init__(
        self,
        credential: Any,
        model: str = "qwen3-tts-flash",
        parameters: DashScopeTTSModel.Parameters | None = None,
        stream: bool = True,
    ) -> None:
        super().__init__(credential, model, parameters, stream)

    def _build(self) -> TTSModelBase:
        fields = self.parameters.model_dump(exclude_none=True)
        return _DashScope(
            _native_dashscope(self.credential), self.model, fields, stream=self.stream
        )

    def _piece(self, piece: tb.TTSResponse, *, first: bool) -> tb.TTSResponse:
        """The PCM piece as WAV: the first with a streaming header, as AgentScope does."""
        return _as_wav(piece, header=first)


def _as_wav(piece: tb.TTSResponse, *, header: bool) -> tb.TTSResponse:
    """A piece of raw PCM as streamed WAV: the header first when `header`, else bare PCM."""
    fmt = pcm_format(piece.media_type or "")
    if fmt is None:
        return piece  # not raw PCM (or no audio): handed out as it came
    data = piece.audio_bytes
    if header:
        data = _streaming_wav_header(fmt.rate, fmt.channels, fmt.sample_width) + data
    return tb.TTSResponse.of_audio(data, "audio/wav", is_last=piece.is_last, usage=piece.usage)


def _native_dashscope(credential: Any) -> Any:
    """The native API's `DashScopeCredential` (parley's), with the key of AgentScope's."""
    from parley.providers.dashscope import DashScopeCredential  # noqa: PLC0415

    key = getattr(credential, "api_key", None)
    return DashScopeCredential(api_key=key) if key is not None else None


class DashScopeRealtimeTTSModel(_ParleyTTSModel):
    """Qwen-TTS realtime (`qwen3-tts-flash-realtime`...), as AgentScope's class.

    Text goes in pieces over DashScope's realtime WebSocket (at the one beside
    `DASHSCOPE_HTTP_BASE_URL`, or `DASHSCOPE_WEBSOCKET_BASE_URL`'s sibling): `async with model`
    (or `connect()`), `await model.push(text)` for each piece (the audio ready so far, or
    `content=None`), then `await model.synthesize()` for the rest. As AgentScope hands it
    out, audio is WAV: an utterance's first audio starts with a WAV header of unknown length.
    """

    class Parameters(BaseModel):
        """Qwen-TTS realtime parameters, as AgentScope names them."""

        voice: str = Field(default="Cherry", description="The voice.")

    realtime: bool = True

    def __init__(
        self,
        credential: Any,
        model: str = "qwen3-tts-flash-realtime",
        parameters: DashScopeRealtimeTTSModel.Parameters | None = None,
        stream: bool = True,
    ) -> None:
        self._header_due = True
        super().__init__(credential, model, parameters, stream)

    def _build(self) -> TTSModelBase:
        fields = self.parameters.model_dump(exclude_none=True)
        native = _native_dashscope(self.credential)
        return _DashScopeRealtime(native, self.model, fields, stream=self.stream)

    def _realtime(self) -> _DashScopeRealtime:
        inner = self._parley
        assert isinstance(inner, _DashScopeRealtime)
        return inner

    def _handed_out(self, piece: tb.TTSResponse, *, is_last: bool) -> TTSResponse:
        if piece.content is not None:
            piece = _as_wav(piece, header=self._header_due)
            self._header_due = False
        return _response(piece, is_last=is_last)

    async def __aenter__(self) -> DashScopeRealtimeTTSModel:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the WebSocket (pushing text opens it too)."""
        await self._realtime().connect()

    async def close(self) -> None:
        """Close the WebSocket."""
        await self._realtime().close()

    async def push(self, text: str, **kwargs: Any) -> TTSResponse:
        """Add `text` to the utterance; the audio ready so far (`content=None`: none yet)."""
        if kwargs:
            raise UserError(
                "a realtime model's parameters are set per connection: pass them in "
                "DashScopeRealtimeTTSModel.Parameters when building it"
            )
        return self._handed_out(await self._realtime().push(text), is_last=False)

    async def synthesize(
        self, text: str | None = None, **kwargs: Any
    ) -> TTSResponse | AsyncGenerator[TTSResponse, None]:
        """Finish the utterance (after pushing `text`): the rest of its audio."""
        if not self.stream:
            whole = await self._realtime().synthesize(text, **kwargs)
            assert isinstance(whole, tb.TTSResponse)
            answer = self._handed_out(whole, is_last=True)
            self._header_due = True  # the next utterance is a new WAV stream
            return answer
        return self._rest(text, kwargs)

    async def _rest(
        self, text: str | None, kwargs: dict[str, Any]
    ) -> AsyncGenerator[TTSResponse, None]:
        stream = await self._realtime().synthesize(text, **kwargs)
        assert not isinstance(stream, tb.TTSResponse)
        pending: tb.TTSResponse | None = None
        try:
            async for piece in stream:
                if piece.content is None:  # the end, with the usage
                    if pending is not None:
                        pending.usage = piece.usage
                        yield self._handed_out(pending, is_last=True)
                    else:
                        yield _response(piece, is_last=True)
                    return
                if pending is not None:
                    yield self._handed_out(pending, is_last=False)
                pending = piece
        finally:
            self._header_due = True
