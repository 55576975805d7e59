"""`DashScopeRealtimeTTSModel`: Qwen-TTS realtime, text pushed in pieces over a WebSocket.

The protocol (Model Studio's Qwen-TTS realtime client and server events; the SDK's
`dashscope.audio.qwen_tts_realtime.QwenTtsRealtime` speaks the same):

- connect to `wss://dashscope.aliyuncs.com/api-ws/v1/realtime?model=<model>` with
  `Authorization: Bearer <key>` (and `X-DashScope-WorkSpace`); the server says
  `session.created`;
- the client sends `session.update` `{"session": {"voice", "mode", "response_format",
  "sample_rate", "language_type"...}}`, answered by `session.updated` (or `error`);
- `input_text_buffer.append` `{"text"}` for each piece; in `server_commit` mode the server
  decides when to speak what it holds, so audio follows the text at token granularity; in
  `commit` mode it speaks on `input_text_buffer.commit` (answered by
  `input_text_buffer.committed`);
- audio comes as `response.created`, `response.audio.delta` `{"delta": base64 PCM}`,
  `response.audio.done`, `response.done` `{"response": {"usage"}}`, one response per
  stretch of text the server chose to speak;
- `session.finish` asks for the rest: the server speaks what it holds, says
  `session.finished` and closes the connection, so a connection carries one utterance;
- a failure is an `error` event `{"error": {"type", "code", "message"}}`.

Why not the SDK's `QwenTtsRealtime`: it reads the key from the process-wide
`dashscope.api_key` (parley keeps a key per model), it runs websocket-client on a thread of
its own per connection and passes events to callbacks that swallow their errors, and its
`connect()` polls the socket for a fixed 5 seconds: a refused handshake (a wrong key's 401)
surfaces only as the same `TimeoutError` 5 seconds later, indistinguishable from a slow
network. The `websockets` library is asyncio-native, reports the handshake's status and
body, and ends the event iterator with the close code when the connection drops, which is
what the base needs to reconnect. The events sent are the SDK's, field for field, with its
identifying `User-Agent`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import quote

from pydantic import Field

from parley.errors import (
    MissingDependencyError,
    ModelConnectionError,
    ModelError,
    ModelOutputError,
)
from parley.models.base import ChatModel
from parley.models.cards import TTSModelCard
from parley.models.credentials import Credential
from parley.providers.dashscope._errors import error_from_code
from parley.providers.dashscope._sdk import DashScopeClients
from parley.providers.dashscope.credentials import DashScopeCredential
from parley.providers.dashscope.speech.model import (
    SAMPLE_RATE,
    DashScopeTTSParameters,
    as_dict,
    own_cards,
)
from parley.tts._audio import pcm_media_type
from parley.tts.base import AudioChunk, TTSParameters
from parley.tts.realtime import RealtimeSession, RealtimeTTSModel, UtteranceDone

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = [
    "DashScopeRealtimeTTSModel",
    "DashScopeRealtimeTTSParameters",
    "QwenRealtimeSession",
    "realtime_url",
]


class DashScopeRealtimeTTSParameters(DashScopeTTSParameters):
    """What a Qwen-TTS realtime session takes (`session.update`); fields left None are not sent.

    The audio is always raw PCM (`response_format: pcm`), so a dropped connection can be
    resumed where it broke.
    """

    mode: Literal["server_commit", "commit"] | None = Field(
        default=None,
        description="server_commit (default): the server speaks as text arrives; commit: "
        "it speaks all text at the end of the utterance.",
    )
    sample_rate: Literal[8000, 16000, 22050, 24000, 44100, 48000] | None = Field(
        default=None, description="Samples per second of the audio (default 24000)."
    )
    speech_rate: float | None = Field(
        default=None, ge=0.5, le=2.0, description="Speaking speed, 0.5 to 2 (default 1)."
    )
    pitch_rate: float | None = Field(
        default=None, ge=0.5, le=2.0, description="Pitch, 0.5 to 2 (default 1)."
    )
    volume: int | None = Field(
        default=None, ge=0, le=100, description="Loudness, 0 to 100 (default 50)."
    )


def realtime_url(credential: DashScopeCredential, model: str) -> str:
    """The WebSocket URL of a realtime model: the credential's realtime endpoint, `?model=`."""
    return f"{credential.websocket_endpoint('realtime')}?model={quote(model, safe='')}"


def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"event_id": f"event_{uuid.uuid4().hex}", "type": kind, **fields})


