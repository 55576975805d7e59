"""`DashScopeTTSModel`: Qwen-TTS on DashScope's native multimodal-generation endpoint.

One request per text, `POST /api/v1/services/aigc/multimodal-generation/generation` with
`{"model", "input": {"text", "voice", "language_type"...}}`, always streamed
(`X-DashScope-SSE: enable`): each server-sent event's `output.audio.data` is base64 raw PCM,
24 kHz 16-bit mono, and its `usage` the tokens counted so far; the last event has
`finish_reason: "stop"` (and the whole audio's temporary URL, which parley does not need:
the pieces concatenate into it). Whole answers are gathered from the stream by the base and
handed out as WAV. Sources: Model Studio's Qwen-TTS API reference and the SDK's
`dashscope.v2.resources.audio.http_tts` (the same body and path for the qwen-tts family).

Requests go through the chat model's SDK client (`parley.providers.dashscope._sdk`) and its
error mapping (`_errors`: a 429 with `Retry-After` is a `RateLimitError` retried after that
wait, a 401 `InvalidApiKey` is not retried).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from parley.errors import ModelConnectionError, ModelOutputError
from parley.models._wire import iter_events
from parley.models.base import ChatModel
from parley.models.cards import TTSModelCard
from parley.models.credentials import Credential
from parley.providers.dashscope._errors import dashscope_errors, error_from_code
from parley.providers.dashscope._sdk import DashScopeClients
from parley.providers.dashscope.credentials import DashScopeCredential
from parley.tts._audio import pcm_media_type
from parley.tts.base import AudioChunk, TTSModel, TTSParameters

__all__ = [
    "GENERATION_PATH",
    "SAMPLE_RATE",
    "DashScopeTTSModel",
    "DashScopeTTSParameters",
    "as_dict",
    "own_cards",
]

GENERATION_PATH = "/services/aigc/multimodal-generation/generation"
SAMPLE_RATE = 24000
"""Qwen-TTS streams 24 kHz 16-bit mono PCM."""

Language = Literal[
    "Auto",
    "Chinese",
    "English",
    "German",
    "Italian",
    "Portuguese",
    "Spanish",
    "Japanese",
    "Korean",
    "French",
    "Russian",
]


class DashScopeTTSParameters(TTSParameters):
    """What Qwen-TTS takes besides the voice; each field that is set goes into `input`."""

    language_type: Language | None = Field(
        default=None,
        description="The language to pronounce the text in (DashScope's default: Auto, "
        "detected from the text).",
    )
    instructions: str | None = Field(
        default=None,
        description="How to speak (tone, pace, emotion): the instruct models "
        "(qwen3-tts-instruct-flash) only.",
    )
    optimize_instructions: bool | None = Field(
        default=None, description="Let the service rewrite `instructions` (instruct models)."
    )


class DashScopeTTSModel(DashScopeClients, TTSModel):
    """Qwen-TTS (`qwen3-tts-flash`...) over HTTP: the whole text in one request.

    Example:
        >>> model = DashScopeTTSModel(DashScopeCredential(), "qwen3-tts-flash")
        >>> response = await model.synthesize("Hello")  # doctest: +SKIP

    Args:
        credential: The key and endpoint (`DashScopeCredential`); from the environment when
            None.
        model: The model's name at DashScope.
        parameters: `DashScopeTTSParameters` (or a dict): `voice`, `language_type`...
        stream: Whether `synthesize` yields pieces of audio as they arrive.
        max_retries: Tries after the first on retryable failures.
        retry_delay: Seconds before the first retry.
        timeout: Seconds to wait for DashScope between two pieces of audio.
    """

    provider: ClassVar[str] = "dashscope"
    credential_class: ClassVar[type[Credential] | None] = DashScopeCredential
    parameters_class: ClassVar[type[TTSParameters]] = DashScopeTTSParameters
    cards_location: ClassVar[str | Path | None] = "parley.providers.dashscope.speech"

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[TTSModelCard]:
        """The cards of this class's kind: realtime or not (both share `_models/`)."""
        return own_cards(cls, super().list_models(custom_yaml_dir))

    def request_body(self, text: str, parameters: TTSParameters) -> dict[str, Any]:
        """The request's body: the text and every parameter that is set, in `input`."""
        return {"model": self.model, "input": {"text": text, **parameters.to_kwargs()}}

    async def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        ChatModel.check_allowed(self.endpoint())
        client = self.client()
        finished = False
        with dashscope_errors(self.model, self.provider):
            response = await client.transport.open_stream(
                "POST",
                GENERATION_PATH,
                json=self.request_body(text, parameters),
                headers={"X-DashScope-SSE": "enable"},
                base_url=client.config.base_url,
                sdk_module="audio",
            )
            try:
                async for name, data in iter_events(response.aiter_bytes()):
                    chunk, finished = self._read_event(name, data)
                    if chunk is not None:
                        yield chunk
            finally:
                await response.aclose()
        if not finished:
            raise ModelConnectionError(
                f"the {self.provider} audio stream ended before it was complete",
                model=self.model,
                provider=self.provider,
            )

    def _read_event(self, name: str, data: bytes) -> tuple[AudioChunk | None, bool]:
        """One event's audio (None if it has none) and whether it is the last.

        Raises:
            ModelError: An error event, or an event that is not DashScope's JSON.
        """
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ModelOutputError(
                f"{self.provider} sent an event that is not JSON: {data[:200]!r}",
                model=self.model,
                provider=self.provider,
            )
        if name == "error" or body.get("code"):
            raise error_from_code(
                None,
                str(body.get("code") or ""),
                body.get("message"),
                body,
                model=self.model,
                provider=self.provider,
            )
        output = as_dict(body.get("output"))
        audio = as_dict(output.get("audio"))
        usage = as_dict(body.get("usage"))
        pcm = self._decode(audio.get("data") or "")
        chunk = AudioChunk(
            pcm,
            pcm_media_type(SAMPLE_RATE),
            input_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
        )
        return chunk, output.get("finish_reason") == "stop"

    def _decode(self, data: Any) -> bytes:
        try:
            return base64.b64decode(data, validate=True) if data else b""
        except (binascii.Error, TypeError, ValueError):
            raise ModelOutputError(
                f"{self.provider} sent audio that is not base64: {str(data)[:80]!r}",
                model=self.model,
                provider=self.provider,
            ) from None


def own_cards(cls: type[TTSModel], cards: list[TTSModelCard]) -> list[TTSModelCard]:
    """The cards whose `realtime` flag is the class's: the two Qwen-TTS classes share a folder."""
    return [card for card in cards if card.realtime == cls.realtime]


def as_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field missing or malformed)."""
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) else None
