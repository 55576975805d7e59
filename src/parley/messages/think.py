"""Reasoning written inline as `<think>...</think>` text, split into thinking blocks.

Reasoning models (QwQ, Qwen3, DeepSeek-R1 served as plain text) write their reasoning into
the text between `<think>` and `</think>`; AgentScope's frameworks read it into a thinking
block (seed 004: "reasoning models output thinking content wrapped in `<think>` tags; the
framework automatically parses it into a ThinkingBlock"). Some chat templates open the span
in the prompt, so the text holds only the closing tag: what comes before it is reasoning too.
"""

from __future__ import annotations

import re

from parley.messages.blocks import TextBlock, ThinkingBlock

__all__ = ["has_think_tags", "split_think"]

_OPEN = "<think>"
_CLOSE = "</think>"
_SPAN = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def has_think_tags(text: str) -> bool:
    """Whether `text` holds a `<think>` or `</think>` tag."""
    return _OPEN in text or _CLOSE in text


def split_think(text: str) -> list[TextBlock | ThinkingBlock]:
    """The text's `<think>` spans as thinking blocks and the rest as text blocks, in order.

    A text without tags is one text block, unchanged. A `</think>` with no opening tag makes
    what precedes it reasoning; a `<think>` never closed (a cut-off answer) runs to the end.
    Whitespace around each piece is trimmed and empty pieces are left out.
    """
    if not has_think_tags(text):
        return [TextBlock(text=text)]
    blocks: list[TextBlock | ThinkingBlock] = []
    head, closes, rest = text.partition(_CLOSE)
    if closes and _OPEN not in head:
        _add(blocks, ThinkingBlock, head)
        text = rest
    position = 0
    for span in _SPAN.finditer(text):
        _add(blocks, TextBlock, text[position : span.start()])
        _add(blocks, ThinkingBlock, span.group(1))
        position = span.end()
    _add(blocks, TextBlock, text[position:].replace(_CLOSE, ""))
    return blocks


def _add(
    blocks: list[TextBlock | ThinkingBlock],
    kind: type[TextBlock] | type[ThinkingBlock],
    piece: str,
) -> None:
    piece = piece.strip()
    if not piece:
        return
    blocks.append(TextBlock(text=piece) if kind is TextBlock else ThinkingBlock(thinking=piece))
