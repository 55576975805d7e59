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
from parley.providers._server.steps import ErrorAnswer, Faults, Raw, Reset

__all__ = ["ScriptedServer", "send_stream"]


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

    def _answer_alike(
        self, request: RecordedRequest, step: Any, out: Responder, missing: Any
    ) -> bool:
        """Answer the steps every server answers alike; False for one the provider answers.

        Those are: no step left (a 500 with the body `missing`, the request kept for
        `assert_consumed`), the provider's `HTTPError` (an `ErrorAnswer`), `Reset` and `Raw`.
        """
        if step is None:
            self.unexpected.append(request)
            out.send_json(500, missing)
        elif isinstance(step, ErrorAnswer):
            out.sleep(step.delay)
            out.send_json(step.status, step.payload(), step.headers.items())
        elif isinstance(step, Reset):
            out.sleep(step.delay)
            out.drop(reset=True)
        elif isinstance(step, Raw):
            out.send(step.status, step.body, step.headers.items(), step.content_type)
        else:
            return False
        return True


def send_stream(
    out: Responder,
    events: list[bytes],
    faults: Faults,
    *,
    malformed: bytes,
    error: bytes,
    content_type: str = "text/event-stream",
) -> None:
    """Send `events` as a chunked answer, with the faults the step asks for.

    Args:
        out: The answer.
        events: The stream's events (or lines), each whole.
        faults: The step: `malformed_at` replaces that event by `malformed`, `error_at` ends
            the stream there with `error`, `cut_after` drops the connection after that many
            events, `chunk_delay` paces them.
        malformed: The broken event.
        error: The provider's error event.
        content_type: The stream's media type.
    """
    if faults.malformed_at is not None and faults.malformed_at < len(events):
        events[faults.malformed_at] = malformed
    if faults.error_at is not None:
        events = [*events[: faults.error_at], error]
    cut = faults.cut_after is not None and faults.cut_after < len(events)
    if cut:
        events = events[: faults.cut_after]
    out.start_stream(content_type)
    if faults.chunk_delay:
        for event in events:
            out.sleep(faults.chunk_delay)
            out.chunk(event)
    else:
        # No pacing asked: fewer, larger writes keep the server out of the way.
        for start in range(0, len(events), 64):
            out.chunk(b"".join(events[start : start + 64]))
    if cut:
        out.drop()
    else:
        out.end_stream()
