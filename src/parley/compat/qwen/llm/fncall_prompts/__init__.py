"""Qwen-Agent's function-calling prompt formats (`qwen_agent.llm.fncall_prompts`).

`nous` (the default: tools as JSON in the system prompt, calls in `<tool_call>` tags) is
parley's own `parley.agents.prompted.NousFormat`; `qwen` (`✿FUNCTION✿` / `✿ARGS✿` lines) is
`QwenFormat`. Either is given to `PromptedToolsModel`, which puts the tools in the prompt and
reads the calls back out of the model's text.
"""

from parley.agents.prompted import NousFormat
from parley.compat.qwen.llm.fncall_prompts.qwen_fncall_prompt import (
    FN_ARGS,
    FN_EXIT,
    FN_NAME,
    FN_RESULT,
    FN_STOP_WORDS,
    QwenFormat,
)

__all__ = [
    "FN_ARGS",
    "FN_EXIT",
    "FN_NAME",
    "FN_RESULT",
    "FN_STOP_WORDS",
    "NousFormat",
    "QwenFormat",
]
