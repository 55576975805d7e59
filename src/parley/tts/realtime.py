"""`RealtimeTTSModel`: speech from text that arrives in pieces, as a model writes it.

A realtime model holds a connection (a WebSocket) open. `push(text)` sends a piece and
returns at once with whatever audio is ready (possibly none); `synthesize()` with no text
says the utterance is complete and returns (or, with `stream=True`, yields) the rest of the
audio. `receive()` waits for the next audio, for callers that listen while they push (the
agent middleware does). Open and close the connection with `async with model:` or
`connect()` / `close()`; `push` connects on first use.

A provider implements `_open_session(parameters)`, which returns a `RealtimeSession`: send
text, finish, read events (audio, and the end of the utterance), close. The base does the
rest:

- **cold start**: text is held until `cold_start_length` characters and `cold_start_words`
  words have arrived (each when set), so the voice does not start on a fragment and stall;
- **reconnection**: when the connection drops, it is opened again (at most `max_retries`
  times per utterance, waiting `retry_delay` seconds and doubling), the utterance's text is
  sent again, and the audio already received is skipped, so nothing is lost or heard twice
  (the same assumption as `TTSModel`'s retries: a voice renders the same text to the same
  samples);
- the utterance's audio and usage are gathered into `TTSResponse`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from parley.errors import ModelConnectionError, ModelError, ModelTimeoutError, UserError
from parley.models.credentials import Credential
from parley.tts.base import AudioChunk, TTSModel, TTSParameters, TTSResponse, TTSUsage, _whole

__all__ = ["RealtimeSession", "RealtimeTTSModel", "UtteranceDone"]


@dataclass
class UtteranceDone:
    """A session's event: everything sent before `finish()` has been spoken."""

    input_tokens: int | None = None
    output_tokens: int | None = None


class RealtimeSession(ABC):
    """One open connection to a realtime provider, as `RealtimeTTSModel` drives it."""

    reusable: ClassVar[bool] = False
    """Whether another utterance may follow on this connection once one is done."""

    @abstractmethod
    async def send_text(self, text: str) -> None:
        """Send a piece of the utterance's text."""

    @abstractmethod
    async def finish(self) -> None:
        """Say the utterance is complete: speak what remains, then end with `UtteranceDone`."""

    @abstractmethod
    def events(self) -> AsyncIterator[AudioChunk | UtteranceDone]:
        """Audio as it arrives, and `UtteranceDone` after `finish()`.

        Raises:
            ModelConnectionError: The connection dropped (the model reconnects).
            ModelError: The provider reported an error (the model gives up).
        """

    @abstractmethod
    async def close(self) -> None:
        """Close the connection (idempotent)."""


_Item = AudioChunk | UtteranceDone | BaseException


