"""Qwen-Agent's agents (`qwen_agent.agents`), under the names and module paths Qwen-Agent uses.

`from qwen_agent.agents import Assistant` becomes `from parley.compat.qwen.agents import
Assistant`; each agent lives in the module of Qwen-Agent's name (`fncall_agent`,
`assistant`, ...), built on parley's agent loop, retrieval and multi-agent parts.
"""

from parley.compat.qwen.agent import Agent, BasicAgent
from parley.compat.qwen.agents.article_agent import ArticleAgent
from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.dialogue_retrieval_agent import DialogueRetrievalAgent
from parley.compat.qwen.agents.dialogue_simulator import DialogueSimulator
from parley.compat.qwen.agents.doc_qa import BasicDocQA as DocQAAgent
from parley.compat.qwen.agents.doc_qa import ParallelDocQA
from parley.compat.qwen.agents.fncall_agent import (
    MAX_LLM_CALL_PER_RUN,
    FnCallAgent,
    FunctionListEntry,
    QwenResponse,
)
from parley.compat.qwen.agents.group_chat import GroupChat
from parley.compat.qwen.agents.group_chat_auto_router import GroupChatAutoRouter
from parley.compat.qwen.agents.group_chat_creator import GroupChatCreator
from parley.compat.qwen.agents.human_simulator import HumanSimulator
from parley.compat.qwen.agents.react_chat import ReActChat
from parley.compat.qwen.agents.router import Router
from parley.compat.qwen.agents.tir_agent import TIRMathAgent
from parley.compat.qwen.agents.user_agent import UserAgent
from parley.compat.qwen.agents.virtual_memory_agent import VirtualMemoryAgent
from parley.compat.qwen.agents.write_from_scratch import WriteFromScratch
from parley.compat.qwen.multi_agent_hub import MultiAgentHub

__all__ = [
    "MAX_LLM_CALL_PER_RUN",
    "Agent",
    "ArticleAgent",
    "Assistant",
    "BasicAgent",
    "DialogueRetrievalAgent",
    "DialogueSimulator",
    "DocQAAgent",
    "FnCallAgent",
    "FunctionListEntry",
    "GroupChat",
    "GroupChatAutoRouter",
    "GroupChatCreator",
    "HumanSimulator",
    "MultiAgentHub",
    "ParallelDocQA",
    "QwenResponse",
    "ReActChat",
    "Router",
    "TIRMathAgent",
    "UserAgent",
    "VirtualMemoryAgent",
    "WriteFromScratch",
]
