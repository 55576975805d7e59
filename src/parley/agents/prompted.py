"""`PromptedToolsModel`: tool calling through the prompt, for models without it.

Wraps any chat model. Tools go into the system prompt in Qwen-Agent's `nous` format, past
calls and results are written into the conversation as text (see `parley.agents._nous`),
the inner model is called without tools, and the `<tool_call>` blocks in its answer come
back as tool-call blocks, parsed while the answer streams: text before a call streams as
text; a call is held until it closes, then given whole.

Example:
    >>> model = PromptedToolsModel(ScriptedModel(['<tool_call>{"name": "f", "arguments": {}}'
    ...                                           '</tool_call>']))
    >>> model.chat_sync([Msg.user("hi")], tools=[{"name": "f"}]).tool_calls[0].name
    'f'
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from parley.agents._nous import NousParser, nous_messages
from parley.messages import TextBlock, ThinkingBlock, ToolCallBlock
from parley.models.accumulator import (
    BlockDelta,
    Delta,
    MetaDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from parley.models.base import ChatModel, ChatRequest, MessagesInput
from parley.models.response import ChatResponse, FinishReason, StructuredResponse

__all__ = ["PromptedToolsModel"]


def _finish(inner: FinishReason | None, calls: int) -> FinishReason | None:
    # The inner model stopped at its end of text; for the caller, that is a call to tools.
    if calls and inner in (None, "stop"):
        return "tool_calls"
    return inner


class PromptedToolsModel(ChatModel):
    """A chat model that calls tools through its prompt (Qwen-Agent's `nous` format).

    It answers like any chat model: the tools it is given come back as tool-call blocks.
    Retries, the context size, the parameters and the default tool-choice policy are the
    inner model's. `tool_choice` `none` leaves the tools out; `required` or a tool's name asks
    for a call in the prompt, which the format cannot enforce.

    Args:
        inner: The model to wrap.
    """

    provider: ClassVar[str] = "prompted"
    trace_calls: ClassVar[bool] = False  # the inner model's calls are traced

    def __init__(self, inner: ChatModel) -> None:
        # No retries of its own: the inner model's stream retries before its first chunk.
        super().__init__(
            None,
            inner.model,
            inner.parameters,
            stream=inner.stream,
            max_retries=0,
            context_size=inner.context_size,
        )
        self.inner = inner
        self.default_tool_choice = inner.default_tool_choice

    def __repr__(self) -> str:
        return f"PromptedToolsModel({self.inner!r})"

    def _inner_request(self, request: ChatRequest) -> ChatRequest:
        parameters = request.parameters
        if parameters.parallel_tool_calls is not None:
            # Providers refuse `parallel_tool_calls` without tools, and the inner gets none.
            parameters = parameters.model_copy(update={"parallel_tool_calls": None})
        return ChatRequest(
            messages=nous_messages(request.messages, request.tools, request.tool_choice),
            parameters=parameters,
            response_format=request.response_format,
        )

    def thinking_provider(self) -> str | None:
        """The inner model's: the thinking is its own."""
        return self.inner.thinking_provider()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        parse = bool(request.tools) and request.tool_choice != "none"
        parser = NousParser() if parse else None
        stream = self.inner.open_stream(self._inner_request(request))
        seen: set[str] = set()
        try:
            async for chunk in stream:
                if chunk.is_last:
                    for delta in parser.close() if parser else ():
                        yield delta
                    calls = parser.calls if parser else 0
                    yield MetaDelta(chunk.usage, _finish(chunk.finish_reason, calls), None)
                    return
                for delta in _deltas(chunk, parser, seen):
                    yield delta
        finally:
            await stream.aclose()

    async def generate_structured_output(
        self,
        messages: MessagesInput,
        schema: type[BaseModel] | Mapping[str, Any],
        **overrides: Any,
    ) -> StructuredResponse:
        """The inner model's structured output, on the conversation written as text."""
        msgs = nous_messages(self.build_request(messages).messages, [], None)
        return await self.inner.generate_structured_output(msgs, schema, **overrides)


def _deltas(chunk: ChatResponse, parser: NousParser | None, seen: set[str]) -> list[Delta]:
    out: list[Delta] = []
    for block in chunk.content:
        if isinstance(block, TextBlock):
            out += parser.feed(block.text) if parser else [TextDelta(block.text)]
        elif isinstance(block, ThinkingBlock):
            out.append(ThinkingDelta(block.thinking, block.signature, block.extra))
        elif isinstance(block, ToolCallBlock):
            # The inner model is called without tools; should it still call one, keep it (its
            # chunks repeat the name, which the accumulator would append each time).
            name = None if block.id in seen else block.name
            seen.add(block.id)
            out.append(ToolCallDelta(f"inner-{block.id}", block.id, name, block.raw_input or ""))
        else:
            out.append(BlockDelta(block))
    return out
