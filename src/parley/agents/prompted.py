"""`PromptedToolsModel`: tool calling through the prompt, for models without it.

Wraps any chat model. Tools go into the system prompt in Qwen-Agent's `nous` format, past
calls and results are written into the conversation as text (see `parley.agents._nous`),
the inner model is called without tools, and the `<tool_call>` blocks in its answer come
back as tool-call blocks, parsed while the answer streams: text before a call streams as
text; a call is held until it closes, then given whole. Another prompt format (Qwen-Agent's
`qwen` one, in `parley.compat.qwen.llm.fncall_prompts`) is a `ToolPromptFormat` given as
`fmt`. With `thought_in_content`, reasoning the model writes in its text (`<think>...
</think>`, the opening tag optional) comes back as thinking, and no call is read in it.

Example:
    >>> model = PromptedToolsModel(ScriptedModel(['<tool_call>{"name": "f", "arguments": {}}'
    ...                                           '</tool_call>']))
    >>> model.chat_sync([Msg.user("hi")], tools=[{"name": "f"}]).tool_calls[0].name
    'f'
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from parley.agents._nous import NousParser, ThinkSplitter, nous_messages
from parley.agents._wrapper import WrapperModel
from parley.messages import Msg, TextBlock, ThinkingBlock, ToolCallBlock
from parley.models import accumulator as acc
from parley.models.base import ChatModel, ChatRequest, MessagesInput
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse, FinishReason, StructuredResponse
from parley.models.tools import ToolSpec

__all__ = ["NousFormat", "PromptedToolsModel", "TextParser", "ToolPromptFormat"]


class TextParser(Protocol):
    """Reads a model's streamed text into text and tool-call deltas."""

    calls: int
    """How many calls it has read so far."""

    def feed(self, text: str) -> list[acc.Delta]:
        """The deltas that `text`, the next piece of the stream, completes."""
        ...

    def close(self) -> list[acc.Delta]:
        """The deltas still held when the stream ends."""
        ...


class ToolPromptFormat(Protocol):
    """How tools, calls and results are written into a prompt, and calls read back."""

    stop: Sequence[str]
    """Stop words the inner model gets besides its own (where results would begin)."""

    def write(
        self,
        msgs: Sequence[Msg],
        tools: Sequence[ToolSpec],
        tool_choice: str | None,
        parameters: Parameters,
    ) -> list[Msg]:
        """The conversation for the inner model, tools in it, calls and results as text."""
        ...

    def parser(self, tool_choice: str | None, parameters: Parameters) -> TextParser:
        """A parser for one answer."""
        ...


class NousFormat:
    """Qwen-Agent's `nous` format (`parley.agents._nous`): the default."""

    stop: Sequence[str] = ()

    def write(
        self,
        msgs: Sequence[Msg],
        tools: Sequence[ToolSpec],
        tool_choice: str | None,
        parameters: Parameters,
    ) -> list[Msg]:
        """Tools as JSON in the system prompt; calls as `<tool_call>` text."""
        return nous_messages(msgs, tools, tool_choice)

    def parser(self, tool_choice: str | None, parameters: Parameters) -> TextParser:
        """A `NousParser`."""
        return NousParser()


def _finish(inner: FinishReason | None, calls: int) -> FinishReason | None:
    # The inner model stopped at its end of text; for the caller, that is a call to tools.
    if calls and inner in (None, "stop"):
        return "tool_calls"
    return inner


class PromptedToolsModel(WrapperModel):
    """A chat model that calls tools through its prompt (Qwen-Agent's `nous` format).

    It answers like any chat model: the tools it is given come back as tool-call blocks.
    Retries, the context size, the parameters and the default tool-choice policy are the
    inner model's. `tool_choice` `none` leaves the tools out; `required` or a tool's name asks
    for a call in the prompt, which the format cannot enforce.

    Args:
        inner: The model to wrap.
        fmt: The prompt format (default: `nous`).
        thought_in_content: The model writes its reasoning in its text, up to `</think>`.
    """

    provider: ClassVar[str] = "prompted"
    trace_calls: ClassVar[bool] = False  # the inner model's calls are traced

    def __init__(
        self,
        inner: ChatModel,
        fmt: ToolPromptFormat | None = None,
        *,
        thought_in_content: bool = False,
    ) -> None:
        super().__init__(inner)
        self.fmt: ToolPromptFormat = fmt if fmt is not None else NousFormat()
        self.thought_in_content = thought_in_content

    def __repr__(self) -> str:
        return f"PromptedToolsModel({self.inner!r})"

    def _inner_request(self, request: ChatRequest, prompted: bool) -> ChatRequest:
        parameters = request.parameters
        messages = self.fmt.write(request.messages, request.tools, request.tool_choice, parameters)
        update: dict[str, Any] = {}
        if parameters.parallel_tool_calls is not None:
            # Providers refuse `parallel_tool_calls` without tools, and the inner gets none.
            update["parallel_tool_calls"] = None
        if prompted and self.fmt.stop:
            stop = list(parameters.stop or [])
            update["stop"] = stop + [s for s in self.fmt.stop if s not in stop]
        if update:
            parameters = parameters.model_copy(update=update)
        return ChatRequest(
            messages=messages,
            parameters=parameters,
            response_format=request.response_format,
        )

    def thinking_provider(self) -> str | None:
        """The inner model's: the thinking is its own."""
        return self.inner.thinking_provider()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[acc.Delta]:
        parse = bool(request.tools) and request.tool_choice != "none"
        parser = self.fmt.parser(request.tool_choice, request.parameters) if parse else None
        splitter = ThinkSplitter(expected=self.thought_in_content)
        stream = self.inner.open_stream(self._inner_request(request, parse))
        seen: set[str] = set()
        try:
            async for chunk in stream:
                if chunk.is_last:
                    for delta in _through(splitter.close(), parser, final=True):
                        yield delta
                    calls = parser.calls if parser else 0
                    yield acc.MetaDelta(chunk.usage, _finish(chunk.finish_reason, calls), None)
                    return
                for delta in _deltas(chunk, splitter, parser, seen):
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


def _through(
    deltas: list[acc.Delta], parser: TextParser | None, *, final: bool = False
) -> list[acc.Delta]:
    """The splitter's deltas, their answer text read by the parser (closed if `final`)."""
    out: list[acc.Delta] = []
    for delta in deltas:
        if isinstance(delta, acc.TextDelta) and parser is not None:
            out += parser.feed(delta.text)
        else:
            out.append(delta)
    if final and parser is not None:
        out += parser.close()
    return out


def _deltas(
    chunk: ChatResponse, splitter: ThinkSplitter, parser: TextParser | None, seen: set[str]
) -> list[acc.Delta]:
    out: list[acc.Delta] = []
    for block in chunk.content:
        if isinstance(block, TextBlock):
            out += _through(splitter.feed(block.text), parser)
        elif isinstance(block, ThinkingBlock):
            out.append(acc.ThinkingDelta(block.thinking, block.signature, block.extra))
        elif isinstance(block, ToolCallBlock):
            # The inner model is called without tools; should it still call one, keep it (its
            # chunks repeat the name, which the accumulator would append each time).
            name = None if block.id in seen else block.name
            seen.add(block.id)
            out.append(
                acc.ToolCallDelta(f"inner-{block.id}", block.id, name, block.raw_input or "")
            )
        else:
            out.append(acc.BlockDelta(block))
    return out
