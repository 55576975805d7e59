"""An opt-in, on-disk cache of model responses (Qwen-Agent's `cache_dir`).

Keyed on what decides the answer: provider, model, messages (without their ids and
timestamps), tools, tool choice, parameters and response format. A cached streamed call
replays as a stream. Stored with `diskcache`, which is safe across threads and processes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parley.models.accumulator import (
    BlockDelta,
    Delta,
    MetaDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from parley.models.response import ChatResponse

if TYPE_CHECKING:
    from parley.messages import Block
    from parley.models.request import ChatRequest

__all__ = ["ResponseCache", "block_delta", "replay"]


class ResponseCache:
    """Model responses on disk, by request.

    Args:
        directory: Where the cache lives; made if missing.
    """

    def __init__(self, directory: str | Path) -> None:
        import diskcache  # noqa: PLC0415  (only for callers who turn the cache on)

        self.directory = Path(directory)
        self._cache = diskcache.Cache(str(self.directory))

    @staticmethod
    def key(provider: str, model: str, request: ChatRequest) -> str:
        """A digest of everything that decides the answer."""
        payload: dict[str, Any] = {
            "provider": provider,
            "model": model,
            "messages": [
                m.model_dump(mode="json", exclude={"id", "created_at"}) for m in request.messages
            ],
            "tools": [t.model_dump(mode="json") for t in request.tools],
            "tool_choice": request.tool_choice,
            "parameters": request.parameters.to_kwargs(),
            "response_format": request.response_format,
        }
        encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(encoded.encode()).hexdigest()

    def get(self, key: str) -> ChatResponse | None:
        """The cached response, or None."""
        data = self._cache.get(key)
        return ChatResponse.model_validate_json(data) if isinstance(data, str) else None

    def put(self, key: str, response: ChatResponse) -> None:
        """Store a response."""
        self._cache.set(key, response.model_dump_json())

    def clear(self) -> None:
        """Drop every cached response."""
        self._cache.clear()


def block_delta(key: int | str, block: Block) -> Delta:
    """The delta that adds `block` to a stream (`key` tells a tool call's pieces apart)."""
    if block.type == "text":
        return TextDelta(block.text)
    if block.type == "thinking":
        return ThinkingDelta(block.thinking, block.signature, block.extra)
    if block.type == "tool_call":
        raw = block.raw_input
        if raw is None:
            raw = json.dumps(block.input, ensure_ascii=False) if block.input else ""
        return ToolCallDelta(key, block.id, block.name or None, raw)
    return BlockDelta(block)


async def replay(response: ChatResponse) -> AsyncIterator[Delta]:
    """Deltas that rebuild `response`: a cached answer played back as a stream."""
    for index, block in enumerate(response.content):
        yield block_delta(index, block)
    yield MetaDelta(
        usage=response.usage,
        finish_reason=response.finish_reason,
        response_id=response.id,
        model=response.model,
    )
