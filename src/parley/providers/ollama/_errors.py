"""The one place where Ollama's errors (and the SDK's and its HTTP client's) become parley's.

Ollama answers an error as JSON `{"error": "..."}` with a status (400 bad request, 404 a
model that is not pulled, 429, 500, 502 a cloud model out of reach), and an error that
happens mid-stream as one more line, `{"error": "..."}`, after a 200 (Ollama's
`docs/api/errors.mdx`). A message about the context length (`the input length exceeds the
context length`, `... longer than the context length ...`: `server/routes.go`,
`llm/llama_server.go`) is a `ContextLengthError`; a 404 `model '...' not found` names
`ollama pull`.

Failures without an answer come from the HTTP client, httpx's interface on aiohttp (see
`_sdk`): a connection refused or dropped is told apart by aiohttp's error under httpx's
(`parley.models._aiohttp`), a timeout by httpx's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from parley.errors import ModelError
from parley.models import _errors as mapper

if TYPE_CHECKING:
    import httpx

__all__ = [
    "error_from_payload",
    "error_from_response",
    "error_from_status",
    "map_error",
    "ollama_errors",
]

PROVIDER = "ollama"

_CONTEXT_TEXT = re.compile(
    r"context length|context window|context size|prompt is too long", re.IGNORECASE
)
_NOT_FOUND = re.compile(r"not found", re.IGNORECASE)
_UNREACHABLE_HINT = "is Ollama running (`ollama serve`)? else check the base URL"


def _message(body: Any) -> str:
    """The error's text: `{"error": "..."}`'s, or the body as it is."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):  # proxies that answer OpenAI's shape
            error = error.get("message", error)
        return str(error)
    return str(body or "")


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str,
    host: str,
) -> ModelError:
    """The parley error for an HTTP error status and its body."""
    message = _message(body)
    text = mapper.answered(f"ollama at {host}", status, message)
    if status == 404 and _NOT_FOUND.search(message) and "model" in message.lower():
        text = (
            f"ollama at {host} has no model {model!r} ({message}): "
            f"pull it first with `ollama pull {model}`"
        )
    context = bool(_CONTEXT_TEXT.search(message))
    return mapper.status_error(
        status, body, text, headers, model=model, provider=PROVIDER, context=context
    )


def error_from_response(response: httpx.Response, *, model: str, host: str) -> ModelError:
    """The parley error for an error status whose body has been read."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return error_from_status(response.status_code, body, response.headers, model=model, host=host)


def error_from_payload(error: Any, *, model: str, host: str) -> ModelError:
    """The parley error for an `{"error": ...}` line in a stream (or a 200 body).

    It carries no status: it counts as a server error (500), retried like one while no
    chunk has reached the caller.
    """
    return error_from_status(500, {"error": error}, model=model, host=host)


_FAILURES = mapper.classes(
    timeouts=("httpx:TimeoutException",),
    # The SDK raises a plain `ConnectionError` when it cannot connect.
    unreachable=("httpx:ConnectError", "builtins:ConnectionError"),
    lost=("httpx:TransportError",),
)
"""The exception classes of the SDK's HTTP library (httpx)."""


def map_error(exc: BaseException, *, model: str, host: str) -> ModelError | None:
    """The parley error for an exception from the SDK or its transport; None if foreign."""
    import ollama  # noqa: PLC0415  (loaded already: it raised `exc` or made the transport)

    if isinstance(exc, ollama.ResponseError):
        status = exc.status_code if exc.status_code >= 400 else 500
        return error_from_status(status, {"error": exc.error}, model=model, host=host)
    return mapper.map_failure(
        exc, _FAILURES(), model=model, provider=PROVIDER, url=host, hint=_UNREACHABLE_HINT
    )


def ollama_errors(model: str, host: str) -> AbstractContextManager[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    return mapper.raising_mapped(functools.partial(map_error, model=model, host=host))
