"""Qwen-Agent's `ContinueWriting`: goes on with a text, drawing on reference material."""

# The Chinese prompts use Chinese punctuation (full-width commas and colons).
# ruff: noqa: RUF001

from __future__ import annotations

from typing import ClassVar

from parley.compat.qwen.agents.writing._base import PromptedWriting

__all__ = ["ContinueWriting"]


class ContinueWriting(PromptedWriting):
    """Continues the last message's text (`knowledge=`: the material)."""

    PROMPTS: ClassVar[dict[str, str]] = {
        "en": """You are a writer. Using the reference material below, continue the text
that follows, in its style, from where it stops.

# Reference material
{ref_doc}

# The text so far
{user_request}
""",
        "zh": """你是一位作家。请参考下面的资料，按原文风格从结尾处续写下面的文字。

# 参考资料
{ref_doc}

# 已有文字
{user_request}
""",
    }
