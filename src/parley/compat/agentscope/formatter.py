"""AgentScope's chat formatters under `agentscope.formatter`'s names, on parley's.

As in AgentScope, `await formatter.format(msgs)` turns AgentScope messages into the
provider's request messages, and a formatter passed as a model's `formatter=` is the one its
requests use. Each wraps the parley formatter of the same provider (`parley_formatter`).
AgentScope's multi-agent formatters are not here: parley's (`parley.models.<provider>`) need
the speaking agent's name, which AgentScope's do not take.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from parley import messages as pm
from parley.compat.agentscope.message import Msg, to_parley
from parley.models.formatter import Formatter
from parley.providers.anthropic import AnthropicChatFormatter as _Anthropic
from parley.providers.gemini import GeminiChatFormatter as _Gemini
from parley.providers.ollama import OllamaChatFormatter as _Ollama
from parley.providers.openai import OpenAIChatFormatter as _OpenAI

__all__ = [
    "AnthropicChatFormatter",
    "DashScopeChatFormatter",
    "FormatterBase",
    "GeminiChatFormatter",
    "OllamaChatFormatter",
    "OpenAIChatFormatter",
]


class FormatterBase:
    """A formatter: AgentScope messages in, the provider's message dicts out.

    Args:
        parley_formatter: The parley formatter doing the work; the class's own by default.
    """

    parley_class: ClassVar[type[Formatter] | None] = None
    parley_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, parley_formatter: Formatter | None = None) -> None:
        if parley_formatter is None:
            if self.parley_class is None:
                raise TypeError("FormatterBase needs a parley formatter to wrap")
            parley_formatter = self.parley_class(**self.parley_kwargs)
        self.parley_formatter = parley_formatter

    async def format(self, msgs: Sequence[Msg | pm.Msg | dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as the provider takes them."""
        return self.parley_formatter.format(to_parley(msgs))


class OpenAIChatFormatter(FormatterBase):
    """OpenAI's Chat Completions messages."""

    parley_class = _OpenAI


class DashScopeChatFormatter(FormatterBase):
    """DashScope's OpenAI-compatible messages."""

    parley_class = _OpenAI


class AnthropicChatFormatter(FormatterBase):
    """Anthropic's Messages API messages."""

    parley_class = _Anthropic


class GeminiChatFormatter(FormatterBase):
    """Gemini's `contents`."""

    parley_class = _Gemini


class OllamaChatFormatter(FormatterBase):
    """Ollama's `/api/chat` messages."""

    parley_class = _Ollama
