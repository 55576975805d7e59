"""Test doubles shipped with parley: a scripted chat model that fails loudly.

`ScriptedModel` replays the steps it is given, one per call, in order, and records every
request. A call with no step left, and a step never used (`assert_consumed()`), are test
failures, so a test states exactly what the model is asked and answers. Tests of agents,
tools and the service use it instead of patching internals.

Example:
    >>> model = ScriptedModel(["Hello!"])
    >>> model.chat_sync([Msg.user("hi")]).text
    'Hello!'
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, ClassVar

from parley.messages import Msg, ToolCallBlock, new_call_id
from parley.models.accumulator import BlockDelta, Delta, MetaDelta, TextDelta, ToolCallDelta
from parley.models.base import ChatModel, ChatRequest
from parley.models.cache import block_delta
from parley.models.response import ChatResponse, ChatUsage

__all__ = ["ScriptedModel", "Step", "UnexpectedCallError"]

Step = ChatResponse | str | BaseException | Callable[[ChatRequest], "ChatResponse | str"]
"""What one call answers: a response, plain text, an error to raise, or a function of the
request that returns either of the first two."""


class UnexpectedCallError(AssertionError):
    """The scripted model was called with no step left, or a step was never used."""


def _words(msgs: Iterable[Msg]) -> int:
    return sum(len(m.text.split()) for m in msgs)


class ScriptedModel(ChatModel):
    """A chat model that answers from a script.

    Args:
        steps: One step per expected call.
        model: The name it reports.
        stream: Whether `await model(...)` streams.
        chunk_size: Characters per text delta when streaming.
        chunk_delay: Seconds to wait before each delta (to test cancellation and timing).
        context_size: The context window it claims, in tokens.
    """

    provider: ClassVar[str] = "scripted"

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        model: str = "scripted",
        stream: bool = False,
        chunk_size: int = 4,
        chunk_delay: float = 0.0,
        context_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            None, model, stream=stream, max_retries=0, context_size=context_size, **kwargs
        )
        self.steps: deque[Step] = deque(steps)
        self.requests: list[ChatRequest] = []
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        self.steps.extend(steps)

    def assert_consumed(self) -> None:
        """Fail if a scripted step was never used."""
        if self.steps:
            raise UnexpectedCallError(f"{len(self.steps)} scripted step(s) never used")

    @staticmethod
    def tool_call(
        name: str, arguments: dict[str, Any] | str, call_id: str | None = None
    ) -> ChatResponse:
        """A response that calls one tool (arguments as a dict, or a raw string)."""
        raw = arguments if isinstance(arguments, str) else None
        block = ToolCallBlock(
            id=call_id or new_call_id(),
            name=name,
            input=arguments if isinstance(arguments, dict) else {},
            raw_input=raw,
        )
        return ChatResponse(content=[block], finish_reason="tool_calls")

    def _next(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if not self.steps:
            last = request.messages[-1].text[:80] if request.messages else ""
            raise UnexpectedCallError(
                f"unexpected model call #{len(self.requests)}: no scripted step left "
                f"(last message: {last!r})"
            )
        step = self.steps.popleft()
        if isinstance(step, BaseException):
            raise step
        if callable(step) and not isinstance(step, ChatResponse):
            step = step(request)
        if isinstance(step, str):
            step = ChatResponse.model_validate({"content": [{"type": "text", "text": step}]})
        usage = step.usage or ChatUsage(
            input_tokens=_words(request.messages), output_tokens=len(step.text.split()) + 1
        )
        return step.model_copy(update={"usage": usage, "model": self.model})

    def _deltas(self, response: ChatResponse) -> Iterable[Delta]:
        size = max(1, self.chunk_size)
        for index, block in enumerate(response.content):
            if block.type == "text":
                for start in range(0, len(block.text), size):
                    yield TextDelta(block.text[start : start + size])
            elif block.type == "tool_call":
                raw = block.raw_input or json.dumps(block.input, ensure_ascii=False)
                yield ToolCallDelta(index, block.id, block.name)
                for start in range(0, len(raw), size):
                    yield ToolCallDelta(index, arguments=raw[start : start + size])
            elif block.type == "thinking" and block.provider is not None:
                yield BlockDelta(block)  # whole, so that it keeps the provider it names
            else:
                yield block_delta(index, block)  # unsplit: as a cached answer replays it
        # Metadata too: what a provider marks there (a paused turn) reaches the final chunk.
        yield MetaDelta(
            usage=response.usage,
            finish_reason=response.finish_reason,
            metadata=response.metadata or None,
        )

    def thinking_provider(self) -> str | None:
        """None: a script's thinking blocks keep the provider they name (or none)."""
        return None

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        response = self._next(request)
        for delta in self._deltas(response):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield delta
