"""`OpenAITTSModel`: OpenAI's speech endpoint (`POST /v1/audio/speech`), streamed.

The SDK sends through its `DefaultAioHttpClient` (httpx2's interface on aiohttp's
connections) when its `aiohttp` extra is installed, as parley's `openai` extra does: the
audio then comes in the pieces each read of the socket gives (up to 16 KB) rather than one
per HTTP chunk of the body, each parsed by httpx2's HTTP/1.1 parser in pure Python. A
284 KB answer sent in 4,800-byte chunks took about 0.6 of the time
(benchmarks/tts_openai.py).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from parley.errors import MissingDependencyError, UserError
from parley.models._aiohttp import Closer, LoopClients
from parley.models.base import ChatModel
from parley.models.credentials import Credential
from parley.providers.openai._errors import openai_errors
from parley.providers.openai._sdk import OpenAIClients
from parley.providers.openai.credentials import OpenAICredential
from parley.tts._audio import PCMFormat
from parley.tts.base import AudioChunk, TTSModel, TTSParameters

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["MEDIA_TYPES", "PCM", "OpenAITTSModel", "OpenAITTSParameters"]

PCM = PCMFormat(rate=24000)
"""What `response_format: pcm` is: 24 kHz, 16-bit little-endian, mono, no header."""

MEDIA_TYPES: Mapping[str, str] = {
    "pcm": PCM.media_type,
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",  # Opus in an Ogg file
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
}
"""The media type of each `response_format` the endpoint takes."""

AudioFormat = Literal["pcm", "mp3", "opus", "aac", "flac", "wav"]


class OpenAITTSParameters(TTSParameters):
    """Parameters of `/v1/audio/speech`: the voice, its manner, speed and the audio's format."""

    instructions: str | None = Field(
        default=None,
        description="How to speak: tone, accent, pace... (gpt-4o-mini-tts; not tts-1 or tts-1-hd).",
    )
    speed: float | None = Field(
        default=None, ge=0.25, le=4.0, description="Speed of the speech, 0.25 to 4 (1 is normal)."
    )
    response_format: AudioFormat | None = Field(
        default=None,
        description="The audio's format: pcm (the default here: 24 kHz 16-bit mono, streamed "
        "in pieces that concatenate), or a file in mp3, opus, aac, flac or wav.",
    )


class OpenAITTSModel(OpenAIClients, TTSModel):
    """A speech model behind OpenAI's `/v1/audio/speech`, on the official SDK, streamed.

    The audio is asked for as raw PCM (24 kHz, 16-bit, mono) and handed on as it arrives, in
    pieces of whole samples; a whole answer becomes a WAV file. `response_format` asks for a
    file instead (mp3, opus, aac, flac, wav), handed on as the server sends it. Any server
    that speaks the endpoint works: the credential's `base_url` (or `OPENAI_BASE_URL`).

    Example:
        >>> model = OpenAITTSModel(OpenAICredential(), "gpt-4o-mini-tts", {"voice": "coral"})
        >>> response = await model.synthesize("Hello!")  # doctest: +SKIP
    """

    provider: ClassVar[str] = "openai"
    credential_class: ClassVar[type[Credential] | None] = OpenAICredential
    parameters_class: ClassVar[type[TTSParameters]] = OpenAITTSParameters
    cards_location: ClassVar[str | None] = "parley.providers.openai.speech"

    def new_pool(self) -> LoopClients[AsyncOpenAI]:
        """One SDK client per event loop, on aiohttp when it can be (see above).

        Each is closed by `aclose()`, else when its loop shuts down (`LoopClients`: aiohttp's
        connections must not outlive their loop).

        Raises:
            ConfigurationError: No API key.
        """
        settings = {
            "api_key": self._api_key(),
            "base_url": self.endpoint(),
            "timeout": self.timeout,
            "default_headers": self.extra_headers,
            "max_retries": 0,  # parley's base retries
        }
        return LoopClients(functools.partial(_speech_client, settings))

    def request_fields(self, text: str, parameters: TTSParameters) -> dict[str, Any]:
        """The arguments of one speech request (`model`, `input`, `voice`...).

        Raises:
            UserError: A parameter this model's card does not take (tts-1's `instructions`).
        """
        fields = parameters.to_kwargs()
        self._check_supported(fields)
        fields.setdefault("response_format", "pcm")
        if "voice" not in fields:
            raise UserError(f"{self.model} needs a voice: pass parameters={{'voice': ...}}")
        return {"model": self.model, "input": text, **fields}

    @functools.cached_property
    def _card_parameters(self) -> frozenset[str] | None:
        """The parameters this model's card takes (looked up once); None: no card."""
        card = self.card()
        if card is None:
            return None
        return frozenset(card.parameter_schema.get("properties", {}))

    def _check_supported(self, fields: dict[str, Any]) -> None:
        known = self._card_parameters
        if known is None:
            return  # a model parley has no card for: the server decides
        refused = sorted(name for name in fields if name not in known)
        if refused:
            raise UserError(f"{self.model} does not take {', '.join(refused)}")

    async def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        fields = self.request_fields(text, parameters)
        media_type = MEDIA_TYPES[fields["response_format"]]
        # Raw PCM is handed on in whole samples: a piece cut mid-sample would not play alone.
        frame = PCM.frame_size if fields["response_format"] == "pcm" else 1
        ChatModel.check_allowed(self.endpoint())
        pending = b""
        with openai_errors(self.model, self.provider):
            speech = self.client().audio.speech.with_streaming_response
            async with speech.create(**fields) as response:
                async for data in response.iter_bytes():
                    pending += data
                    whole = len(pending) - len(pending) % frame
                    if whole:
                        yield AudioChunk(pending[:whole], media_type)
                        pending = pending[whole:]
        if pending:
            yield AudioChunk(pending, media_type)  # a server that sent half a sample


def _speech_client(settings: dict[str, Any]) -> tuple[AsyncOpenAI, Closer]:
    """An `AsyncOpenAI` on the SDK's aiohttp client (on httpx2's own without aiohttp)."""
    try:
        from openai import AsyncOpenAI  # noqa: PLC0415  (`import openai` alone takes ~0.5 s)
    except ImportError as exc:
        raise MissingDependencyError("openai", "openai") from exc
    try:
        import aiohttp  # noqa: F401, PLC0415  (the SDK's aiohttp client needs it)
        from openai import DefaultAioHttpClient  # noqa: PLC0415  (openai 1.86 and later)
    except ImportError:
        client = AsyncOpenAI(**settings)
    else:
        client = AsyncOpenAI(**settings, http_client=DefaultAioHttpClient())
    return client, client.close  # closes the HTTP client it was given too
