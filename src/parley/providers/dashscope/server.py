"""A local server that speaks DashScope's native wire format, scripted per test, with faults.

It serves `POST /api/v1/services/aigc/text-generation/generation` and
`POST /api/v1/services/aigc/multimodal-generation/generation`, whole (JSON) or streamed
(server-sent events) as each request's `X-DashScope-SSE` header asks, incrementally or
repeating the whole text as its `incremental_output` asks; the two embedding endpoints,
`POST /api/v1/services/embeddings/text-embedding/text-embedding` and
`.../multimodal-embedding/multimodal-embedding` (an `Embeddings` step: a vector per input,
from `vector_for`, of the size the request's `parameters.dimension` asks); all from a queue
of scripted steps; and, for the SDK's uploads of local files, `GET
/api/v1/uploads?action=getPolicy` and a storage host (`POST /oss`) that keeps what it is
sent; Qwen-TTS on the multimodal endpoint (a `Speech` step: the request's text spoken by
the test voice of `parley.providers._server.tone`, streamed as audio events). Every request is
recorded. Drive it through the official SDK, or through parley's
`DashScopeChatModel` and `DashScopeEmbeddingModel`:

    >>> from parley import Msg
    >>> from parley.providers.dashscope import DashScopeChatModel
    >>> with DashScopeServer([Reply(text="Hello!")]) as server:
    ...     model = DashScopeChatModel(server.credential(), "qwen-plus")
    ...     print(model.chat_sync([Msg.user("Hi")]).text)
    ...     model.close_sync()
    Hello!

Steps: `Speech` (audio, with `Reply`'s faults), `Reply` (an answer, with optional faults: a
slow start, slow chunks, a cut stream, a malformed chunk, an error event), `Embeddings` (an
embedding answer, with optional faults: vectors missing, listed out of order), `HTTPError`
(a status with DashScope's error body, e.g. `HTTPError.rate_limit(retry_after=0.1)`),
`Reset` (the connection dropped without an answer), `Raw` (bytes as given), or a function of
the request that returns one. A request with no step left is answered 500 and reported by
`assert_consumed()`, which also fails on steps never used.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import parse_qs, urlsplit

from pydantic import SecretStr

from parley.providers._server.embeddings import vector_for
from parley.providers._server.http import RecordedRequest, Responder
from parley.providers._server.scripted import ScriptedServer, send_stream
from parley.providers._server.steps import ErrorAnswer, Raw, Reset, retry_headers
from parley.providers.dashscope._server_wire import (
    Embeddings,
    Reply,
    Speech,
    ToolCall,
    embedding_answer,
    error_event,
    request_id,
    speech_answer,
    speech_events,
    stream_events,
    whole_answer,
)
from parley.providers.dashscope.credentials import DashScopeCredential

__all__ = [
    "DashScopeServer",
    "Embeddings",
    "HTTPError",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Speech",
    "Step",
    "ToolCall",
    "vector_for",
]

TEXT_PATH = "/api/v1/services/aigc/text-generation/generation"
MULTIMODAL_PATH = "/api/v1/services/aigc/multimodal-generation/generation"
TEXT_EMBEDDING_PATH = "/api/v1/services/embeddings/text-embedding/text-embedding"
MULTIMODAL_EMBEDDING_PATH = "/api/v1/services/embeddings/multimodal-embedding/multimodal-embedding"
UPLOADS_PATH = "/api/v1/uploads"
STORAGE_PATH = "/oss"


@dataclass
class HTTPError(ErrorAnswer):
    """An error status with DashScope's error body (`code`, `message`, `request_id`).

    Sent as JSON, or for a streamed request as one `event:error`, as DashScope does.

    Args:
        status: The HTTP status.
        code: DashScope's error code (`InvalidParameter`, `Throttling.RateQuota`,
            `DataInspectionFailed`, `InvalidApiKey`...).
        message: The error's message.
        headers: Extra headers (see `ErrorAnswer`).
        body: The whole body, instead of the provider-shaped one (see `ErrorAnswer`).
        delay: Seconds before answering (see `ErrorAnswer`).
    """

    code: str = "InternalError"
    message: str = "scripted error"

    @classmethod
    def rate_limit(cls, retry_after: float | None = None) -> HTTPError:
        """A 429 `Throttling.RateQuota`, asking to wait `retry_after` seconds if given."""
        message = "Requests rate limit exceeded, please try again later."
        return cls(429, "Throttling.RateQuota", message, headers=retry_headers(retry_after))

    def error_body(self) -> Any:
        """DashScope's error body."""
        return {"code": self.code, "message": self.message, "request_id": request_id()}


