"""What every scripted wire-format server shares: its steps, its lifecycle, its record.

A provider's server (`OpenAIServer`, `AnthropicServer`, ...) subclasses `ScriptedServer`, names
its answer types and implements `_handle`, which turns the next step into the provider's wire
format. Steps are answered in order, one per request; a step may also be a function of the
request that returns the step to use.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar, Self

from parley.providers._server.http import RecordedRequest, Responder, ScriptedHTTPServer

__all__ = ["ScriptedServer"]


class ScriptedServer:
    """A server on 127.0.0.1 that answers requests with scripted steps, in order.

    Args:
        steps: The answers, one per request, in order.
        startup_timeout: Seconds to wait for the server to start.
    """

    answer_types: ClassVar[tuple[type, ...]] = ()
    """The steps that are answers; any other step is called with the request to get one."""

    def __init__(self, steps: Iterable[Any] = (), *, startup_timeout: float = 5.0) -> None:
        self._steps: deque[Any] = deque(steps)
        self._lock = threading.Lock()
        self._http = ScriptedHTTPServer(self._handle, startup_timeout=startup_timeout)
        self.unexpected: list[RecordedRequest] = []
        """Requests that found no step left."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving (returns once it accepts connections)."""
        self._http.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection."""
        self._http.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return self._http.base_url

    # -- script -----------------------------------------------------------------------------

    def add(self, *steps: Any) -> None:
        """Append steps to the script."""
        with self._lock:
            self._steps.extend(steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order."""
        return self._http.requests

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests received."""
        return [request.json for request in self.requests]

    def assert_consumed(self) -> None:
        """Fail if a step was never used, a request found no step, or a handler broke."""
        problems = []
        if self._steps:
            problems.append(f"{len(self._steps)} scripted step(s) never used")
        if self.unexpected:
            problems.append(f"{len(self.unexpected)} request(s) found no step left")
        if self._http.errors:
            problems.append(f"the server failed: {self._http.errors[0]!r}")
        if problems:
            raise AssertionError("; ".join(problems))

    def _next(self, request: RecordedRequest) -> Any:
        """The next step's answer for `request`, or None when the script is used up."""
        with self._lock:
            step = self._steps.popleft() if self._steps else None
        while step is not None and not isinstance(step, self.answer_types):
            step = step(request)
        return step

    # -- answering --------------------------------------------------------------------------

    def _handle(self, request: RecordedRequest, out: Responder) -> None:
        """Answer one request (the provider's wire format)."""
        raise NotImplementedError