class QwenRealtimeSession(RealtimeSession):
    """One Qwen-TTS realtime connection (one utterance: `session.finish` ends it).

    Args:
        connection: The open WebSocket, past `session.updated`.
        commit: Whether the session is in `commit` mode (the text is committed on finish).
        sample_rate: The audio's rate.
        model: The model's name, for errors.
    """

    reusable: ClassVar[bool] = False

    def __init__(
        self, connection: ClientConnection, *, commit: bool, sample_rate: int, model: str
    ) -> None:
        self._ws = connection
        self._commit = commit
        self._media_type = pcm_media_type(sample_rate)
        self._model = model
        self._tokens: list[int] = [0, 0]
        self._counted = False

    async def send_text(self, text: str) -> None:
        """Append `text` to the server's buffer."""
        await self._send(_event("input_text_buffer.append", text=text))

    async def finish(self) -> None:
        """Commit the text (in commit mode) and ask the server to speak the rest."""
        if self._commit:
            await self._send(_event("input_text_buffer.commit"))
        await self._send(_event("session.finish"))

    async def events(self) -> AsyncIterator[AudioChunk | UtteranceDone]:
        """Audio deltas as they come; `UtteranceDone` on `session.finished`."""
        from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

        try:
            async for message in self._ws:
                event = _parse(message, self._model)
                kind = event.get("type")
                if kind == "response.audio.delta":
                    yield AudioChunk(_audio(event.get("delta"), self._model), self._media_type)
                elif kind == "response.done":
                    self._count(event)
                elif kind == "session.finished":
                    yield self._done()
                    return
                elif kind == "error":
                    raise _error_event(event, self._model)
        except ConnectionClosed as exc:
            raise _dropped(exc, self._model) from exc
        raise ModelConnectionError(  # a close without a close frame's error, mid-utterance
            "dashscope closed the connection before session.finished",
            model=self._model,
            provider="dashscope",
        )

    async def close(self) -> None:
        """Close the WebSocket (idempotent)."""
        with contextlib.suppress(Exception):
            await self._ws.close()

    async def _send(self, data: str) -> None:
        from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

        try:
            await self._ws.send(data)
        except ConnectionClosed as exc:
            raise _dropped(exc, self._model) from exc

    def _count(self, event: dict[str, Any]) -> None:
        response = event.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        if not isinstance(usage, dict):
            return
        for index, name in enumerate(("input_tokens", "output_tokens")):
            if isinstance(value := usage.get(name), int):
                self._tokens[index] += value  # one response per stretch of text: summed
                self._counted = True

    def _done(self) -> UtteranceDone:
        if not self._counted:
            return UtteranceDone()
        return UtteranceDone(input_tokens=self._tokens[0], output_tokens=self._tokens[1])


class DashScopeRealtimeTTSModel(RealtimeTTSModel, DashScopeClients):
    """Qwen-TTS realtime (`qwen3-tts-flash-realtime`...): text pushed as a model writes it.

    Example:
        >>> model = DashScopeRealtimeTTSModel(DashScopeCredential(), "qwen3-tts-flash-realtime")
        >>> async with model:  # doctest: +SKIP
        ...     await model.push("Hello, ")
        ...     rest = await model.synthesize("world.")

    The WebSocket endpoint is the credential's (`DashScopeCredential.websocket_endpoint`):
    beside its HTTP base URL, or from `DASHSCOPE_WEBSOCKET_BASE_URL`.

    Args:
        credential: The key and endpoint (`DashScopeCredential`); from the environment when
            None.
        model: The model's name at DashScope.
        parameters: `DashScopeRealtimeTTSParameters` (or a dict): `voice`, `mode`...
        stream: Whether `synthesize` yields pieces of audio as they arrive.
        cold_start_length: Characters to hold before the first text is sent.
        cold_start_words: Words to hold before the first text is sent.
        max_retries: Reconnections per utterance when the connection drops.
        retry_delay: Seconds before the first reconnection, doubling after.
        timeout: Seconds to wait for DashScope (the handshake, and between two audio deltas).
    """

    provider: ClassVar[str] = "dashscope"
    credential_class: ClassVar[type[Credential] | None] = DashScopeCredential
    parameters_class: ClassVar[type[TTSParameters]] = DashScopeRealtimeTTSParameters
    cards_location: ClassVar[str | Path | None] = "parley.providers.dashscope.speech"

    @classmethod
    def list_models(cls, custom_yaml_dir: str | Path | None = None) -> list[TTSModelCard]:
        """The realtime cards (the HTTP model's share `_models/`)."""
        return own_cards(cls, super().list_models(custom_yaml_dir))

    def url(self) -> str:
        """The WebSocket URL this model connects to."""
        return realtime_url(self.dashscope_credential, self.model)

    def headers(self) -> dict[str, str]:
        """The handshake's headers: the key, the workspace, the SDK's `User-Agent`.

        Raises:
            ConfigurationError: No API key.
        """
        from dashscope.v2.transport.http import default_user_agent  # noqa: PLC0415

        headers = {"Authorization": f"Bearer {self._api_key()}", "User-Agent": default_user_agent()}
        if workspace := self.dashscope_credential.workspace:
            headers["X-DashScope-WorkSpace"] = workspace
        return headers

    def session_config(self, parameters: TTSParameters) -> dict[str, Any]:
        """`session.update`'s `session`: the SDK's defaults and every parameter that is set."""
        config: dict[str, Any] = {
            "mode": "server_commit",
            "response_format": "pcm",
            "sample_rate": SAMPLE_RATE,
        }
        config.update(parameters.to_kwargs())
        return config

    async def _open_session(self, parameters: TTSParameters) -> RealtimeSession:
        url = self.url()
        ChatModel.check_allowed(url)
        connection = await _connect(url, self.headers(), self.timeout, self.model)
        config = self.session_config(parameters)
        try:
            await connection.send(_event("session.update", session=config))
            await _until_updated(connection, self.model)
        except BaseException:
            await connection.close()
            raise
        return QwenRealtimeSession(
            connection,
            commit=config["mode"] == "commit",
            sample_rate=config["sample_rate"],
            model=self.model,
        )

    async def aclose(self) -> None:
        """Close the connection (the same as `close()`)."""
        await RealtimeTTSModel.aclose(self)


