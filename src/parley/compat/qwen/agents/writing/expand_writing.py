"""Qwen-Agent's `ExpandWriting`: writes one section of an outlined article."""

# The Chinese prompts use Chinese punctuation (full-width commas and colons).
# ruff: noqa: RUF001

from __future__ import annotations

from typing import Any, ClassVar

from parley.compat.qwen.agents.writing._base import PromptedWriting

__all__ = ["ExpandWriting"]

_STOP_AT = {"en": " Stop before you reach: {}", "zh": "写到 {} 之前停下。"}


class ExpandWriting(PromptedWriting):
    """Writes section `index` (`capture`) of `outline` for the last message's title.

    Run keywords: `knowledge`, `outline`, `index`, `capture` (the section's heading),
    `capture_later` (the next section's heading, where to stop), `lang`.
    """

    PROMPTS: ClassVar[dict[str, str]] = {
        "en": """You are a writer. Using the reference material and the outline below,
write section {index} of the article with the given title: {capture}

# Reference material
{ref_doc}

# Outline
{outline}

The title: {user_request}
""",
        "zh": """你是一位作家。请参考下面的资料和提纲，
为给定标题的文章写出第 {index} 部分：{capture}

# 参考资料
{ref_doc}

# 提纲
{outline}

标题：{user_request}
""",
    }

    def _prompt(self, lang: str, request: str, knowledge: str, **kwargs: Any) -> str:
        later = kwargs.pop("capture_later", "")
        prompt = super()._prompt(
            lang,
            request,
            knowledge,
            outline=kwargs.get("outline", ""),
            index=kwargs.get("index", "1"),
            capture=kwargs.get("capture", ""),
        )
        return prompt + _STOP_AT[lang].format(later) if later else prompt
