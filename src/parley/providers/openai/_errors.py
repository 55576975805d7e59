"""The one place where the openai SDK's errors (and its HTTP transport's) become parley's.

Status errors go by status and by the provider's error code: a context window overflow and
a content refusal fail the same way every time, so they get their own, non-retried, classes.
Connection failures and timeouts raised while a stream is read come from the SDK's HTTP
library (httpx, or httpx2 in newer SDKs) rather than the SDK, and are mapped here too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from parley.errors import ModelError
from parley.models import _errors as mapper

__all__ = ["error_from_payload", "error_from_status", "map_error", "openai_errors"]

# OpenAI's code, then the wording of servers that give none (vLLM, DeepSeek, llama.cpp).
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_TEXT = re.compile(
    r"maximum context length|context length exceeded|exceeds? the available context size"
    r"|context window|prompt is too long",
    re.IGNORECASE,
)
# OpenAI/Azure `content_filter`, OpenAI images `content_policy_violation`, DashScope
# `data_inspection_failed`.
_FILTER_CODES = frozenset({"content_filter", "content_policy_violation", "data_inspection_failed"})


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> ModelError:
    """The parley error for an HTTP error status and its body."""
    code, kind, message = mapper.error_fields(body, "code", "type", "message")
    context = code in _CONTEXT_CODES or kind in _CONTEXT_CODES or _CONTEXT_TEXT.search(message)
    return mapper.status_error(
        status,
        body,
        mapper.answered(provider or "the provider", status, message),
        headers,
        model=model,
        provider=provider,
        context=bool(context),
        refused=code in _FILTER_CODES or kind in _FILTER_CODES,
    )


def error_from_payload(
    error: Any, *, model: str | None = None, provider: str | None = None
) -> ModelError:
    """The parley error for an error a provider reported inside a 200 response or stream.

    Such errors carry no status. OpenRouter puts the HTTP status it would have sent in
    `code`; otherwise a rate-limit code is a 429 and anything else counts as a server
    error (500), retried like one while no chunk has reached the caller.
    """
    (code,) = mapper.error_fields(error, "code")
    if code.isdigit() and 400 <= int(code) < 600:
        status = int(code)
    elif "rate_limit" in code:
        status = 429
    else:
        status = 500
    return error_from_status(status, error, model=model, provider=provider)


_FAILURES = mapper.classes(
    timeouts=("openai:APITimeoutError", "httpx2:TimeoutException", "httpx:TimeoutException"),
    unreachable=("httpx2:ConnectError", "httpx:ConnectError"),
    statuses=("openai:APIStatusError",),
    # The SDK raises `APIConnectionError` for a refused connection and a dropped one alike,
    # from the HTTP library's error: that says which (the shared mapper reads the causes).
    lost=("openai:APIConnectionError", "httpx2:TransportError", "httpx:TransportError"),
)
"""The SDK's exception classes and its HTTP library's (httpx2 in openai 3, httpx before)."""


def map_error(exc: BaseException, *, model: str, provider: str) -> ModelError | None:
    """The parley error for an exception from the SDK or its transport; None if foreign."""
    from_status = functools.partial(error_from_status, model=model, provider=provider)
    return mapper.map_failure(exc, _FAILURES(), from_status, model=model, provider=provider)


def openai_errors(model: str, provider: str) -> AbstractContextManager[None]:
    """Raise parley's error for any SDK or transport error raised inside the block."""
    return mapper.raising_mapped(functools.partial(map_error, model=model, provider=provider))
