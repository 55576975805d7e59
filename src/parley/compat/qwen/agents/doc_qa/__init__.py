"""Qwen-Agent's document question-answering agents (`qwen_agent.agents.doc_qa`).

`BasicDocQA` (exported by `agents` as `DocQAAgent`) answers from the passages retrieved for
the question; `ParallelDocQA` reads every chunk of the documents in parallel first.
"""

from parley.compat.qwen.agents.doc_qa.basic_doc_qa import BasicDocQA
from parley.compat.qwen.agents.doc_qa.parallel_doc_qa import ParallelDocQA

__all__ = ["BasicDocQA", "ParallelDocQA"]
