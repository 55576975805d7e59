"""Agents: the tool-calling loop, its events, memory, approvals and context budget.

`Agent` runs a chat model and tools in a loop (`reply`, `stream`, and their sync twins);
`PromptedToolsModel` gives tool calling to models without it (Qwen-Agent's `nous` format).
"""

from parley.agents.agent import (
    Agent,
    AgentInput,
    ContinueOptions,
    RunOptions,
    StructuredOptions,
    ToolChoicePolicy,
    one_tool_round,
)
from parley.agents.approval import CANCELLED, DENIED, INTERRUPTED, NOT_RUN, PendingApproval
from parley.agents.budget import (
    ContextBudget,
    ContextStrategy,
    CountsTokens,
    TokenCounter,
    estimate_tokens,
)
from parley.agents.events import (
    AgentEvent,
    AgentEventAdapter,
    ApprovalRequested,
    AudioDelta,
    AudioEnded,
    AudioStarted,
    MaxItersReached,
    MessageCompleted,
    RunEnded,
    RunError,
    RunStarted,
    RunStatus,
    TextDelta,
    ThinkingDelta,
    ToolCallArgumentsDelta,
    ToolCallEnded,
    ToolCallStarted,
    ToolResult,
)
from parley.agents.memory import InMemoryMemory, Memory
from parley.agents.middleware import Middleware
from parley.agents.prompted import PromptedToolsModel
from parley.agents.run import AgentRun, StructuredSchema

__all__ = [
    "CANCELLED",
    "DENIED",
    "INTERRUPTED",
    "NOT_RUN",
    "Agent",
    "AgentEvent",
    "AgentEventAdapter",
    "AgentInput",
    "AgentRun",
    "ApprovalRequested",
    "AudioDelta",
    "AudioEnded",
    "AudioStarted",
    "ContextBudget",
    "ContextStrategy",
    "ContinueOptions",
    "CountsTokens",
    "InMemoryMemory",
    "MaxItersReached",
    "Memory",
    "MessageCompleted",
    "Middleware",
    "PendingApproval",
    "PromptedToolsModel",
    "RunEnded",
    "RunError",
    "RunOptions",
    "RunStarted",
    "RunStatus",
    "StructuredOptions",
    "StructuredSchema",
    "TextDelta",
    "ThinkingDelta",
    "TokenCounter",
    "ToolCallArgumentsDelta",
    "ToolCallEnded",
    "ToolCallStarted",
    "ToolChoicePolicy",
    "ToolResult",
    "estimate_tokens",
    "one_tool_round",
]
