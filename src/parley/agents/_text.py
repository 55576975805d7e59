"""The text of a message as a tokenizer or a summarizer reads it.

Below `budget` (which counts it) and `compress` (which summarizes with it), so that neither
imports the other for it; `parley.agents.budget.message_text` is the public name.
"""

from __future__ import annotations

import json

from parley.messages import Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock

__all__ = ["message_text"]


def message_text(msg: Msg) -> str:
    """The text of a message that a tokenizer sees: text, reasoning, calls and results."""
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            parts.append(block.thinking)
        elif isinstance(block, ToolCallBlock):
            arguments = block.raw_input or json.dumps(block.input, ensure_ascii=False)
            parts.append(f"{block.name}({arguments})")
        elif isinstance(block, ToolResultBlock):
            parts.append(block.text)
    return "\n".join(parts)
