"""AgentScope's text-to-speech models under `agentscope.tts`'s names, on parley's.

As in AgentScope: `await model.synthesize(text)` answers a `TTSResponse` whose `content` is
a `DataBlock` of base64 audio, or (streaming, the default) an async generator of them, each
an incremental piece, the last with `is_last=True`; no text answers `content=None`.
`OpenAITTSModel` wraps parley's (`to_parley()`); AgentScope's DashScope and Gemini speech
models are not here yet: use parley's `parley.tts.dashscope` directly.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from parley.compat.agentscope.message import DataBlock, blocks_from_parley
from parley.messages import new_id
from parley.tts import base as tb
from parley.tts.base import TTSModel as TTSModelBase
from parley.tts.openai import OpenAITTSModel as _OpenAI

__all__ = ["OpenAITTSModel", "TTSModelBase", "TTSResponse", "TTSUsage"]


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


class OpenAITTSModel:
    """OpenAI's `/v1/audio/speech`, as AgentScope's class (mp3 and voice `alloy` by default)."""

    class Parameters(BaseModel):
        """Speech parameters, as AgentScope names them."""

        voice: str = Field(default="alloy", description="The voice.")
        response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = Field(
            default="mp3", description="The audio's format."
        )
        instructions: str | None = Field(default=None, description="How to speak.")

    realtime: bool = False

    def __init__(
        self,
        credential: Any,
        model: str = "tts-1",
        parameters: OpenAITTSModel.Parameters | None = None,
        stream: bool = True,
    ) -> None:
        self.credential = credential
        self.model = model
        self.parameters = parameters or self.Parameters()
        self.stream = stream
        fields = self.parameters.model_dump(exclude_none=True)
        self._parley = _OpenAI(credential, model, fields, stream=stream)

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
            pending = piece
        if pending is not None:
            yield _response(pending, is_last=True)

    async def aclose(self) -> None:
        """Close the wrapped model's connections."""
        await self._parley.aclose()
