"""The one mapper from a provider's failures to parley's errors; each provider gives its table.

What is particular to a provider stays in its `_errors.py`: which exception classes of its
SDK and HTTP library are timeouts, unreachable servers and lost connections (a `Failures`
table), how its error bodies read, and which statuses, codes or wordings mean a context
overflow or a refused output. What is the same for every provider is here:

- `map_failure`: an SDK's error status goes to the provider's table; a failure without an
  answer becomes a `ModelTimeoutError` or a
  `ModelConnectionError` naming the provider; aiohttp's error under an httpx-shaped one says
  best whether the server was out of reach or the connection dropped (`connection_failure`);
- `status_error`: an error status becomes a `ContextLengthError` or a `ContentFilterError`
  (they fail the same way every time, so they are not retried), a `RateLimitError` (429) or
  a `ModelHTTPError`, with the wait the server asked for (`Retry-After`);
- `error_fields`, `response_body`, `answered`: the body's fields and the message's wording;
- `raising_mapped`: the block that raises parley's error in place of the mapped one.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
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

__all__ = [
    "Failures",
    "answered",
    "classes",
    "describe",
    "error_fields",
    "map_failure",
    "raising_mapped",
    "response_body",
    "status_error",
]

Mapper = Callable[[BaseException], ModelError | None]
"""A provider's mapping of one exception: parley's error, or None for a foreign one."""


def describe(exc: BaseException) -> str:
    """An exception's type and text, for a message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- error statuses -------------------------------------------------------------------------


def error_fields(body: Any, *names: str) -> tuple[str, ...]:
    """The named fields of the error in `body`, as text ('' for a missing one).

    The error is `body["error"]` when there is one, else the body itself (OpenAI's,
    Anthropic's and Google's bodies nest it, a stream's error event may not). A body that is
    no mapping is the error's text: the last field (the message) is that text.
    """
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(error, Mapping):
        return tuple(str(error.get(name) or "") for name in names)
    return ("",) * (len(names) - 1) + (str(error or ""),)


def response_body(exc: Any) -> Any:
    """The whole body of an SDK's status error, parsed when JSON.

    httpx-based SDKs keep the response on the exception; their own `body` is what they
    parsed of it (OpenAI's keeps only the `error` member), the whole one when none was read.
    """
    try:
        content: bytes = exc.response.content
    except Exception:  # the body was never read
        return exc.body
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def answered(who: str, status: int, message: str, tag: str = "") -> str:
    """`"<who> answered <status><tag>: <message>"`, without the colon when there is no message."""
    text = f"{who} answered {status}{tag}"
    return f"{text}: {message}" if message else text


def status_error(
    status: int,
    body: Any,
    text: str,
    headers: Mapping[str, str] | None = None,
    *,
    model: str | None,
    provider: str | None,
    context: bool = False,
    refused: bool = False,
    wait: float | None = None,
) -> ModelError:
    """The parley error for an error status, once the provider has read its body.

    Args:
        status: The HTTP status (or the one a stream's error stands for).
        body: The error body, kept on a `ModelHTTPError`.
        text: The error's message.
        headers: The response's headers, for the wait asked (`retry_after`).
        model: The model asked.
        provider: The provider's name.
        context: The provider said the input is over the context window.
        refused: The provider's content filter refused the input or the output.
        wait: The wait the body asked for, when the headers ask for none.
    """
    if context:
        return ContextLengthError(text, model=model, provider=provider)
    if refused:
        return ContentFilterError(text, model=model, provider=provider)
    cls = RateLimitError if status == 429 else ModelHTTPError
    asked = retry_after(headers) if headers else None
    wait = wait if asked is None else asked
    return cls(status, body, text, retry_after=wait, model=model, provider=provider)


# -- failures without an answer -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failures:
    """A provider's exception classes (its SDK's and its HTTP library's) for failures."""

    timeouts: tuple[type[BaseException], ...] = ()
    """No answer in time: a `ModelTimeoutError`."""
    unreachable: tuple[type[BaseException], ...] = ()
    """No connection made: a `ModelConnectionError` saying the server is out of reach."""
    lost: tuple[type[BaseException], ...] = ()
    """A connection that failed on the way (a stream cut off): a `ModelConnectionError`."""
    statuses: tuple[type[BaseException], ...] = ()
    """An httpx-based SDK's error statuses (`status_code`, `response`): the provider's error."""


def classes(**names: tuple[str, ...]) -> Callable[[], Failures]:
    """A provider's `Failures` by class names (`"module:Class"`), imported on first use.

    The SDKs are imported lazily (one takes a second to import), so the table names the
    classes and `classes(...)()` gives them, once imported. A module that cannot be imported
    is passed over: an SDK is built on httpx2 or on httpx, and the table names both.
    """

    @functools.cache
    def load() -> Failures:
        return Failures(**{kind: _imported(found) for kind, found in names.items()})

    return load


def _imported(names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    found = []
    for name in names:
        module, _, attr = name.partition(":")
        try:
            found.append(getattr(importlib.import_module(module), attr))
        except ImportError:
            continue
    return tuple(found)


StatusMapper = Callable[[int, Any, Mapping[str, str]], ModelError]
"""A provider's `error_from_status`: the status, the body, the headers."""


def map_failure(
    exc: BaseException,
    failures: Failures,
    from_status: StatusMapper | None = None,
    *,
    model: str,
    provider: str,
    where: str | None = None,
    hint: str = "",
) -> ModelError | None:
    """The parley error for what the SDK or its HTTP library raised; None for a foreign error.

    Args:
        exc: What the SDK or its HTTP library raised.
        failures: The provider's exception classes.
        from_status: Maps the SDK's error statuses (`failures.statuses`).
        model: The model asked.
        provider: The provider's name, on the error.
        where: Who was asked, in the message (the provider's name unless given).
        hint: Said after an unreachable server's error (what to check).
    """
    if from_status is not None and isinstance(exc, failures.statuses):
        response: Any = getattr(exc, "response", None)
        status: int = getattr(exc, "status_code", 500)
        return from_status(status, response_body(exc), response.headers)
    where = where or provider
    failure = connection_failure(exc)
    if failure is not None:
        if failure.unreachable:
            text = f"cannot reach {where}: {failure.describe()}{hint}"
        else:
            text = f"the connection to {where} failed: {failure.describe()}"
        return ModelConnectionError(text, model=model, provider=provider)
    if isinstance(exc, failures.timeouts):
        text = f"{where} did not answer in time ({type(exc).__name__})"
        return ModelTimeoutError(text, model=model, provider=provider)
    if isinstance(exc, failures.unreachable):
        text = f"cannot reach {where}: {describe(exc.__cause__ or exc)}{hint}"
        return ModelConnectionError(text, model=model, provider=provider)
    if isinstance(exc, failures.lost):
        text = f"the connection to {where} failed: {describe(exc)}"
        return ModelConnectionError(text, model=model, provider=provider)
    return None


@contextmanager
def raising_mapped(mapper: Mapper) -> Iterator[None]:
    """Raise the mapped parley error for an exception raised inside the block.

    parley's own errors pass as they are, and so does an exception the mapper calls foreign
    (it returns None).
    """
    try:
        yield
    except ParleyError:
        raise
    except Exception as exc:
        mapped = mapper(exc)
        if mapped is None:
            raise
        raise mapped from exc