class RealtimeTTSModel(TTSModel):
    """A TTS model that takes its text in pieces over one connection.

    Args:
        credential: The provider's credential; None builds the default one (environment).
        model: The model's name at the provider.
        parameters: The provider's `Parameters` (or a dict), e.g. `{"voice": "Cherry"}`.
        stream: Whether `synthesize` yields pieces of audio as they arrive.
        cold_start_length: Characters to hold before the first text is sent (None: no
            minimum).
        cold_start_words: Words to hold before the first text is sent (None: no minimum).
        max_retries: Reconnections per utterance when the connection drops.
        retry_delay: Seconds before the first reconnection; each next one waits twice as long.
        timeout: Seconds to wait for the provider between two pieces of audio.
    """

    realtime: ClassVar[bool] = True

    def __init__(
        self,
        credential: Credential | None = None,
        model: str = "",
        parameters: TTSParameters | Mapping[str, Any] | None = None,
        stream: bool = False,
        cold_start_length: int | None = None,
        cold_start_words: int | None = None,
        max_retries: int = 3,
        retry_delay: float = 5.0,
        *,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(
            credential, model, parameters, stream, max_retries, retry_delay, timeout=timeout
        )
        for name, value in (
            ("cold_start_length", cold_start_length),
            ("cold_start_words", cold_start_words),
        ):
            if value is not None and value < 0:
                raise UserError(f"{name} must be 0 or more, got {value}")
        self.cold_start_length = cold_start_length
        self.cold_start_words = cold_start_words
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self._session: RealtimeSession | None = None
        self._reader: asyncio.Task[None] | None = None
        # What the reader task received and the caller has not taken yet, in order.
        self._items: deque[_Item] = deque()
        self._arrived = asyncio.Event()
        self._reset_utterance()

    def _reset_utterance(self) -> None:
        self._held = ""
        self._sent: list[str] = []
        self._started = False
        self._finishing = False
        self._received = 0
        self._skip = 0
        self._reconnects = 0
        self._begun = time.perf_counter()
        self._tokens: tuple[int | None, int | None] = (None, None)

    def clone(self) -> Self:
        """A model of the same settings with a connection of its own (none open yet).

        One model speaks one utterance at a time: concurrent speakers (the service's runs)
        each take a clone of a shared model.
        """
        other = copy.copy(self)
        other._session = None
        other._reader = None
        other._items = deque()
        other._arrived = asyncio.Event()
        other._reset_utterance()
        return other

    # -- the provider's part ------------------------------------------------------------------

    async def _open_session(self, parameters: TTSParameters) -> RealtimeSession:
        """Open a connection configured with `parameters` (providers implement)."""
        raise NotImplementedError

    # -- the connection -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a connection is open."""
        return self._session is not None

    async def connect(self) -> None:
        """Open the connection (nothing to do when it is open)."""
        if self._session is not None:
            return
        self._items.clear()
        self._session = await self._open_with_retries()
        self._reader = asyncio.create_task(self._read(self._session))

    async def close(self) -> None:
        """Close the connection; text pushed and not yet spoken is dropped."""
        reader, session = self._reader, self._session
        self._reader = self._session = None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        if session is not None:
            await session.close()
        self._reset_utterance()

    async def aclose(self) -> None:
        """The same as `close()`."""
        await self.close()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _open_with_retries(self) -> RealtimeSession:
        attempt = 0
        while True:
            try:
                return await asyncio.wait_for(self._open_session(self.parameters), self.timeout)
            except (ModelConnectionError, TimeoutError, OSError) as exc:
                attempt += 1
                if attempt > self.max_retries:
                    raise _connection_error(self, exc) from exc
                await asyncio.sleep(self.retry_delay * 2 ** (attempt - 1))

    async def _read(self, session: RealtimeSession) -> None:
        """Move the session's events to the queue, reconnecting when the connection drops."""
        while True:
            try:
                async for event in session.events():
                    self._take(event)
                    if isinstance(event, UtteranceDone) and not session.reusable:
                        return
                if not self._sent and not self._finishing:
                    await self._forget(session)  # closed between utterances
                    return
                raise ModelConnectionError("the connection closed mid-utterance")
            except ModelConnectionError as exc:
                replacement = await self._reconnect(session, exc)
                if replacement is None:
                    return
                session = replacement
            except Exception as exc:  # an error event, or a bug: the caller sees it
                self._put(exc)
                return

    async def _forget(self, session: RealtimeSession) -> None:
        """Drop a session the provider closed while idle, so the next push opens another."""
        if self._session is session:
            self._session = self._reader = None
        with contextlib.suppress(Exception):
            await session.close()

    def _take(self, event: AudioChunk | UtteranceDone) -> None:
        if isinstance(event, UtteranceDone):
            self._tokens = (event.input_tokens, event.output_tokens)
            self._put(event)
            return
        data = event.data
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        if data:
            self._received += len(data)
            self._put(AudioChunk(data, event.media_type))

    async def _reconnect(
        self, broken: RealtimeSession, error: ModelConnectionError
    ) -> RealtimeSession | None:
        """A new session carrying the utterance on, or None after putting the error out."""
        with contextlib.suppress(Exception):
            await broken.close()
        while self._reconnects < self.max_retries:
            self._reconnects += 1
            await asyncio.sleep(self.retry_delay * 2 ** (self._reconnects - 1))
            try:
                session = await asyncio.wait_for(self._open_session(self.parameters), self.timeout)
                if self._sent:
                    await session.send_text("".join(self._sent))
                if self._finishing:
                    await session.finish()
            except (ModelConnectionError, TimeoutError, OSError):
                continue
            self._skip = self._received  # what was heard is not heard again
            self._session = session
            return session
        self._put(_connection_error(self, error))
        return None

    # -- speaking -----------------------------------------------------------------------------

    async def push(self, text: str) -> TTSResponse:
        """Add `text` to the utterance; return the audio ready so far (content None if none).

        It does not wait for audio. Text is held until the cold-start thresholds are met.
        """
        if not isinstance(text, str):
            raise UserError(f"text to speak must be a str, got {type(text).__name__}")
        await self._raise_if_failed()
        await self.connect()
        self._held += text
        if self._started or self._warm():
            await self._send_held()
        return self._ready()

    async def receive(self) -> TTSResponse:
        """Wait for audio (or the end of the utterance) and return all that is ready.

        Raises:
            ModelTimeoutError: No audio came within `timeout` seconds.
        """
        await self._raise_if_failed()
        if self._session is None:
            raise UserError("nothing is being spoken: push text first")
        item = await self._next()
        self._items.appendleft(item)  # back in line, so _ready() sees it in order
        return self._ready()

    async def synthesize(
        self, text: str | None = None, **overrides: Any
    ) -> TTSResponse | AsyncGenerator[TTSResponse, None]:
        """Finish the utterance (after pushing `text`, when given): the rest of its audio.

        With `stream=False`, one response with all audio not yet returned by `push`; with
        `stream=True`, an async iterator of pieces, the last with `is_last=True`.
        """
        if overrides:
            raise UserError(
                "a realtime model's parameters are set per connection: pass them when building it"
            )
        if self.stream:
            return self._drain(text)
        return await _gather(self._drain(text))

    async def synthesize_stream(
        self, text: str, **overrides: Any
    ) -> AsyncGenerator[TTSResponse, None]:
        """Speak a whole `text` as one utterance, yielding audio as it arrives."""
        if overrides:
            raise UserError(
                "a realtime model's parameters are set per connection: pass them when building it"
            )
        if self._sent or self._held:
            raise UserError("an utterance is under way: finish it with synthesize() first")
        async for piece in self._drain(text):
            yield piece

    async def synthesize_whole(self, text: str, **overrides: Any) -> TTSResponse:
        """Speak a whole `text` as one utterance; raw PCM comes back as a WAV file."""
        whole = await _gather(self.synthesize_stream(text, **overrides))
        if whole.content is None:
            return whole
        data, media_type = _whole(whole.audio_bytes, whole.media_type or "")
        return TTSResponse.of_audio(data, media_type, is_last=True, usage=whole.usage)

    async def _drain(self, text: str | None) -> AsyncGenerator[TTSResponse, None]:
        if text:
            first = await self.push(text)
            if first.content is not None:
                yield first
        if not (self._held or self._sent) and (self._session is None or not self._started):
            raise UserError("there is no text to speak: nothing was pushed")
        await self.connect()
        if self._held:
            await self._send_held()
        self._finishing = True
        assert self._session is not None
        # A connection that dropped is the reader's to replace; it finishes the new one.
        with contextlib.suppress(ModelConnectionError):
            await self._session.finish()
        done = False
        try:
            while True:
                item = await self._next()
                if isinstance(item, UtteranceDone):
                    done = True
                    break
                yield TTSResponse.of_audio(item.data, item.media_type, is_last=False)
            usage = TTSUsage(
                input_tokens=self._tokens[0],
                output_tokens=self._tokens[1],
                characters=sum(map(len, self._sent)),
                time=time.perf_counter() - self._begun,
            )
            yield TTSResponse(content=None, is_last=True, usage=usage)
        finally:
            await self._end_utterance(done)

    async def _end_utterance(self, done: bool) -> None:
        session = self._session
        if not done or session is None or not session.reusable:
            # Left early, the rest of this utterance's audio would be the next one's start;
            # a provider that ends the connection with the utterance is closed anyway.
            await self.close()
        else:
            self._reset_utterance()

    # -- helpers ------------------------------------------------------------------------------

    def _warm(self) -> bool:
        """Whether enough text was held to start (the cold-start thresholds)."""
        if self.cold_start_length is not None and len(self._held) < self.cold_start_length:
            return False
        return not (
            self.cold_start_words is not None and len(self._held.split()) < self.cold_start_words
        )

    async def _send_held(self) -> None:
        if not self._held:
            return
        text, self._held = self._held, ""
        if not self._sent:
            self._begun = time.perf_counter()
        self._sent.append(text)
        self._started = True
        assert self._session is not None
        # A connection that dropped is the reader's to replace: it sends the new one all of
        # `_sent`, this piece included, so the piece is not lost (nor sent twice).
        with contextlib.suppress(ModelConnectionError):
            await self._session.send_text(text)

    def _put(self, item: _Item) -> None:
        self._items.append(item)
        self._arrived.set()

    async def _next(self) -> AudioChunk | UtteranceDone:
        while not self._items:
            self._arrived.clear()
            try:
                # Not wait_for: on 3.11 it swallows a cancellation that meets the event being
                # set, and a listener cancelled then (the agent middleware's) would hang.
                async with asyncio.timeout(self.timeout):
                    await self._arrived.wait()
            except TimeoutError:
                raise ModelTimeoutError(
                    f"{self.model} sent no audio for {self.timeout:g} s", provider=self.provider
                ) from None
        item = self._items.popleft()
        if isinstance(item, BaseException):
            await self.close()
            raise item
        return item

    async def _raise_if_failed(self) -> None:
        """Raise an error the reader put out (the connection is closed first)."""
        if self._items and isinstance(error := self._items[0], BaseException):
            await self.close()
            raise error

    def _ready(self) -> TTSResponse:
        """All audio waiting as one response (an error waiting stays for the next call)."""
        parts: list[bytes] = []
        media_type = ""
        while self._items and isinstance(self._items[0], AudioChunk):
            item = self._items.popleft()
            assert isinstance(item, AudioChunk)
            parts.append(item.data)
            media_type = media_type or item.media_type
        if not parts:
            return TTSResponse(content=None, is_last=False)
        return TTSResponse.of_audio(b"".join(parts), media_type, is_last=False)

    def _call_api(self, text: str, parameters: TTSParameters) -> AsyncIterator[AudioChunk]:
        raise NotImplementedError("a realtime model speaks through its session")


async def _gather(pieces: AsyncGenerator[TTSResponse, None]) -> TTSResponse:
    """One response holding the audio and usage of a stream of pieces."""
    parts: list[bytes] = []
    media_type = ""
    usage: TTSUsage | None = None
    async for piece in pieces:
        if piece.content is not None:
            parts.append(piece.audio_bytes)
            media_type = media_type or piece.media_type or ""
        usage = piece.usage or usage
    if not parts:
        return TTSResponse(content=None, is_last=True, usage=usage)
    return TTSResponse.of_audio(b"".join(parts), media_type, is_last=True, usage=usage)


def _connection_error(model: RealtimeTTSModel, error: BaseException) -> ModelError:
    return ModelConnectionError(
        f"{model.model}: the connection failed after {model.max_retries} reconnections: {error}",
        provider=model.provider,
    )
