"""Qwen-Agent's message schema under its module path (`qwen_agent.llm.schema`).

The same objects as `parley.compat.qwen.schema`; see there for the mapping and the few
deliberate differences.
"""

from parley.compat.qwen.schema import *  # noqa: F403
from parley.compat.qwen.schema import __all__ as __all__  # noqa: PLC0414
