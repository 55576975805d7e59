"""The one place where the openai SDK's errors (and its HTTP transport's) become parley's.

Status errors go by status and by the provider's error code: a context window overflow and
a content refusal fail the same way every time, so they get their own, non-retried, classes.
Connection failures and timeouts raised while a stream is read come from the SDK's HTTP
library (httpx, or httpx2 in newer SDKs) rather than the SDK, and are mapped here too.
"""

from __future__ import annotations

import functools
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
from parley.models._wire import retry_after, transport_errors

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


def _detail(body: Any) -> tuple[str, str, str]:
    """`(code, type, message)` from an error body: `{"error": {...}}`, the inner dict, or text."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return (
            str(error.get("code") or ""),
            str(error.get("type") or ""),
            str(error.get("message") or ""),
        )
    return "", "", str(error or "")


def error_from_status(
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
) -> ModelError:
    """The parley error for an HTTP error status and its body."""
    code, kind, message = _detail(body)
    text = f"{provider or 'the provider'} answered {status}" + (f": {message}" if message else "")
    if code in _CONTEXT_CODES or kind in _CONTEXT_CODES or _CONTEXT_TEXT.search(message):
        return ContextLengthError(text, model=model, provider=provider)
    if code in _FILTER_CODES or kind in _FILTER_CODES:
        return ContentFilterError(text, model=model, provider=provider)
    cls = RateLimitError if status == 429 else ModelHTTPError
    wait = retry_after(headers or {})
    return cls(status, body, text, retry_after=wait, model=model, provider=provider)


def error_from_payload(
    error: Any, *, model: str | None = None, provider: str | None = None
) -> ModelError:
    """The parley error for an error a provider reported inside a 200 response or stream.

    Such errors carry no status. OpenRouter puts the HTTP status it would have sent in
    `code`; otherwise a rate-limit code is a 429 and anything else counts as a server
    error (500), retried like one while no chunk has reached the caller.
    """
    code, _, _ = _detail(error)
    if code.isdigit() and 400 <= int(code) < 600:
        status = int(code)
    elif "rate_limit" in code:
        status = 429
    else:
        status = 500
    return error_from_status(status, error, model=model, provider=provider)


@functools.cache
def _status_body(exc: Any) -> Any:
    """The whole error body (the SDK keeps only its `error` member), parsed when JSON."""
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
    import openai  # noqa: PLC0415  (loaded already: it raised `exc` or made the transport)

    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeoutError(
            f"{provider} did not answer in time", model=model, provider=provider
        )
    if isinstance(exc, openai.APIConnectionError):
        return ModelConnectionError(
            f"cannot reach {provider}: {_describe(exc.__cause__ or exc)}",
            model=model,
            provider=provider,
        )
    if isinstance(exc, openai.APIStatusError):
        return error_from_status(
            exc.status_code,
            _status_body(exc),
            exc.response.headers,
            model=model,
            provider=provider,
        )
    timeouts, transport = transport_errors()
    if isinstance(exc, timeouts):
        return ModelTimeoutError(
            f"{provider} stopped sending in time ({type(exc).__name__})",
            model=model,
            provider=provider,
        )
    if isinstance(exc, transport):
        return ModelConnectionError(
            f"the connection to {provider} failed: {_describe(exc)}",
            model=model,
            provider=provider,
        )
    return None


@contextmanager
def openai_errors(model: str, provider: str) -> Iterator[None]:
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
