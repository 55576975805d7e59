"""CosyVoice v3 with streaming input, over DashScope's duplex WebSocket inference API.

`DashScopeCosyVoiceRealtimeTTSModel` pushes text as a model writes it and hands out raw PCM
(`audio/pcm;rate=...`) as the server speaks it. The protocol (Model Studio's CosyVoice
WebSocket API, and the SDK's `dashscope.audio.tts_v2` / `dashscope.v2.resources.audio.tts`):

- connect to `wss://dashscope.aliyuncs.com/api-ws/v1/inference` with `Authorization: bearer
  <key>` (and `X-DashScope-WorkSpace`); a bad key is refused at the handshake (401/403);
- `run-task` (header `{action, task_id, streaming: duplex}`; payload `{task_group: audio,
  task: tts, function: SpeechSynthesizer, model, parameters, input: {}}`), answered by
  `task-started`; only then `continue-task` (`input.text`) per piece, then `finish-task`;
- audio comes as binary frames, between `result-generated` events; the server cuts the text
  into sentences and speaks a sentence once it is complete, so a piece without a sentence
  end gives no audio until more text or `finish-task` (which speaks the rest);
- `task-finished` (its `usage.characters`: what is billed) ends the task and the connection
  may carry the next `run-task` (a new task id): the SDK's `WsConnection` and its
  `SpeechSynthesizerObjectPool` reuse one socket so, and so does this model (`reusable`);
- `task-failed` (`error_code`, `error_message`) ends the task; the server closes the socket.

Sambert models are not served: they take their whole text in `run-task` (`streaming: out`,
the SDK's `dashscope.audio.tts`), not pieces.

Why the `websockets` library and not the SDK's synthesizer: the 1.x `tts_v2.SpeechSynthesizer`
reads the process-wide `dashscope.api_key` (parley keeps keys per credential), only logs a
dropped connection (its `on_close`/`on_error` reach no callback, so the caller waits out the
completion timeout instead of reconnecting), closes the socket after every task, runs a
thread per connection and reports a refused handshake as a 5-second `TimeoutError`. The 2.0
`client.audio.tts.connect()` takes a key and URL per session and raises on a dropped
connection, but it is synchronous only (`AsyncAudio` has no TTS): a blocking
websocket-client `recv()` per frame, which would need a thread per connection and a hop per
send to sit under asyncio. `websockets` speaks the same three messages on the event loop,
tells a dropped connection (`ConnectionClosed`) and a refused handshake (`InvalidStatus`)
apart, and the test server is built on it too.

The WebSocket URL: derived from the credential's `base_url` when it has one
(`https://host/api/v1` gives `wss://host/api-ws/v1/inference`, so a test server or region
set there serves both APIs); else the SDK's `DASHSCOPE_WEBSOCKET_BASE_URL`; else derived
from the credential's endpoint (`DASHSCOPE_HTTP_BASE_URL`, or Beijing's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from parley.errors import ConfigurationError, MissingDependencyError, ModelConnectionError
from parley.models.cards import TTSModelCard
from parley.providers.dashscope._errors import error_from_code
from parley.providers.dashscope.credentials import DashScopeCredential
from parley.tts._audio import pcm_media_type
from parley.tts.base import AudioChunk, TTSParameters
from parley.tts.realtime import RealtimeSession, RealtimeTTSModel, UtteranceDone

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = [
    "DashScopeCosyVoiceParameters",
    "DashScopeCosyVoiceRealtimeTTSModel",
]

_CARD_PREFIXES = ("cosyvoice-",)
"""This model's cards in the shared `parley.providers.dashscope.speech/_models/` folder."""


class DashScopeCosyVoiceParameters(TTSParameters):
    """CosyVoice's synthesis parameters (the audio format is always raw PCM)."""

    sample_rate: Literal[8000, 16000, 22050, 24000, 44100, 48000] = Field(
        default=24000, description="Samples per second of the PCM audio."
    )
    volume: int = Field(default=50, ge=0, le=100, description="Loudness, 0 to 100.")
    rate: float = Field(default=1.0, ge=0.5, le=2.0, description="Speed, 0.5 to 2 times.")
    pitch: float = Field(default=1.0, ge=0.5, le=2.0, description="Pitch, 0.5 to 2 times.")


