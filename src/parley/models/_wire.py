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
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from parley.errors import ModelOutputError

__all__ = ["iter_events", "loads", "read_json", "retry_after", "transport_errors"]

loads: Callable[[bytes], Any]
try:
    from jiter import from_json as loads
except ImportError:  # pragma: no cover - jiter comes with the openai and anthropic SDKs
    loads = json.loads


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


async def iter_events(chunks: AsyncIterable[bytes]) -> AsyncIterator[tuple[str, bytes]]:
    """`(event name, data)` for each server-sent event in a byte stream.

    Follows the SSE format: `data:` lines joined by newlines, `event:` names the event,
    comments (`:` lines, as OpenRouter's keep-alives) and `id:`/`retry:` ignored, a blank
    line ends an event. An event still open when the stream ends is kept if its lines were
    whole (some servers end without the last blank line); a line cut in half is dropped, so
    a stream cut mid-way shows as an incomplete stream rather than as bad JSON.
    """
    pending = b""
    name = ""
    data: list[bytes] = []
    async for chunk in chunks:
        lines = (pending + chunk if pending else chunk).split(b"\n")
        pending = lines.pop()
        for raw in lines:
            line = raw[:-1] if raw[-1:] == b"\r" else raw
            if not line:
                if data:
                    yield name, data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                name = ""
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode("utf-8", "replace")
    if data:
        yield name, b"\n".join(data)
