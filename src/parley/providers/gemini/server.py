"""A local server that speaks the Gemini API's wire format, scripted per test, with faults.

It serves `POST /{version}/models/{model}:generateContent` and
`:streamGenerateContent?alt=sse`; the embedding calls `:batchEmbedContents` and, as Vertex
AI has them, `:embedContent` and `:predict` (an `Embeddings` step: a vector per content,
from `vector_for`, of the size the request's `outputDimensionality` asks); all of them under
Vertex AI's paths too
(`/{version}/projects/{project}/locations/{location}/publishers/google/models/{model}:...`
and, in express mode, `/{version}/publishers/google/models/{model}:...`), from a queue of
scripted steps, and records every request. Drive it through `google-genai`, or through
parley's Gemini models:

    >>> from parley import Msg
    >>> from parley.providers.gemini import GeminiChatModel
    >>> with GeminiServer([Reply(text="Hello!")]) as server:
    ...     model = GeminiChatModel(server.credential(), "gemini-2.5-flash")
    ...     print(model.chat_sync([Msg.user("Hi")]).text)
    ...     model.close_sync()
    Hello!

Steps: `Reply` (an answer, with optional faults: a slow start, slow chunks, a cut stream, a
malformed chunk, an error event), `Embeddings` (an embedding answer, optionally missing
vectors), `HTTPError` (a status with a Google-shaped error body, e.g.
`HTTPError.rate_limit(retry_after=0.1)`), `Reset` (the connection dropped without an
answer), `Raw` (bytes as given), or a function of the request that returns one. A request with
no step left is answered 500 and reported by `assert_consumed()`, which also fails on steps
never used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import SecretStr

from parley.providers._server.embeddings import vector_for
from parley.providers._server.http import RecordedRequest, Responder
from parley.providers._server.scripted import ScriptedServer, send_stream
from parley.providers._server.steps import ErrorAnswer, Raw, Reset, retry_headers
from parley.providers.gemini._server_wire import (
    Embeddings,
    FunctionCall,
    Reply,
    batch_embed_contents,
    embed_content,
    generate_content,
    predict_embeddings,
    stream_chunks,
)
from parley.providers.gemini.credentials import GeminiCredential

__all__ = [
    "Embeddings",
    "FunctionCall",
    "GeminiServer",
    "HTTPError",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Step",
    "vector_for",
]

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_ROUTE = re.compile(
    r"^/(?P<version>v[^/]+)/(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/)?"
    r"(?:publishers/(?P<publisher>[^/]+)/)?models/(?P<model>[^/:]+)"
    r":(?P<method>generateContent|streamGenerateContent|batchEmbedContents|embedContent|predict)$"
)


@dataclass
class HTTPError(ErrorAnswer):
    """An error status with a Google-shaped body (`{"error": {code, message, status}}`).

    Args:
        status: The HTTP status.
        message: The error's message.
        details: The error's `details` (e.g. a `google.rpc.RetryInfo`).
        headers: Extra headers (see `ErrorAnswer`).
        body: The whole body, instead of the provider-shaped one (see `ErrorAnswer`).
        delay: Seconds before answering (see `ErrorAnswer`).
    """

    message: str = "scripted error"
    details: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = None, *, retry_delay: str | None = None
    ) -> HTTPError:
        """A 429 asking to wait: `Retry-After` seconds, or a `RetryInfo` delay (`"31s"`)."""
        headers = retry_headers(retry_after)
        details = []
        if retry_delay is not None:
            details.append(
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
            )
        return cls(429, "Resource has been exhausted", details=details, headers=headers)

    def error_body(self) -> Any:
        """Google's error body."""
        error: dict[str, Any] = {
            "code": self.status,
            "message": self.message,
            "status": _STATUS_NAMES.get(self.status, "UNKNOWN"),
        }
        if self.details:
            error["details"] = self.details
        return {"error": error}


Answer: TypeAlias = Reply | Embeddings | HTTPError | Reset | Raw
Step: TypeAlias = Answer | Callable[[RecordedRequest], "Step"]
"""What the server answers to one request."""


class GeminiServer(ScriptedServer):
    """A Gemini API server on 127.0.0.1, scripted by steps (see the module docs).

    Args:
        steps: The answers, one per request, in order.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types = (Reply, Embeddings, HTTPError, Reset, Raw)
    _EMBEDDING_CALLS = ("batchEmbedContents", "embedContent", "predict")

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL, `http://127.0.0.1:<port>/` (the SDK adds the version and path)."""
        return f"{self._http.base_url}/"

    def credential(self, api_key: str = "test-key", **fields: Any) -> GeminiCredential:
        """A `GeminiCredential` for this server (Vertex AI with `vertexai=True`, ...)."""
        key = SecretStr(api_key) if api_key else None
        return GeminiCredential(api_key=key, base_url=self.url, **fields)

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        path, _, query = request.path.partition("?")
        route = _ROUTE.match(path)
        if request.method != "POST" or route is None:
            out.send_json(404, HTTPError(404, f"no route {request.method} {path}").payload())
            return
        step = self._next(request)
        missing = HTTPError(500, "no scripted response left").payload()
        if self._answer_alike(request, step, out, missing):
            return
        if (route.group("method") in self._EMBEDDING_CALLS) != isinstance(step, Embeddings):
            # An answer scripted for another call: the test's mistake, which
            # `assert_consumed()` reports as the server's failure.
            raise AssertionError(f"the scripted step does not answer {path}")
        if isinstance(step, Embeddings):
            out.sleep(step.delay)
            self._embed(request, route, out, step)
        else:
            out.sleep(step.delay)
            model = route.group("model")
            if route.group("method") == "generateContent":
                out.send_json(200, generate_content(step, model))
            elif "alt=sse" not in query:
                # Without `alt=sse` Google streams one JSON array; parley always asks for SSE.
                out.send_json(400, HTTPError(400, "this test server streams SSE only").payload())
            else:
                events = [_sse(chunk) for chunk in stream_chunks(step, model)]
                error = _sse({"error": step.error})
                send_stream(out, events, step, malformed=_MALFORMED, error=error)

    @staticmethod
    def _embed(
        request: RecordedRequest, route: re.Match[str], out: Responder, step: Embeddings
    ) -> None:
        method, body = route.group("method"), request.json
        vertexai = route.group("publisher") is not None
        try:
            if method == "batchEmbedContents":
                answer = batch_embed_contents(step, body, route.group("model"), vertexai=vertexai)
            elif method == "embedContent":
                answer = embed_content(step, body)
            else:
                answer = predict_embeddings(step, body)
        except ValueError as exc:
            out.send_json(400, HTTPError(400, str(exc)).payload())
            return
        out.send_json(200, answer)

    def embedding_requests(self) -> list[RecordedRequest]:
        """The requests to the embedding calls, in order."""
        calls = tuple(f":{name}" for name in self._EMBEDDING_CALLS)
        return [r for r in self.requests if r.path.split("?", 1)[0].endswith(calls)]


_MALFORMED = b'data: {"candidates": [{"content": \n\n'


def _sse(data: Any) -> bytes:
    # Google's SSE events end with CRLF pairs.
    return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"
