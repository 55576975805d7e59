"""Qwen-Agent's writing agents (`qwen_agent.agents.writing`): one model call each.

The last user message (the title, or the text to go on from) is wrapped in a writing prompt
with the reference material (`knowledge=`).
"""

from parley.compat.qwen.agents.writing.continue_writing import ContinueWriting
from parley.compat.qwen.agents.writing.expand_writing import ExpandWriting
from parley.compat.qwen.agents.writing.outline_writing import OutlineWriting

__all__ = ["ContinueWriting", "ExpandWriting", "OutlineWriting"]
