"""The one place where the anthropic SDK's errors (and its HTTP transport's) become parley's.

Anthropic answers errors as `{"type": "error", "error": {"type": ..., "message": ...},
"request_id": ...}`, with one status per error type (Anthropic's API errors page): 400
`invalid_request_error`, 401 `authentication_error`, 402 `billing_error`, 403
`permission_error`, 404 `not_found_error`, 413 `request_too_large`, 429 `rate_limit_error`,
500 `api_error`, 504 `timeout_error` and 529 `overloaded_error`. The same body may come as an
`error` event in the middle of a 200 stream (an overload, mostly): its status is read back
from its type, so it is retried like the status would be (529 and 5xx are, while no chunk has
reached the caller).

A prompt over the context window is a 400 saying `prompt is too long`; an output the
content filter blocked, a 400 saying `content filtering policy`. Both fail the same way
every time and get their own, non-retried, classes. Connection failures and timeouts while
a stream is read come from the SDK's HTTP client (httpx2's interface on aiohttp, see `_sdk`)
rather than the SDK; a connection refused or dropped is told apart from a timeout by
aiohttp's error under the SDK's or httpx2's (`parley.models._aiohttp`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from parley.errors import (
    ContentFilterError,
    ContextLengthError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    ParleyError,
    RateLimitError,
)
from parley.models._aiohttp import connection_failure
from parley.models._wire import retry_after

__all__ = ["STATUS_BY_TYPE", "anthropic_errors", "error_from_event", "error_from_status"]

STATUS_BY_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status Anthropic sends with each error type."""

_CONTEXT_TEXT = re.compile(
    r"prompt is too long|exceed context limit|context window|context length", re.IGNORECASE
)
_FILTER_TEXT = re.compile(r"content filtering policy", re.IGNORECASE)


def _detail(body: Any) -> tuple[str, str]:
    """`(type, message)` of an error body (the whole body, its `error`, or plain text)."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return str(error.get("type") or ""), str(error.get("message") or "")
    return "", str(error or "")


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> ModelError:
    """The parley error for an HTTP error status and its body."""
    kind, message = _detail(body)
    text = f"{provider or 'anthropic'} answered {status}"
    text += f" ({kind})" if kind else ""
    text += f": {message}" if message else ""
    if status == 400 and _CONTEXT_TEXT.search(message):
        return ContextLengthError(text, model=model, provider=provider)
    if status == 400 and _FILTER_TEXT.search(message):
        return ContentFilterError(text, model=model, provider=provider)
    cls = RateLimitError if status == 429 else ModelHTTPError
    wait = retry_after(headers or {})
    return cls(status, body, text, retry_after=wait, model=model, provider=provider)


def error_from_event(
    body: Any, *, model: str | None = None, provider: str | None = None
) -> ModelError:
    """The parley error for an `error` event in a stream (or an error body sent with a 200).

    The status is the one Anthropic sends with the error's type; an unknown type counts as a
    server error (500).
    """
    kind, _ = _detail(body)
    status = STATUS_BY_TYPE.get(kind, 500)
    return error_from_status(status, body, model=model, provider=provider)


def _status_body(exc: Any) -> Any:
    """The whole error body, parsed when JSON (the SDK's `body` is it, when it read one)."""
    try:
        content: bytes = exc.response.content
    except Exception:  # the body was never read
        return exc.body
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def map_error(exc: BaseException, *, model: str, provider: str) -> ModelError | None:
    """The parley error for an exception from the SDK or its transport; None if foreign."""
    import anthropic  # noqa: PLC0415  (loaded already: it raised `exc` or made the transport)
    import httpx2  # noqa: PLC0415  (the SDK's HTTP library)

    failure = connection_failure(exc)
    if failure is not None:
        what = "cannot reach {}" if failure.unreachable else "the connection to {} failed"
        text = f"{what.format(provider)}: {failure.describe()}"
        return ModelConnectionError(text, model=model, provider=provider)
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ModelTimeoutError(
            f"{provider} did not answer in time ({type(exc).__name__})",
            model=model,
            provider=provider,
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelConnectionError(
            f"cannot reach {provider}: {_describe(exc.__cause__ or exc)}",
            model=model,
            provider=provider,
        )
    if isinstance(exc, anthropic.APIStatusError):
        return error_from_status(
            exc.status_code,
            _status_body(exc),
            exc.response.headers,
            model=model,
            provider=provider,
        )
    if isinstance(exc, httpx2.TransportError):
        return ModelConnectionError(
            f"the connection to {provider} failed: {_describe(exc)}",
            model=model,
            provider=provider,
        )
    return None


@contextmanager
def anthropic_errors(model: str, provider: str) -> Iterator[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    try:
        yield
    except ParleyError:
        raise
    except Exception as exc:
        mapped = map_error(exc, model=model, provider=provider)
        if mapped is None:
            raise
        raise mapped from exc
