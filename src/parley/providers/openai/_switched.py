"""What DeepSeek's and Moonshot's presets share: thinking switched by `thinking: {"type": ...}`.

Both stream reasoning as `reasoning_content` and refuse a history whose tool-calling
assistant turns lack it, so it is sent back; both take `max_tokens` (not
`max_completion_tokens`) and OpenAI's penalties, and neither constrains JSON output to a
schema (no `native` structured strategy).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from parley.models.parameters import Parameters
from parley.providers.openai.chat import OpenAIChatModel

__all__ = ["SwitchedThinkingChatModel", "SwitchedThinkingParameters"]


class SwitchedThinkingParameters(Parameters):
    """The parameters of an API whose thinking is switched by `thinking: {"type": ...}`."""

    enable_thinking: bool | None = Field(default=None, description="Think before answering.")
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)


class SwitchedThinkingChatModel(OpenAIChatModel):
    """An OpenAI-compatible model whose thinking is switched by `thinking: {"type": ...}`."""

    max_tokens_field: ClassVar[str] = "max_tokens"
    send_thinking: ClassVar[bool] = True
    thinking_off: ClassVar[dict[str, Any]] = {"enable_thinking": False}
    structured_strategies: ClassVar[tuple[str, ...]] = ("forced", "thinking_off", "auto", "text")

    def wire_parameters(self, parameters: Parameters, *, tools: bool) -> dict[str, Any]:
        """The request fields, `enable_thinking` as `thinking: {"type": ...}`."""
        fields = super().wire_parameters(parameters, tools=tools)
        enabled = fields.pop("enable_thinking", None)
        if enabled is not None:
            fields["thinking"] = {"type": "enabled" if enabled else "disabled"}
        return fields
