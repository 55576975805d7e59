"""Qwen-Agent's `OutlineWriting`: an outline for a title, from reference material.

The outline's top-level headings are Roman numerals (`I. ...`), which `WriteFromScratch`
reads to expand section by section.
"""

# The Chinese prompts use Chinese punctuation (full-width commas and colons).
# ruff: noqa: RUF001

from __future__ import annotations

from typing import ClassVar

from parley.compat.qwen.agents.writing._base import PromptedWriting

__all__ = ["OutlineWriting"]


class OutlineWriting(PromptedWriting):
    """Writes an outline for the last message's title (`knowledge=`: the material)."""

    PROMPTS: ClassVar[dict[str, str]] = {
        "en": """You are a writer. Using the reference material below, draft an outline for
an article with the given title. Number the main sections with Roman numerals (I., II.,
III., ...), each on its own line, with its sub-points under it.

# Reference material
{ref_doc}

The title: {user_request}
""",
        "zh": """你是一位作家。请参考下面的资料，为给定标题的文章拟一份提纲。主要章节用罗马数字编号
（I.、II.、III. ……），每个占一行，下面列出要点。

# 参考资料
{ref_doc}

标题：{user_request}
""",
    }
