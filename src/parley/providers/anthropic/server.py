"""A local server that speaks Anthropic's Messages API, scripted per test, with faults on demand.

It serves `POST /v1/messages`, whole (JSON) or streamed (server-sent events) as each request
asks, from a queue of scripted steps, and records every request. It checks what the real API
checks first: a key (`x-api-key` or `Authorization: Bearer`), the `anthropic-version`
header, the required `model`, `max_tokens` and `messages`, and no `temperature`, `top_p` or
`top_k` (API version 2026-10-21 refuses them); such a request is answered 400 or 401 without
using a step. Drive it through the official SDK, or through parley's model:

    >>> from parley import Msg
    >>> from parley.providers.anthropic import AnthropicChatModel
    >>> with AnthropicServer([Reply(text="Hello!")]) as server:
    ...     model = AnthropicChatModel(server.credential(), "claude-sonnet-5-5")
    ...     print(model.chat_sync([Msg.user("Hi")]).text)
    ...     model.close_sync()
    Hello!

Steps: `Reply` (an answer, with optional faults: a slow start, slow chunks, a cut stream, a
malformed event, an `error` event), `HTTPError` (a status with an Anthropic-shaped body and
headers, e.g. `HTTPError.rate_limit(retry_after=0.1)`, `HTTPError.overloaded()`), `Reset`
(the connection dropped without an answer), `Raw` (bytes as given), or a function of the
request that returns one. A request with no step left is answered 500 and reported by
`assert_consumed()`, which also fails on steps never used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import SecretStr

from parley.providers._server.http import RecordedRequest, Responder
from parley.providers._server.scripted import ScriptedServer, send_stream
from parley.providers._server.steps import ErrorAnswer, Raw, Reset, retry_headers
from parley.providers.anthropic._server_wire import (
    Redacted,
    Reply,
    ServerBlock,
    Text,
    Thinking,
    ToolUse,
    message_events,
    message_object,
)
from parley.providers.anthropic.credentials import AnthropicCredential

__all__ = [
    "AnthropicServer",
    "HTTPError",
    "Raw",
    "RecordedRequest",
    "Redacted",
    "Reply",
    "Reset",
    "ServerBlock",
    "Step",
    "Text",
    "Thinking",
    "ToolUse",
]

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_REMOVED = ("temperature", "top_p", "top_k")


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    """An Anthropic error body for a status."""
    error = {"type": kind or _TYPES.get(status, "api_error"), "message": message}
    return {"type": "error", "error": error, "request_id": "req_test"}


@dataclass
class HTTPError(ErrorAnswer):
    """An error status with an Anthropic-shaped error body.

    Args:
        status: The HTTP status.
        message: The error's message.
        kind: The error's `type` (default: the one Anthropic sends with the status).
        headers: Extra headers (see `ErrorAnswer`).
        body: The whole body, instead of the provider-shaped one (see `ErrorAnswer`).
        delay: Seconds before answering (see `ErrorAnswer`).
    """

    message: str = "scripted error"
    kind: str | None = None

    @classmethod
    def rate_limit(cls, retry_after: float | None = None) -> HTTPError:
        """A 429 asking to wait `retry_after` seconds (`retry-after`)."""
        message = "Number of request tokens has exceeded your rate limit"
        return cls(429, message, headers=retry_headers(retry_after, "retry-after"))

    @classmethod
    def overloaded(cls) -> HTTPError:
        """A 529: Anthropic's API is overloaded."""
        return cls(529, "Overloaded")

    def error_body(self) -> Any:
        """Anthropic's error body."""
        return error_body(self.status, self.message, self.kind)


Answer: TypeAlias = Reply | HTTPError | Reset | Raw
Step: TypeAlias = Answer | Callable[[RecordedRequest], "Step"]
"""What the server answers to one request."""

_PATH = "/v1/messages"


def _refusal(request: RecordedRequest) -> tuple[int, str] | None:
    """What the real API would refuse in this request before answering, if anything."""
    headers = request.headers
    if not headers.get("x-api-key") and not headers.get("authorization", "").startswith("Bearer "):
        return 401, "x-api-key header is required"
    if not headers.get("anthropic-version"):
        return 400, "anthropic-version: header is required"
    try:
        body = request.json
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return 400, "the request body must be a JSON object"
    return _body_refusal(body)


def _body_refusal(body: dict[str, Any]) -> tuple[int, str] | None:
    for name, kind in (("model", str), ("max_tokens", int), ("messages", list)):
        if not isinstance(body.get(name), kind):
            return 400, f"{name}: Field required"
    removed = [name for name in _REMOVED if name in body]
    return (400, f"{removed[0]}: Extra inputs are not permitted") if removed else None


class AnthropicServer(ScriptedServer):
    """An Anthropic Messages API server on 127.0.0.1, scripted by steps (see the module docs).

    Args:
        steps: The answers, one per request, in order.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types = (Reply, HTTPError, Reset, Raw)

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The API's base URL, `http://127.0.0.1:<port>` (the SDK adds `/v1/messages`)."""
        return self._http.base_url

    def credential(self, api_key: str = "sk-ant-test") -> AnthropicCredential:
        """An `AnthropicCredential` for this server."""
        return AnthropicCredential(api_key=SecretStr(api_key), base_url=self.url)

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        path = request.path.split("?", 1)[0]
        if request.method != "POST" or path != _PATH:
            out.send_json(404, error_body(404, f"no route {request.method} {path}"))
            return
        refused = _refusal(request)
        if refused is not None:
            out.send_json(refused[0], error_body(*refused))
            return
        step = self._next(request)
        if not self._answer_alike(request, step, out, error_body(500, "no scripted response left")):
            self._reply(request, step, out)

    def _reply(self, request: RecordedRequest, reply: Reply, out: Responder) -> None:
        body = request.json
        model = str(body["model"])
        out.sleep(reply.delay)
        if not body.get("stream"):
            out.send_json(200, message_object(reply, model))
            return
        events = [_sse(name, data) for name, data in message_events(reply, model)]
        error = _sse("error", {"type": "error", "error": reply.error, "request_id": "req_test"})
        send_stream(out, events, reply, malformed=_MALFORMED, error=error)


_MALFORMED = b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": \n\n'


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