Answer: TypeAlias = Reply | Speech | Embeddings | HTTPError | Reset | Raw
Step: TypeAlias = Answer | Callable[[RecordedRequest], "Step"]
"""What the server answers to one request."""

_SSE = "text/event-stream;charset=UTF-8"
_MISSING = {"code": "Test", "message": "no scripted response left"}


class DashScopeServer(ScriptedServer):
    """A DashScope native-API server on 127.0.0.1, scripted by steps (see the module docs).

    Args:
        steps: The answers, one per generation request, in order.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types = (Reply, Speech, Embeddings, HTTPError, Reset, Raw)

    def __init__(self, steps: Iterable[Step] = (), *, startup_timeout: float = 5.0) -> None:
        super().__init__(steps, startup_timeout=startup_timeout)
        self.policy_error: HTTPError | None = None
        """When set, the upload policy is refused with this error."""
        self.stored: dict[str, bytes] = {}
        """What the storage host received: object key to the multipart body."""
        self.upload_host: str | None = None
        """The storage host the upload policy names (default: this server's `/oss`)."""

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The native API's base URL, `http://127.0.0.1:<port>/api/v1`."""
        return f"{self._http.base_url}/api/v1"

    def credential(
        self, api_key: str = "sk-test", workspace: str | None = None
    ) -> DashScopeCredential:
        """A `DashScopeCredential` for this server."""
        return DashScopeCredential(
            api_key=SecretStr(api_key), base_url=self.url, workspace=workspace
        )

    # -- script -----------------------------------------------------------------------------

    def generation_requests(self) -> list[RecordedRequest]:
        """The requests to the two generation endpoints, in order."""
        return [r for r in self.requests if r.path.startswith((TEXT_PATH, MULTIMODAL_PATH))]

    def bodies(self) -> list[Any]:
        """The JSON bodies of the generation requests."""
        return [request.json for request in self.generation_requests()]

    def embedding_requests(self) -> list[RecordedRequest]:
        """The requests to the two embedding endpoints, in order."""
        paths = (TEXT_EMBEDDING_PATH, MULTIMODAL_EMBEDDING_PATH)
        return [r for r in self.requests if r.path.split("?", 1)[0] in paths]

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        path = request.path.split("?", 1)[0]
        if request.method == "GET" and path == UPLOADS_PATH:
            self._policy(request, out)
        elif request.method == "POST" and path == STORAGE_PATH:
            self._store(request, out)
        elif request.method == "POST" and path in (TEXT_PATH, MULTIMODAL_PATH):
            self._generate(request, out, multimodal=path == MULTIMODAL_PATH)
        elif request.method == "POST" and path in (TEXT_EMBEDDING_PATH, MULTIMODAL_EMBEDDING_PATH):
            self._embed(request, out, multimodal=path == MULTIMODAL_EMBEDDING_PATH)
        else:
            body = {"code": "NotFound", "message": f"no route {request.method} {path}"}
            out.send_json(404, body)

    def _generate(self, request: RecordedRequest, out: Responder, *, multimodal: bool) -> None:
        streamed = request.headers.get("x-dashscope-sse", "").lower() == "enable"
        step = self._next(request)
        if isinstance(step, HTTPError) and streamed and step.body is None:
            out.sleep(step.delay)
            self._stream_error(step, out)
        elif self._answer_alike(request, step, out, _MISSING):
            return
        elif isinstance(step, Embeddings):
            self._misplaced(request)
        elif isinstance(step, Speech):
            out.sleep(step.delay)
            self._speak(request, step, out, streamed=streamed)
        else:
            out.sleep(step.delay)
            if streamed:
                parameters = (request.json or {}).get("parameters") or {}
                incremental = parameters.get("incremental_output") is True
                events = stream_events(step, multimodal=multimodal, incremental=incremental)
                self._stream(events, step, out)
            else:
                out.send_json(200, whole_answer(step, multimodal=multimodal))

    def _embed(self, request: RecordedRequest, out: Responder, *, multimodal: bool) -> None:
        step = self._next(request)
        if self._answer_alike(request, step, out, _MISSING):
            return
        if isinstance(step, Reply):
            self._misplaced(request)
        else:
            out.sleep(step.delay)
            try:
                answer = embedding_answer(step, request.json, multimodal=multimodal)
            except ValueError as exc:
                body = {"code": "InvalidParameter", "message": str(exc), "request_id": request_id()}
                out.send_json(400, body)
                return
            out.send_json(200, answer)

    def _speak(
        self, request: RecordedRequest, step: Speech, out: Responder, *, streamed: bool
    ) -> None:
        try:
            events = speech_events(step, request.json) if streamed else []
            whole = None if streamed else speech_answer(request.json)
        except ValueError as exc:
            body = {"code": "InvalidParameter", "message": str(exc), "request_id": request_id()}
            out.send_json(400, body)
            return
        if whole is not None:
            out.send_json(200, whole)
        else:
            self._stream(events, step, out)

    @staticmethod
    def _misplaced(request: RecordedRequest) -> None:
        # A generation answer scripted for an embedding request, or the other way round:
        # a mistake in the test, reported by `assert_consumed()` as the server's failure.
        raise AssertionError(f"the scripted step does not answer {request.path}")

    @staticmethod
    def _stream_error(step: HTTPError, out: Responder) -> None:
        payload = step.payload()
        data = f"id:1\nevent:error\n:HTTP_STATUS/{step.status}\ndata:{json.dumps(payload)}\n\n"
        out.send(step.status, data.encode(), step.headers.items(), _SSE)

    @staticmethod
    def _stream(events: list[bytes], reply: Reply | Speech, out: Responder) -> None:
        at = reply.malformed_at
        malformed = f'id:{(at or 0) + 1}\nevent:result\ndata:{{"output": \n\n'.encode()
        error = b""
        if reply.error_at is not None:
            code, message = str(reply.error.get("code", "")), str(reply.error.get("message", ""))
            error = error_event(reply.error_at + 1, reply.error_status, code, message)
        send_stream(out, events, reply, malformed=malformed, error=error, content_type=_SSE)

    # -- the SDK's uploads --------------------------------------------------------------------

    def _policy(self, request: RecordedRequest, out: Responder) -> None:
        if self.policy_error is not None:
            out.send_json(self.policy_error.status, self.policy_error.payload())
            return
        query = parse_qs(urlsplit(request.path).query)
        model = (query.get("model") or [""])[0]
        data = {
            "policy": "scripted-policy",
            "signature": "scripted-signature",
            "upload_dir": f"dashscope-instant/{model}/scripted",
            "upload_host": self.upload_host or f"{self._http.base_url}{STORAGE_PATH}",
            "expire_in_seconds": 300,
            "max_file_size_mb": 100,
            "capacity_limit_mb": 999999,
            "oss_access_key_id": "scripted-key-id",
            "x_oss_object_acl": "private",
            "x_oss_forbid_overwrite": "true",
        }
        out.send_json(200, {"request_id": request_id(), "data": data})

    def _store(self, request: RecordedRequest, out: Responder) -> None:
        key = _form_field(request.body, "key")
        with self._lock:
            self.stored[key] = request.body
        out.send(200, b"", content_type="text/plain")


def _form_field(body: bytes, name: str) -> str:
    """A text field of a multipart form body (enough for the SDK's upload form)."""
    marker = f'name="{name}"'.encode()
    start = body.find(marker)
    if start < 0:
        return ""
    value_start = body.find(b"\r\n\r\n", start) + 4
    value_end = body.find(b"\r\n", value_start)
    return body[value_start:value_end].decode("utf-8", "replace")
