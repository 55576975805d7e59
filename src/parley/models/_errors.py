"""The one mapper from a provider's failures to parley's errors; each provider gives its table.

What is particular to a provider stays in its `_errors.py`: which exception classes of its
SDK and HTTP library are timeouts, unreachable servers and lost connections (a `Failures`
table), how its error bodies read, and which statuses, codes or wordings mean a context
overflow or a refused output. What is the same for every provider is here:

- `map_failure`: an SDK's error status goes to the provider's table; a failure without an
  answer becomes a `ModelTimeoutError` or a `ModelConnectionError` worded once for every
  provider by its kind (`Failed.message`: out of reach, unknown host, dropped, timed out),
  naming the provider, the server it asked (`origin_of`) and what to do; aiohttp's error
  under an httpx-shaped one, else the causes under an SDK's one class, say which kind
  (`failure_of`);
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
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
    "CHECK_THE_BASE_URL",
    "Failed",
    "Failures",
    "answered",
    "classes",
    "describe",
    "error_fields",
    "failure_of",
    "map_failure",
    "origin_of",
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

CHECK_THE_BASE_URL = "check the base URL and the network"
"""What to do when a server is out of reach, unless the provider says better."""


def map_failure(
    exc: BaseException,
    failures: Failures,
    from_status: StatusMapper | None = None,
    *,
    model: str,
    provider: str,
    url: str | None = None,
    hint: str = CHECK_THE_BASE_URL,
) -> ModelError | None:
    """The parley error for what the SDK or its HTTP library raised; None for a foreign error.

    Every provider's failure without an answer is worded here, by its kind (`Failed`), so
    the same failure reads the same whichever provider met it.

    Args:
        exc: What the SDK or its HTTP library raised.
        failures: The provider's exception classes.
        from_status: Maps the SDK's error statuses (`failures.statuses`).
        model: The model asked.
        provider: The provider's name, on the error and in its message.
        url: The server asked, when the exception does not name it (its request's URL).
        hint: What to do when the server is out of reach (what to check).
    """
    if from_status is not None and isinstance(exc, failures.statuses):
        response: Any = getattr(exc, "response", None)
        status: int = getattr(exc, "status_code", 500)
        return from_status(status, response_body(exc), response.headers)
    failed = failure_of(exc, failures)
    if failed is None:
        return None
    text = failed.message(provider, origin_of(exc) or _origin(url), hint)
    cls = ModelTimeoutError if failed.kind == "timeout" else ModelConnectionError
    return cls(text, model=model, provider=provider)


@dataclass(frozen=True, slots=True)
class Failed:
    """A failure without an answer: its kind and the exception that says best what it was."""

    kind: str
    """"unreachable" (refused, TLS), "unknown host", "dropped" or "timeout"."""
    cause: BaseException
    """The exception named in the message."""

    def message(self, provider: str, url: str | None, hint: str = CHECK_THE_BASE_URL) -> str:
        """The one wording of this kind of failure: who, where, what happened, what to do.

        Args:
            provider: The provider's name.
            url: The server asked (its origin), if known.
            hint: What to do when the server is out of reach.
        """
        who = f"{provider} at {url}" if url else provider
        if self.kind == "timeout":
            name = type(self.cause).__name__
            return f"{who} did not answer in time ({name}): raise the timeout or try again"
        if self.kind == "dropped":
            cause = describe(self.cause)
            return f"the connection to {who} dropped before the answer ended ({cause}): try again"
        if self.kind == "unknown host":
            cause = describe(self.cause)
            return f"cannot reach {who}: its host name is unknown ({cause}): check the base URL"
        return f"cannot reach {who} ({describe(self.cause)}): {hint}"


def failure_of(exc: BaseException, failures: Failures) -> Failed | None:
    """The kind of failure `exc` is (None for a foreign error), by one rule for every provider.

    aiohttp's error under an httpx-shaped one says best whether the server was out of reach
    or the connection dropped (`connection_failure`). Else the causes are read as well: some
    SDKs raise one class (`APIConnectionError`) for a refused connection and a dropped one,
    with the HTTP library's own error as its cause.
    """
    failure = connection_failure(exc)
    if failure is not None:
        if not failure.unreachable:
            return Failed("dropped", failure.cause)
        return Failed(
            "unknown host" if _unknown_host(failure.cause) else "unreachable", failure.cause
        )
    if isinstance(exc, failures.timeouts):
        return Failed("timeout", exc)
    # The innermost of the provider's classes: the HTTP library's error under an SDK's.
    chain = _causes(exc)
    for kinds, kind in ((failures.unreachable, "unreachable"), (failures.lost, "dropped")):
        found = [each for each in chain if isinstance(each, kinds)]
        if found:
            unknown = kind == "unreachable" and _unknown_host(found[-1])
            return Failed("unknown host" if unknown else kind, found[-1])
    return None


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes, outermost first (a few at most)."""
    chain = [exc]
    while len(chain) < 6 and chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain


def _unknown_host(exc: BaseException) -> bool:
    """Whether the host name did not resolve (`socket.gaierror` at the bottom of `exc`)."""
    found: BaseException | None = exc
    for _ in range(6):
        if found is None:
            return False
        if isinstance(found, socket.gaierror) or type(found).__name__ == "ClientConnectorDNSError":
            return True
        if any(isinstance(arg, socket.gaierror) for arg in found.args):
            return True  # httpcore's error holds the resolver's, raised in its handling
        found = found.__cause__ or found.__context__ or getattr(found, "os_error", None)
    return False


def origin_of(exc: BaseException) -> str | None:
    """The server `exc` was raised asking (`scheme://host:port`), when it or a cause says."""
    for found in _causes(exc):
        try:
            request = getattr(found, "request", None)  # httpx raises when it has none
        except RuntimeError:
            request = None
        url = getattr(request, "url", None) or getattr(
            getattr(found, "request_info", None), "url", None
        )
        origin = _origin(url)
        if origin:
            return origin
    return None


def _origin(url: object) -> str | None:
    """`scheme://host:port` of a URL (an httpx or yarl one, or text), if it has them."""
    if url is None:
        return None
    parts = urlsplit(str(url))
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


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