class DashScopeCosyVoiceRealtimeTTSModel(RealtimeTTSModel):
    """CosyVoice v3 (`cosyvoice-v3-flash`, `cosyvoice-v3-plus`) fed text as it is written.

    Audio comes a sentence at a time: `push` of a partial sentence returns no audio, and
    `synthesize()` speaks the rest. One connection carries one utterance after another.

    Example:
        >>> model = DashScopeCosyVoiceRealtimeTTSModel(
        ...     model="cosyvoice-v3-flash", parameters={"voice": "longanyang"}
        ... )  # doctest: +SKIP
        >>> async with model:  # doctest: +SKIP
        ...     await model.push("Hello there. How")
        ...     rest = await model.synthesize(" are you?")

    Args: as `RealtimeTTSModel`'s; `parameters` are `DashScopeCosyVoiceParameters`.
    """

    provider: ClassVar[str] = "dashscope"
    parameters_class: ClassVar[type[TTSParameters]] = DashScopeCosyVoiceParameters
    credential_class: ClassVar[type[DashScopeCredential]] = DashScopeCredential
    cards_location: ClassVar[str | Path | None] = "parley.providers.dashscope.speech"

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[TTSModelCard]:
        """The CosyVoice cards (the folder is shared with DashScope's other speech models)."""
        cards = super().list_models(custom_yaml_dir)
        if custom_yaml_dir is not None:
            return cards
        return [card for card in cards if card.name.startswith(_CARD_PREFIXES)]

    async def _open_session(self, parameters: TTSParameters) -> RealtimeSession:
        credential = self.credential
        assert isinstance(credential, DashScopeCredential)  # checked when the model was built
        key = credential.key()
        if not key:
            raise ConfigurationError(
                f"{type(self).__name__} has no API key: pass one in the credential or set "
                "DASHSCOPE_API_KEY"
            )
        headers = {"Authorization": f"bearer {key}"}
        if credential.workspace:
            headers["X-DashScope-WorkSpace"] = credential.workspace
        assert isinstance(parameters, DashScopeCosyVoiceParameters)
        connection = await self._connect(credential.websocket_endpoint("inference"), headers)
        return _CosyVoiceSession(connection, self, parameters)

    async def _connect(self, url: str, headers: dict[str, str]) -> ClientConnection:
        """The WebSocket, its handshake's refusals as parley's errors."""
        try:
            from websockets.asyncio.client import connect  # noqa: PLC0415
            from websockets.exceptions import InvalidStatus, WebSocketException  # noqa: PLC0415
        except ImportError as exc:
            raise MissingDependencyError("websockets", "dashscope") from exc
        try:
            return await connect(url, additional_headers=headers, open_timeout=self.timeout)
        except InvalidStatus as exc:
            raise self._refused(exc.response.status_code, exc.response.body) from exc
        except (WebSocketException, OSError) as exc:
            raise ModelConnectionError(
                f"cannot reach {self.provider} at {url}: {exc}",
                model=self.model,
                provider=self.provider,
            ) from exc

    def _refused(self, status: int, body: bytes | bytearray | None) -> Exception:
        """A refused handshake: 5xx and 429 are retried (a connection failure), else final."""
        text = (body or b"").decode("utf-8", "replace").strip()
        if status >= 500 or status == 429:
            return ModelConnectionError(
                f"{self.provider} refused the WebSocket with {status}: {text}",
                model=self.model,
                provider=self.provider,
            )
        return error_from_code(status, None, text or None, model=self.model, provider=self.provider)


