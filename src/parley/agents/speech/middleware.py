"""`TTSMiddleware`: an agent's answers spoken, as audio events beside the text.

Give it to an agent (`Agent(..., middleware=[TTSMiddleware(voice)])`) or to one run
(`agent.stream(...).use(TTSMiddleware(voice))`). The run's events pass through unchanged;
audio events are added, one block of audio per *text block*: a stretch of `TextDelta`s,
ended by the first other event (a tool call starting, `MessageCompleted`, `RunEnded`...).
Thinking and tool calls are not spoken.

- A plain model (`TTSModel`) speaks each text block once it has ended: the block's whole
  text is synthesized and its audio streamed out as it is made.
- A realtime model (`RealtimeTTSModel`) is pushed each `TextDelta` as it arrives, and its
  audio goes out as soon as it is made, merged with the agent's events (the next event and
  the voice's next audio are awaited together), so an answer is heard while it is written.
  At the block's end the rest is drained. Each run speaks through its own clone of the
  model (its own connection), closed when the run's events end or are closed.

For each block: `AudioStarted` (before its first audio), `AudioDelta`s (base64 PCM),
`AudioEnded` (seconds of audio, the text spoken) — all before the event that ended the block
is passed on, so a caller that stops at `RunEnded` has heard everything. A voice that fails
does not fail the answer: the text events go on unchanged, and the block ends with
`AudioEnded(error=...)` (logged on `parley.tts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.agents.events import AgentEvent, AudioDelta, AudioEnded, AudioStarted, TextDelta
from parley.errors import ModelTimeoutError, UserError
from parley.messages import new_id
from parley.tts import RealtimeTTSModel, TTSModel, TTSResponse, pcm_format

if TYPE_CHECKING:
    from parley.agents.run import AgentRun

__all__ = ["TTSMiddleware"]

log = logging.getLogger("parley.tts")


class TTSMiddleware:
    """Speaks an agent's answer text: adds `AudioStarted`/`AudioDelta`/`AudioEnded` events.

    Args:
        model: The voice: a plain `TTSModel` (each text block spoken when it ends) or a
            `RealtimeTTSModel` (spoken while it is written).
    """

    def __init__(self, model: TTSModel) -> None:
        if not isinstance(model, TTSModel):
            raise UserError(f"TTSMiddleware needs a TTSModel, got {type(model).__name__}")
        self.model = model

    def __repr__(self) -> str:
        return f"TTSMiddleware({self.model!r})"

    def wrap(self, events: AsyncIterator[AgentEvent], run: AgentRun) -> AsyncIterator[AgentEvent]:
        """The run's events with the answer's audio added (see the module's docstring)."""
        model = self.model.clone() if isinstance(self.model, RealtimeTTSModel) else self.model
        return _Speaker(model).speak(events)


@dataclass
class _Block:
    """One text block being spoken."""

    id: str
    text: str = ""
    sent: int = 0
    """How much of `text` went to the realtime voice."""
    media_type: str | None = None
    size: int = 0
    error: str | None = None


async def _next_event(events: AsyncIterator[AgentEvent]) -> AgentEvent | None:
    return await anext(events, None)


async def _listen(model: RealtimeTTSModel) -> TTSResponse:
    """The voice's next audio; a pause in the text (a slow model) is no failure."""
    while True:
        try:
            return await model.receive()
        except ModelTimeoutError:
            continue


class _Speaker:
    """The middleware's state for one run."""

    def __init__(self, model: TTSModel) -> None:
        self.model = model
        self.realtime = model if isinstance(model, RealtimeTTSModel) else None
        self.block: _Block | None = None
        self.listening: asyncio.Task[TTSResponse] | None = None

    async def speak(self, events: AsyncIterator[AgentEvent]) -> AsyncGenerator[AgentEvent, None]:
        following: asyncio.Task[AgentEvent | None] | None = None  # raced against the voice
        try:
            while True:
                if self.listening is None:
                    event = await (following or _next_event(events))
                    following = None
                else:
                    following = following or asyncio.ensure_future(_next_event(events))
                    await asyncio.wait(
                        {following, self.listening}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if self.listening.done():  # audio first: it is what is late
                        for out in await self._heard():
                            yield out
                        continue
                    event, following = following.result(), None
                if event is None:
                    break
                async with contextlib.aclosing(self._on(event)) as outs:
                    async for out in outs:
                        yield out
            async with contextlib.aclosing(self._end_block()) as outs:  # no RunEnded came
                async for out in outs:
                    yield out
        finally:
            await _stop(following)
            await _stop(self.listening)
            if self.realtime is not None:
                await self.realtime.close()  # the connection goes with the run

    async def _on(self, event: AgentEvent) -> AsyncGenerator[AgentEvent, None]:
        if isinstance(event, TextDelta):
            yield event
            for out in await self._text(event.text):
                yield out
            return
        if not isinstance(event, AudioStarted | AudioDelta | AudioEnded):
            async with contextlib.aclosing(self._end_block()) as outs:
                async for out in outs:
                    yield out
        yield event

    async def _text(self, text: str) -> list[AgentEvent]:
        block = self.block = self.block or _Block(id=new_id())
        block.text += text
        if self.realtime is None or block.error is not None or not block.text.strip():
            return []  # a plain voice waits for the block's end; leading space waits too
        try:
            ready = await self.realtime.push(block.text[block.sent :])
            block.sent = len(block.text)
        except Exception as exc:
            await self._fail(block, exc)
            return []
        if self.listening is None:
            self.listening = asyncio.ensure_future(_listen(self.realtime))
        return self._audio(block, ready)

    async def _heard(self) -> list[AgentEvent]:
        """The audio the finished listening task got, listening on for more."""
        task, self.listening = self.listening, None
        assert task is not None
        assert self.block is not None
        assert self.realtime is not None
        try:
            heard = task.result()
        except Exception as exc:
            await self._fail(self.block, exc)
            return []
        self.listening = asyncio.ensure_future(_listen(self.realtime))
        return self._audio(self.block, heard)

    async def _end_block(self) -> AsyncGenerator[AgentEvent, None]:
        block, self.block = self.block, None
        if block is None or not block.text.strip():
            return
        if block.error is None:
            try:
                async for response in self._rest(block):
                    for out in self._audio(block, response):
                        yield out
            except Exception as exc:
                await self._fail(block, exc)
        fmt = pcm_format(block.media_type) if block.media_type else None
        yield AudioEnded(
            block_id=block.id,
            seconds=fmt.duration(block.size) if fmt else 0.0,
            text=block.text,
            error=block.error,
        )

    async def _rest(self, block: _Block) -> AsyncGenerator[TTSResponse, None]:
        """The block's audio not yet handed out: drained (realtime) or synthesized whole."""
        if self.realtime is None:
            async for response in self.model.synthesize_stream(block.text):
                yield response
            return
        task, self.listening = self.listening, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                yield await task  # it may have heard something just before
        rest = await self.realtime.synthesize()
        if isinstance(rest, TTSResponse):
            yield rest
            return
        async for response in rest:
            yield response

    def _audio(self, block: _Block, response: TTSResponse) -> list[AgentEvent]:
        if response.content is None or response.content.source.type != "base64":
            return []
        source = response.content.source
        out: list[AgentEvent] = []
        if block.media_type is None:
            block.media_type = source.media_type
            out.append(AudioStarted(block_id=block.id, media_type=source.media_type))
        block.size += len(response.audio_bytes)
        out.append(AudioDelta(block_id=block.id, data=source.data, media_type=source.media_type))
        return out

    async def _fail(self, block: _Block, exc: Exception) -> None:
        """The voice failed: the block goes unspoken, the answer goes on."""
        block.error = f"{type(exc).__name__}: {exc}"
        log.warning("the voice failed; the answer goes on without it: %s", block.error)
        await _stop(self.listening)
        self.listening = None
        if self.realtime is not None:
            await self.realtime.close()  # a fresh connection for the next block


async def _stop(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
