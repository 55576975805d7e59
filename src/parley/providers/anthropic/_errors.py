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

import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from parley.errors import ModelError
from parley.models import _errors as mapper

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


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> ModelError:
    """The parley error for an HTTP error status and its body."""
    kind, message = mapper.error_fields(body, "type", "message")
    text = mapper.answered(provider or "anthropic", status, message, f" ({kind})" if kind else "")
    return mapper.status_error(
        status,
        body,
        text,
        headers,
        model=model,
        provider=provider,
        context=status == 400 and bool(_CONTEXT_TEXT.search(message)),
        refused=status == 400 and bool(_FILTER_TEXT.search(message)),
    )


def error_from_event(
    body: Any, *, model: str | None = None, provider: str | None = None
) -> ModelError:
    """The parley error for an `error` event in a stream (or an error body sent with a 200).

    The status is the one Anthropic sends with the error's type; an unknown type counts as a
    server error (500).
    """
    kind, _ = mapper.error_fields(body, "type", "message")
    status = STATUS_BY_TYPE.get(kind, 500)
    return error_from_status(status, body, model=model, provider=provider)


_FAILURES = mapper.classes(
    timeouts=("anthropic:APITimeoutError", "httpx2:TimeoutException"),
    unreachable=("httpx2:ConnectError",),
    statuses=("anthropic:APIStatusError",),
    # `APIConnectionError` is raised for a refused connection and a dropped one alike.
    lost=("anthropic:APIConnectionError", "httpx2:TransportError"),
)
"""The SDK's exception classes and its HTTP library's (httpx2)."""


def map_error(
    exc: BaseException, *, model: str, provider: str, url: str | None = None
) -> ModelError | None:
    """The parley error for an exception from the SDK or its transport; None if foreign.

    `url` is the server asked, named when the exception does not say (a stream cut off).
    """
    from_status = functools.partial(error_from_status, model=model, provider=provider)
    return mapper.map_failure(
        exc, _FAILURES(), from_status, model=model, provider=provider, url=url
    )


def anthropic_errors(
    model: str, provider: str, url: str | None = None
) -> AbstractContextManager[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    mapped = functools.partial(map_error, model=model, provider=provider, url=url)
    return mapper.raising_mapped(mapped)