async def _connect(
    url: str, headers: dict[str, str], timeout: float, model: str
) -> ClientConnection:
    """The open WebSocket, or parley's error for a refused or failed handshake."""
    try:
        from websockets.asyncio.client import connect  # noqa: PLC0415
        from websockets.exceptions import InvalidHandshake, InvalidStatus  # noqa: PLC0415
    except ImportError as exc:
        raise MissingDependencyError("websockets", "dashscope") from exc
    try:
        return await connect(url, additional_headers=headers, open_timeout=timeout, max_size=None)
    except InvalidStatus as exc:
        raise _refused(exc.response.status_code, bytes(exc.response.body or b""), model) from exc
    except InvalidHandshake as exc:
        raise ModelConnectionError(
            f"the WebSocket handshake with dashscope failed: {exc}",
            model=model,
            provider="dashscope",
        ) from exc


async def _until_updated(connection: ClientConnection, model: str) -> None:
    """Read up to `session.updated` (past `session.created`); an `error` event is raised."""
    from websockets.exceptions import ConnectionClosed  # noqa: PLC0415

    try:
        async for message in connection:
            event = _parse(message, model)
            if event.get("type") == "session.updated":
                return
            if event.get("type") == "error":
                raise _error_event(event, model)
    except ConnectionClosed as exc:
        raise _dropped(exc, model) from exc
    raise ModelConnectionError(
        "dashscope closed the connection before session.updated",
        model=model,
        provider="dashscope",
    )


def _refused(status: int, body: bytes, model: str) -> ModelError:
    """A handshake refused with `status`: DashScope's error body, mapped as HTTP errors are.

    A 429 or a 5xx is a `ModelConnectionError`, which the base retries; the rest (a wrong
    key's 401, a 403, an unknown model's 404) are not retried.
    """
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    data = payload if isinstance(payload, dict) else {}
    code = str(data.get("code") or "")
    message = str(data.get("message") or body.decode("utf-8", "replace")[:200])
    if status == 429 or status >= 500:
        return ModelConnectionError(
            f"dashscope refused the connection ({status}): {code or message}",
            model=model,
            provider="dashscope",
        )
    return error_from_code(status, code, message, payload, model=model, provider="dashscope")


def _parse(message: str | bytes, model: str) -> dict[str, Any]:
    try:
        event = json.loads(message)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise ModelOutputError(
            f"dashscope sent an event that is not a JSON object: {str(message)[:200]!r}",
            model=model,
            provider="dashscope",
        )
    return event


def _audio(delta: Any, model: str) -> bytes:
    try:
        return base64.b64decode(delta or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ModelOutputError(
            f"dashscope sent audio that is not base64: {str(delta)[:80]!r}",
            model=model,
            provider="dashscope",
        ) from None


def _error_event(event: dict[str, Any], model: str) -> ModelError:
    """An `error` event as parley's error, its code and message in the text."""
    error = as_dict(event.get("error"))
    code, message = str(error.get("code") or ""), str(error.get("message") or "")
    if code.startswith("Throttling"):
        return error_from_code(None, code, message, error, model=model, provider="dashscope")
    detail = ": ".join(part for part in (code, message) if part) or json.dumps(event)[:200]
    return ModelError(f"dashscope reported an error: {detail}", model=model, provider="dashscope")


def _dropped(exc: BaseException, model: str) -> ModelConnectionError:
    return ModelConnectionError(
        f"the connection to dashscope dropped: {exc}", model=model, provider="dashscope"
    )
