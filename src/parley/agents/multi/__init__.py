"""Several agents together: a router, group chats, and a hub where agents hear each other.

- `Router`: a model picks which agent answers each input (structured output over the
  agents' names and descriptions), falling back to a default agent;
- `GroupChat`: participants take turns (round robin, random, manual or auto selection;
  `@name` mentions), a `HumanParticipant`'s turn pauses the chat until `resume(...)`;
- `MsgHub` (AgentScope's): inside `async with`, each agent's answer is observed by the
  others, and each agent's model reads the others' turns folded into named user messages
  (`parley.agents.multi.formatting`).
"""

from parley.agents.multi.events import (
    ChatEnded,
    ChatMessage,
    ChatPaused,
    EndReason,
    GroupChatEvent,
    GroupChatEventAdapter,
    Routed,
    RouterEvent,
    RouterEventAdapter,
    SelectionMethod,
    SpeakerSelected,
)
from parley.agents.multi.formatting import (
    FoldingModel,
    multi_agent_model,
    observable,
    use_multi_agent_formatting,
)
from parley.agents.multi.group import ChatStatus, GroupChat, GroupChatResult, StopCondition
from parley.agents.multi.hub import Announcement, MsgHub
from parley.agents.multi.human import HumanParticipant, Participant
from parley.agents.multi.router import RouteDecision, Router, RouterRun
from parley.agents.multi.selection import ChatParticipant, ManualSelector, Selection
from parley.models.formatter import HistoryLayout

__all__ = [
    "Announcement",
    "ChatEnded",
    "ChatMessage",
    "ChatParticipant",
    "ChatPaused",
    "ChatStatus",
    "EndReason",
    "FoldingModel",
    "GroupChat",
    "GroupChatEvent",
    "GroupChatEventAdapter",
    "GroupChatResult",
    "HistoryLayout",
    "HumanParticipant",
    "ManualSelector",
    "MsgHub",
    "Participant",
    "RouteDecision",
    "Routed",
    "Router",
    "RouterEvent",
    "RouterEventAdapter",
    "RouterRun",
    "Selection",
    "SelectionMethod",
    "SpeakerSelected",
    "StopCondition",
    "multi_agent_model",
    "observable",
    "use_multi_agent_formatting",
]