class _CosyVoiceSession(RealtimeSession):
    """One WebSocket; a task per utterance, started by its first piece of text.

    A pump task reads the socket, so a new task's `task-started` is seen even while nobody
    iterates `events()` (the model resends an utterance from its reader, on reconnection).
    Text pushed before `task-started` is held and sent when it comes, so `push` never waits
    for the round trip.
    """

    reusable: ClassVar[bool] = True

    def __init__(
        self,
        connection: ClientConnection,
        owner: DashScopeCosyVoiceRealtimeTTSModel,
        parameters: DashScopeCosyVoiceParameters,
    ) -> None:
        self._ws = connection
        self._model = owner.model
        self._provider = owner.provider
        self._parameters = parameters
        self._media_type = pcm_media_type(parameters.sample_rate)
        self._task_id: str | None = None
        self._running = False  # task-started seen for the current task
        self._pending: list[str] = []
        self._finish_pending = False
        self._frames: asyncio.Queue[AudioChunk | UtteranceDone | BaseException | None] = (
            asyncio.Queue()
        )
        self._pump = asyncio.create_task(self._read_socket())

    # -- sending ------------------------------------------------------------------------------

    async def send_text(self, text: str) -> None:
        """Send a piece; the first of an utterance starts its task."""
        if self._task_id is None:
            await self._start_task()
        if not self._running:
            self._pending.append(text)
            return
        await self._send("continue-task", {"input": {"text": text}})

    async def finish(self) -> None:
        """End the task's input: the server speaks what it holds, then `task-finished`."""
        if self._task_id is None:
            self._frames.put_nowait(UtteranceDone())  # nothing was said
            return
        if not self._running:
            self._finish_pending = True
            return
        await self._send("finish-task", {"input": {}})

    async def _start_task(self) -> None:
        self._task_id = uuid.uuid4().hex
        self._running = False
        parameters = self._parameters
        await self._send(
            "run-task",
            {
                "task_group": "audio",
                "task": "tts",
                "function": "SpeechSynthesizer",
                "model": self._model,
                "parameters": {
                    "text_type": "PlainText",
                    "voice": parameters.voice,
                    "format": "pcm",
                    "sample_rate": parameters.sample_rate,
                    "volume": parameters.volume,
                    "rate": parameters.rate,
                    "pitch": parameters.pitch,
                },
                "input": {},
            },
        )

    async def _started(self) -> None:
        """`task-started`: send what was held, in order, then the finish if it was asked."""
        while self._pending:
            await self._send("continue-task", {"input": {"text": self._pending.pop(0)}})
        self._running = True
        if self._finish_pending:
            self._finish_pending = False
            await self._send("finish-task", {"input": {}})

    async def _send(self, action: str, payload: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

        header = {"action": action, "task_id": self._task_id, "streaming": "duplex"}
        # A socket that closed (dropped, or closed by the server while idle) is not reported
        # here: the pump sees the close and reports it, and the model reconnects and sends
        # the utterance again, this text included.
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(json.dumps({"header": header, "payload": payload}))

    # -- receiving ----------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[AudioChunk | UtteranceDone]:
        """Audio as it comes, and `UtteranceDone` at each `task-finished`."""
        while True:
            item = await self._frames.get()
            if item is None:
                return  # closed between tasks
            if isinstance(item, BaseException):
                raise item
            yield item

    async def _read_socket(self) -> None:
        from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

        try:
            async for message in self._ws:
                if isinstance(message, bytes):
                    self._frames.put_nowait(AudioChunk(message, self._media_type))
                elif not await self._on_event(json.loads(message)):
                    return
        except ConnectionClosed as exc:
            if self._task_id is not None:  # mid-task: the model reconnects
                self._frames.put_nowait(self._dropped(exc))
                return
        except Exception as exc:  # a malformed event: the caller sees it
            self._frames.put_nowait(exc)
            return
        if self._task_id is not None:
            self._frames.put_nowait(self._dropped(None))
        else:
            self._frames.put_nowait(None)

    async def _on_event(self, event: dict[str, Any]) -> bool:
        """Handle one JSON event; False when the task failed (the server closes the socket)."""
        header = event.get("header") or {}
        kind = header.get("event")
        if header.get("task_id") not in (None, self._task_id):
            return True  # a late event of an earlier task
        if kind == "task-started":
            await self._started()
        elif kind == "task-finished":
            usage = (event.get("payload") or {}).get("usage") or {}
            self._task_id = None
            self._running = False
            self._frames.put_nowait(UtteranceDone(input_tokens=usage.get("characters")))
        elif kind == "task-failed":
            self._task_id = None
            self._frames.put_nowait(
                error_from_code(
                    None,
                    header.get("error_code"),
                    header.get("error_message"),
                    {"request_id": header.get("task_id")},
                    model=self._model,
                    provider=self._provider,
                )
            )
            return False
        return True  # result-generated: the audio it announces comes as binary frames

    def _dropped(self, exc: BaseException | None) -> ModelConnectionError:
        reason = f": {exc}" if exc is not None else ""
        return ModelConnectionError(
            f"the connection to {self._provider} dropped mid-utterance{reason}",
            model=self._model,
            provider=self._provider,
        )

    async def close(self) -> None:
        """Close the socket and stop reading it."""
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump
        with contextlib.suppress(Exception):
            await self._ws.close()
