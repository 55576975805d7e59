"""The model layer: chat models, their credentials, parameters, cards and responses."""

from parley.models.accumulator import (
    BlockDelta,
    Delta,
    MetaDelta,
    StreamAccumulator,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from parley.models.base import ChatModel, ChatRequest
from parley.models.cards import ModelCard
from parley.models.credentials import APIKeyCredential, Credential, CredentialFactory
from parley.models.formatter import Formatter, fold_other_agents
from parley.models.parameters import Parameters
from parley.models.response import ChatResponse, ChatUsage, FinishReason, StructuredResponse
from parley.models.retry import RetryPolicy
from parley.models.stream import ChatStream
from parley.models.tools import ToolChoice, ToolLike, ToolSpec

__all__ = [
    "APIKeyCredential",
    "BlockDelta",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ChatStream",
    "ChatUsage",
    "Credential",
    "CredentialFactory",
    "Delta",
    "FinishReason",
    "Formatter",
    "MetaDelta",
    "ModelCard",
    "Parameters",
    "RetryPolicy",
    "StreamAccumulator",
    "StructuredResponse",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolChoice",
    "ToolLike",
    "ToolSpec",
    "fold_other_agents",
]
