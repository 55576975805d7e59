"""A custom AgentScope-style model as a parley `ChatModel` (`ChatModelBase.to_parley()`).

A model that implements AgentScope's `_call_api` itself gets parley's structured output and
can drive parley's agents: parley's requests become AgentScope's call (messages, OpenAI-style
tool schemas, a `ToolChoice`, the parameters set as keywords) and its answers parley's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, ClassVar

from parley import messages as pm
from parley.compat.agentscope._responses import ChatResponse
from parley.compat.agentscope.message import (
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from parley.compat.agentscope.tool import ToolChoice
from parley.models import response as pr
from parley.models.base import ChatModel, ChatRequest
from parley.models.retry import RetryPolicy

if TYPE_CHECKING:
    from parley.compat.agentscope._chat_base import ChatModelBase

__all__ = ["AgentScopeBacked"]


def _parley_block(block: TextBlock | ToolCallBlock | ThinkingBlock | DataBlock) -> pm.Block:
    if isinstance(block, TextBlock):
        return pm.TextBlock(text=block.text)
    if isinstance(block, ThinkingBlock):
        return pm.ThinkingBlock(thinking=block.thinking)
    if isinstance(block, ToolCallBlock):
        return pm.ToolCallBlock(id=block.id, name=block.name, raw_input=block.input)
    from parley.compat.agentscope import msg_from_agentscope  # noqa: PLC0415  (a cycle)

    data = {"name": "model", "role": "assistant", "content": [block.model_dump(mode="json")]}
    return msg_from_agentscope(data, form="python").content[0]


def _whole(response: ChatResponse) -> pr.ChatResponse:
    blocks: list[pm.Block] = []
    for block in response.content:
        converted = _parley_block(block)
        if isinstance(converted, pm.ToolCallBlock) and converted.raw_input:
            try:
                arguments = json.loads(converted.raw_input)
            except ValueError:
                arguments = None  # kept as the raw text, as parley keeps unparsable arguments
            if isinstance(arguments, dict):
                converted = pm.ToolCallBlock(id=block.id, name=converted.name, input=arguments)
        blocks.append(converted)
    usage = None
    if response.usage is not None:
        usage = pm.Usage(
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            cached_tokens=response.usage.cache_input_tokens,
        )
    return pr.ChatResponse(content=blocks, usage=usage, id=response.id)


class AgentScopeBacked(ChatModel):
    """A parley model whose calls go to an AgentScope-style model's `__call__`.

    The AgentScope model retries (its `_get_retryable_exceptions`), so this one does not.
    """

    provider: ClassVar[str] = "agentscope"
    trace_calls: ClassVar[bool] = True

    def __init__(self, owner: ChatModelBase) -> None:
        super().__init__(None, owner.model, stream=owner.stream, max_retries=0)
        self.retry = RetryPolicy(max_retries=0)
        self.owner = owner

    def thinking_provider(self) -> str | None:
        """None: the blocks are left as the model made them."""
        return None

    async def _call_api(
        self, request: ChatRequest
    ) -> pr.ChatResponse | AsyncIterator[pr.ChatResponse]:
        from parley.compat.agentscope import msgs_to_agentscope  # noqa: PLC0415  (a cycle)

        messages: list[Any] = [Msg.model_validate(m) for m in msgs_to_agentscope(request.messages)]
        tools = [spec.openai() for spec in request.tools] or None
        choice = ToolChoice(mode=request.tool_choice) if request.tool_choice else None
        result = await self.owner(messages, tools, choice, **request.parameters.to_kwargs())
        if isinstance(result, ChatResponse):
            return _whole(result)
        return self._deltas(result)

    @staticmethod
    async def _deltas(chunks: AsyncIterator[ChatResponse]) -> AsyncIterator[pr.ChatResponse]:
        async for chunk in chunks:
            if chunk.is_last:
                break  # parley joins the deltas itself
            blocks = [_parley_block(block) for block in chunk.content]
            yield pr.ChatResponse(content=blocks, is_last=False)
