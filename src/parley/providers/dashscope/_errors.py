"""The one place where DashScope's errors become parley's.

DashScope reports a failure as `{"code", "message", "request_id"}`: with an HTTP error
status, or inside a stream as an `event:error` whose status the code implies. Both go by the
code first (Model Studio's error-code list):

- `DataInspectionFailed` (input or output moderation) is a `ContentFilterError`;
- an input longer than the model takes (`InvalidParameter`, "Range of input length should
  be [1, N]") is a `ContextLengthError`;
- `Throttling`, `Throttling.RateQuota`, `Throttling.AllocationQuota`... are a 429
  (`RateLimitError`), retried like one;
- the rest by status: `InvalidParameter` 400, `InvalidApiKey` 401, `AccessDenied` and
  `Arrearage` 403 (never retried), `ModelNotFound` 404, `InternalError` 500 and
  `ServiceUnavailable` 503 (retried).

Failures without an answer come from the SDK (`APIConnectionError`, `APITimeoutError`) or,
while a stream's body is read, from its HTTP client (httpx's interface on aiohttp, see
`_sdk`), whose aiohttp errors say best what happened (`parley.models._aiohttp`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from parley.errors import ModelError
from parley.models import _errors as mapper

__all__ = ["dashscope_errors", "error_from_code", "map_error"]

_FILTER_CODES = frozenset({"DataInspectionFailed", "data_inspection_failed"})
_CONTEXT_TEXT = re.compile(
    r"range of input length|input length .*exceed|exceeds? the maximum (input|context)"
    r"|maximum context length|context length exceeded|prompt is too long",
    re.IGNORECASE,
)
# The status an error inside a stream stands for (a stream's HTTP status is 200).
_CODE_STATUS = {
    "InvalidParameter": 400,
    "InvalidApiKey": 401,
    "AccessDenied": 403,
    "Arrearage": 403,
    "ModelNotFound": 404,
    "Model.NotExist": 404,
    "RequestTimeOut": 408,
    "InternalError": 500,
    "ServiceUnavailable": 503,
}


def _status_for(code: str) -> int:
    if code.startswith("Throttling"):
        return 429
    family = code.split(".", 1)[0]
    return _CODE_STATUS.get(code) or _CODE_STATUS.get(family) or 500


def error_from_code(
    status: int | None,
    code: str | None,
    message: str | None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> ModelError:
    """The parley error for a DashScope error: its status (None in a stream), code, message."""
    code, message = code or "", message or ""
    if not status or status < 400:
        status = _status_for(code)
    if code.startswith("Throttling"):
        status = 429
    request_id = body.get("request_id") if isinstance(body, Mapping) else None
    detail = ": ".join(part for part in (code, message) if part)
    text = mapper.answered(provider or "dashscope", status, detail)
    if request_id:
        text += f" (request {request_id})"
    return mapper.status_error(
        status,
        body,
        text,
        headers,
        model=model,
        provider=provider,
        context=status == 400 and bool(_CONTEXT_TEXT.search(message)),
        refused=code in _FILTER_CODES,
    )


_FAILURES = mapper.classes(
    timeouts=("dashscope.v2.errors:APITimeoutError", "httpx:TimeoutException"),
    unreachable=("httpx:ConnectError",),
    # `APIConnectionError` is raised for a refused connection and a dropped one alike.
    lost=("dashscope.v2.errors:APIConnectionError", "httpx:TransportError"),
)
"""The SDK's exception classes and its HTTP client's (httpx's interface on aiohttp)."""


def map_error(exc: BaseException, *, model: str, provider: str) -> ModelError | None:
    """The parley error for an exception from the SDK or its HTTP client; None if foreign."""
    from dashscope.v2 import errors  # noqa: PLC0415

    # The SDK's connection errors are `DashScopeError`s too: they go first.
    mapped = mapper.map_failure(exc, _FAILURES(), model=model, provider=provider)
    if mapped is None and isinstance(exc, errors.DashScopeError) and (exc.status_code or exc.code):
        return error_from_code(
            exc.status_code,
            exc.code,
            exc.message,
            exc.body,
            exc.headers,
            model=model,
            provider=provider,
        )
    return mapped


def dashscope_errors(model: str, provider: str) -> AbstractContextManager[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    return mapper.raising_mapped(functools.partial(map_error, model=model, provider=provider))
