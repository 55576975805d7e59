"""Qwen-Agent's agents (`qwen_agent.agents`), under the names and module paths Qwen-Agent uses.

`from qwen_agent.agents import Assistant` becomes `from parley.compat.qwen.agents import
Assistant`; each agent lives in the module of Qwen-Agent's name (`fncall_agent`,
`assistant`, ...), built on parley's agent loop, retrieval and multi-agent parts.
"""

from parley.compat.qwen.agents.assistant import Assistant
from parley.compat.qwen.agents.dialogue_retrieval_agent import DialogueRetrievalAgent
from parley.compat.qwen.agents.doc_qa import BasicDocQA as DocQAAgent
from parley.compat.qwen.agents.doc_qa import ParallelDocQA
from parley.compat.qwen.agents.fncall_agent import (
    MAX_LLM_CALL_PER_RUN,
    FnCallAgent,
    FunctionListEntry,
    QwenResponse,
)
from parley.compat.qwen.agents.virtual_memory_agent import VirtualMemoryAgent

__all__ = [
    "MAX_LLM_CALL_PER_RUN",
    "Assistant",
    "DialogueRetrievalAgent",
    "DocQAAgent",
    "FnCallAgent",
    "FunctionListEntry",
    "ParallelDocQA",
    "QwenResponse",
    "VirtualMemoryAgent",
]
