"""What every HTTP provider adapter shares: server-sent events, fast JSON, waits, transport errors.

The SDKs build a pydantic object for every stream event, which is most of their cost per
event. parley keeps each SDK for the request (client, auth, base URL, errors) and reads
streams itself: lines split from the raw bytes, JSON parsed by `jiter` when installed (the
openai and anthropic SDKs' own JSON dependency), deltas built from plain dicts.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

from parley.errors import ModelConnectionError, ModelOutputError
from parley.models.accumulator import Delta, MetaDelta
from parley.models.response import ChatUsage, FinishReason

__all__ = [
    "Event",
    "EventReader",
    "FinishReasons",
    "LineSplitter",
    "iter_events",
    "loads",
    "read_json",
    "retry_after",
    "transport_errors",
]

loads: Callable[[bytes], Any]
try:
    from jiter import from_json as loads
except ImportError:  # pragma: no cover - jiter comes with the openai and anthropic SDKs
    loads = json.loads


class FinishReasons(dict[str, FinishReason]):
    """A provider's finish reasons and parley's for each; call it with the provider's value.

    Example:
        >>> finish_reason = FinishReasons({"end_turn": "stop"})
        >>> finish_reason("end_turn"), finish_reason("unheard_of"), finish_reason(None)
        ('stop', None, None)
    """

    def __call__(self, value: Any) -> FinishReason | None:
        """Parley's finish reason for the provider's `value`; None for unknown ones."""
        return self.get(value) if isinstance(value, str) else None


def read_json(data: bytes, *, model: str, provider: str) -> dict[str, Any]:
    """Parse one JSON object the provider sent.

    Raises:
        ModelOutputError: It is not a JSON object.
    """
    try:
        parsed = loads(data)
    except ValueError as exc:
        raise ModelOutputError(
            f"{provider} sent malformed JSON ({exc}): {data[:200]!r}",
            model=model,
            provider=provider,
        ) from None
    if not isinstance(parsed, dict):
        raise ModelOutputError(
            f"{provider} sent JSON that is not an object: {data[:200]!r}",
            model=model,
            provider=provider,
        )
    return parsed


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked to wait, from `retry-after-ms` or `Retry-After`, or None.

    OpenAI sends `retry-after-ms` beside the standard `Retry-After` (seconds or an HTTP
    date); the SDK reads them in that order, and so does this.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """`(timeouts, transport errors)` of the HTTP libraries the SDK may be built on."""
    timeouts: list[type[BaseException]] = []
    transport: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


class EventReader:
    """The base of the providers' stream readers: one event's data in, its deltas out.

    A reader keeps what its errors name and where the stream stands: `finished` when the
    provider said the answer is whole (a finish reason), `done` when the stream said it ended
    (later events are read past).

    Args:
        model: The model's name, for errors.
        provider: The provider's name, for errors.
    """

    id_field: ClassVar[str] = "id"
    """The field of an event that holds the response's id (see `meta`)."""
    model_field: ClassVar[str] = "model"
    """The field of an event that holds the model's name (see `meta`)."""

    def __init__(self, *, model: str, provider: str) -> None:
        self.model = model
        self.provider = provider
        self.finished = False
        """A finish reason arrived: the answer is whole even if the stream ends now."""
        self.done = False
        """The stream said it ended: later events are read past, not parsed."""
        self._started = False

    def meta(
        self,
        event: Mapping[str, Any],
        out: list[Delta],
        usage: ChatUsage | None,
        reason: FinishReason | None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Add `event`'s `MetaDelta` to `out` if it has news or is the stream's first.

        News is usage, a finish reason or metadata; the first names the response and model.
        """
        if usage or reason or metadata or not self._started:
            self._started = True
            out.append(
                MetaDelta(
                    usage=usage,
                    finish_reason=reason,
                    response_id=event.get(self.id_field),
                    model=event.get(self.model_field),
                    metadata=metadata,
                )
            )

    @property
    def complete(self) -> bool:
        """Whether the stream said the answer is whole."""
        return self.done or self.finished

    @property
    def stopped(self) -> bool:
        """Whether later events are to be read past, not parsed."""
        return self.done

    def feed(self, name: str, data: bytes) -> Iterable[Delta]:
        """The deltas in one event (`name` is `""` where the API names none)."""
        raise NotImplementedError

    def incomplete(self, before: str = "it was complete") -> ModelConnectionError:
        """The error for a stream that ended `before` it said the answer was whole."""
        return ModelConnectionError(
            f"the {self.provider} stream ended before {before}",
            model=self.model,
            provider=self.provider,
        )


Event = tuple[str, bytes]
"""A server-sent event: its name (`""` when it has none) and its data."""


class LineSplitter:
    """Splits server-sent events out of a byte stream line by line, chunk by chunk.

    Follows the SSE format: `data:` lines joined by newlines, `event:` names the event,
    comments (`:` lines, as OpenRouter's keep-alives) and `id:`/`retry:` ignored, a blank
    line ends an event. An event still open when the stream ends is kept if its lines were
    whole (some servers end without the last blank line, see `close`); a line cut in half is
    dropped, so a stream cut mid-way shows as an incomplete stream rather than as bad JSON.
    Providers that recognize their own framing whole fall back on it for anything else.
    """

    __slots__ = ("_data", "_name", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._name = ""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[Event]:
        """The events that `chunk` completes."""
        events: list[Event] = []
        lines = (self._pending + chunk if self._pending else chunk).split(b"\n")
        self._pending = lines.pop()
        data = self._data
        for raw in lines:
            line = raw[:-1] if raw[-1:] == b"\r" else raw
            if not line:
                if data:
                    events.append((self._name, data[0] if len(data) == 1 else b"\n".join(data)))
                    data = self._data = []
                self._name = ""
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                self._name = value.decode("utf-8", "replace")
        return events

    def close(self) -> list[Event]:
        """The event left open at the end of the stream, when its lines were whole."""
        if not self._data:
            return []
        event = (self._name, b"\n".join(self._data))
        self._data = []
        return [event]


async def iter_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[Event]:
    """`(event name, data)` for each server-sent event in a byte stream (see `LineSplitter`)."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for event in splitter.feed(chunk):
            yield event
    for event in splitter.close():
        yield event
