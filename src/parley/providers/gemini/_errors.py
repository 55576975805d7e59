"""The one place where `google-genai`'s errors (and its HTTP transport's) become parley's.

Google's errors are `{"error": {"code": 429, "message": ..., "status": "RESOURCE_EXHAUSTED",
"details": [...]}}` (google.rpc.Status, AIP-193). The wait a rate limit asks for comes in a
`Retry-After` header or in a `google.rpc.RetryInfo` detail (`"retryDelay": "31s"`); a prompt
over the context window is a 400 whose message says the input token count exceeds the
maximum. The SDK raises `ClientError` (4xx) and `ServerError` (5xx), subclasses of `APIError`
carrying the status, the parsed body and the transport's response; connection failures and
timeouts come from its HTTP library (httpx2, or httpx) and are mapped here too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from parley.errors import ContentFilterError, ModelError
from parley.models import _errors as mapper

__all__ = ["error_from_payload", "error_from_status", "gemini_errors", "map_error"]

_CONTEXT_TEXT = re.compile(
    r"input token count.*exceeds|exceeds the maximum number of tokens|context window"
    r"|prompt is too long",
    re.IGNORECASE | re.DOTALL,
)
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def _retry_delay(body: Any) -> float | None:
    """The wait a `google.rpc.RetryInfo` detail asks for (`"retryDelay": "31s"`), or None."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and detail.get("@type") == _RETRY_INFO:
            found = _DELAY.match(str(detail.get("retryDelay") or ""))
            if found:
                return float(found.group(1))
    return None


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str = "gemini",
) -> ModelError:
    """The parley error for an HTTP error status and its (Google-shaped) body."""
    code, message = mapper.error_fields(body, "status", "message")
    return mapper.status_error(
        status,
        body,
        mapper.answered(provider, status, message, f" {code}" if code else ""),
        headers,
        model=model,
        provider=provider,
        context=status == 400 and bool(_CONTEXT_TEXT.search(message)),
        wait=_retry_delay(body),
    )


def error_from_payload(
    error: Any, *, model: str | None = None, provider: str = "gemini"
) -> ModelError:
    """The parley error for an error object sent inside a 200 response or an event stream.

    Its `code` is the HTTP status Google would have sent; without one it counts as a
    server error (500), retried like one while no chunk has reached the caller.
    """
    code = error.get("code") if isinstance(error, Mapping) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return error_from_status(status, {"error": error}, model=model, provider=provider)


def blocked_prompt(feedback: Mapping[str, Any], *, model: str | None) -> ContentFilterError:
    """The error for a prompt Gemini refused to answer (`promptFeedback.blockReason`)."""
    reason = feedback.get("blockReason")
    message = feedback.get("blockReasonMessage")
    text = f"gemini blocked the prompt ({reason})" + (f": {message}" if message else "")
    return ContentFilterError(text, model=model, provider="gemini")


_FAILURES = mapper.classes(
    timeouts=("httpx2:TimeoutException", "httpx:TimeoutException"),
    unreachable=("httpx2:ConnectError", "httpx:ConnectError"),
    lost=("httpx2:TransportError", "httpx:TransportError"),
)
"""The exception classes of the SDK's HTTP library (httpx2, or httpx)."""


def map_error(exc: BaseException, *, model: str) -> ModelError | None:
    """The parley error for an exception from the SDK or its transport; None if foreign."""
    from google.genai import errors  # noqa: PLC0415  (loaded: it raised `exc` or sent)

    if isinstance(exc, errors.APIError):
        headers = getattr(exc.response, "headers", None)
        headers = headers if isinstance(headers, Mapping) else {}
        return error_from_status(int(exc.code or 500), exc.details, headers, model=model)
    return mapper.map_failure(exc, _FAILURES(), model=model, provider="gemini")


def gemini_errors(model: str) -> AbstractContextManager[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    return mapper.raising_mapped(functools.partial(map_error, model=model))
