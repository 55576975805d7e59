"""Server-sent events read straight from a response's bytes, and their JSON parsed fast.

The openai SDK builds a pydantic object for every stream chunk, which is most of its cost
per chunk. parley keeps the SDK for the request (client, auth, base URL, errors) and reads
the stream itself: lines split from the raw bytes, JSON parsed by `jiter` (the SDK's own
JSON dependency), deltas built from plain dicts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

__all__ = ["iter_events", "loads"]

loads: Callable[[bytes], Any]
try:
    from jiter import from_json as loads
except ImportError:  # pragma: no cover - jiter comes with the openai SDK
    loads = json.loads


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
