"""How an agent's model reads a conversation with other agents in it.

An agent that observes others keeps their replies in its memory as they were: assistant
messages carrying the speaker's `name`. Sent as they are, a model would take them for its
own turns, so a `MsgHub` switches each participant's model to multi-agent formatting (its
own turns stay assistant turns; runs of user turns and other agents' turns are folded into
one user message that names each speaker, see `parley.models.formatter.fold_other_agents`):

- a provider with a multi-agent formatter (OpenAI's two APIs and their presets, Anthropic,
  Gemini, Ollama, DashScope): its `MultiAgentFormatter(self_name=agent.name)` around the
  formatter the model had (so Responses and DeepSeek's `reasoning_content` keep their own),
  from `ChatModel.multi_agent_formatter`; a formatter that already folds gets this agent's
  name;
- any other model (the local model, `ScriptedModel`, `PromptedToolsModel`...): wrapped in a
  `FoldingModel`, which folds the same way before the model formats the messages itself.

Two layouts (`HistoryLayout`): parley's `history` block, one user message per run of turns,
and AgentScope's `entries`, one `[name]: text` user message per turn (`MsgHub(...,
multi_agent_format="entries")`).

The agent gets its own copy of the model (`ChatModel.with_formatter`), since one model object
is often shared by several agents, each with its own name. A copy sends through the
original's client: closing the model you made closes the copies' connections too.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from parley.agents._wrapper import WrapperModel
from parley.messages import Msg
from parley.models.base import ChatModel, ChatRequest, MessagesInput
from parley.models.formatter import (
    HistoryLayout,
    MultiAgentFormatter,
    check_layout,
    fold_other_agents,
)

if TYPE_CHECKING:
    from parley.agents.agent import Agent
    from parley.models.accumulator import Delta
    from parley.models.response import ChatResponse, StructuredResponse
    from parley.models.stream import ChatStream

__all__ = ["FoldingModel", "multi_agent_model", "observable", "use_multi_agent_formatting"]

_SHARED = {"text", "image", "audio", "video", "file"}


def observable(msg: Msg) -> Msg | None:
    """What others see of a reply: its text and media, without thinking or tool traffic.

    Another agent's tool calls would reach a model without their results (providers refuse
    that), and its thinking is its own. None when nothing is left.
    """
    kept = [block for block in msg.content if block.type in _SHARED]
    if not kept:
        return None
    if len(kept) == len(msg.content):
        return msg.model_copy(deep=True)
    return msg.model_copy(update={"content": copy.deepcopy(kept)}, deep=True)


class FoldingModel(WrapperModel):
    """A chat model that sees other agents' turns folded into named user messages.

    For models without a multi-agent formatter: the messages are folded
    (`fold_other_agents(messages, self_name)`) and the inner model formats them as usual.
    Retries, caching, the context size, structured output and the default tool-choice policy
    are the inner model's.

    Args:
        inner: The model to wrap.
        self_name: The name of the agent this model speaks for.
        layout: How other agents' turns are laid out (`HistoryLayout`).
    """

    provider: ClassVar[str] = "folding"

    def __init__(
        self, inner: ChatModel, self_name: str, *, layout: HistoryLayout = "history"
    ) -> None:
        super().__init__(inner)
        self.self_name = self_name
        self.layout: HistoryLayout = check_layout(layout)

    def __repr__(self) -> str:
        return f"FoldingModel({self.inner!r}, self_name={self.self_name!r})"

    def _fold(self, request: ChatRequest) -> ChatRequest:
        return dataclasses.replace(
            request, messages=fold_other_agents(request.messages, self.self_name, self.layout)
        )

    def open_stream(self, request: ChatRequest) -> ChatStream:
        """The inner model's stream, on the folded messages."""
        return self.inner.open_stream(self._fold(request))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """The inner model's whole answer, on the folded messages."""
        return await self.inner.complete(self._fold(request))

    def _stream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        # The base requires it; open_stream and complete bypass it for the inner model's own.
        return self.inner._stream(self._fold(request))

    async def generate_structured_output(
        self,
        messages: MessagesInput,
        schema: type[BaseModel] | Mapping[str, Any],
        **overrides: Any,
    ) -> StructuredResponse:
        """The inner model's structured output, on the folded messages."""
        msgs = fold_other_agents(self.build_request(messages).messages, self.self_name, self.layout)
        return await self.inner.generate_structured_output(msgs, schema, **overrides)


def _speaks_as(model: ChatModel, name: str, layout: HistoryLayout) -> bool:
    """Whether `model` already folds other agents' turns for the agent `name`, so laid out."""
    if isinstance(model, FoldingModel):
        return model.self_name == name and model.layout == layout
    formatter = model.formatter
    return (
        isinstance(formatter, MultiAgentFormatter)
        and formatter.self_name == name
        and formatter.layout == layout
    )


def multi_agent_model(model: ChatModel, name: str, layout: HistoryLayout = "history") -> ChatModel:
    """A copy of `model` that folds other agents' turns for the agent `name`, in `layout`."""
    check_layout(layout)
    if isinstance(model, FoldingModel):
        return FoldingModel(model.inner, name, layout=layout)
    formatter = model.multi_agent_formatter(name)
    if formatter is None:  # a provider without a multi-agent formatter: fold around it
        return FoldingModel(model, name, layout=layout)
    if isinstance(formatter, MultiAgentFormatter):
        formatter.layout = layout
    return model.with_formatter(formatter)


def use_multi_agent_formatting(agent: Agent, layout: HistoryLayout = "history") -> None:
    """Switch `agent`'s model to multi-agent formatting (see the module docstring).

    Idempotent: a model that already folds for this agent's name in `layout` is left as it is.
    """
    if not _speaks_as(agent.model, agent.name, layout):
        agent.model = multi_agent_model(agent.model, agent.name, layout)
