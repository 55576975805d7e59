"""Generation parameters of Anthropic's Messages API.

Sources: the `anthropic` SDK's `MessageCreateParams` (SDK 2.x, API version 2026-10-21) and
Anthropic's docs on thinking, effort and prompt caching.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from parley.models.parameters import Parameters

__all__ = ["AnthropicParameters", "Effort", "ThinkingMode"]

ThinkingMode = Literal["adaptive", "enabled", "disabled", "between_tools"]
"""`thinking.type`: the model decides (`adaptive`), a fixed budget (`enabled`), off, or off with
short progress notes between tool calls (`between_tools`). Which a model takes is on its card."""

Effort = Literal["low", "medium", "high", "xhigh", "max"]
"""`output_config.effort`: how much work the model puts into its answer."""

# API version 2026-10-21 (which SDK 2.x sends) answers 400 to any sampling parameter, even at
# its default (Anthropic's API versioning page); nothing takes a seed.
_REMOVED = {
    "temperature": "Anthropic's API removed `temperature` (API version 2026-10-21)",
    "top_p": "Anthropic's API removed `top_p` (API version 2026-10-21)",
    "seed": "Anthropic's API takes no `seed`",
}


class AnthropicParameters(Parameters):
    """Messages API parameters.

    `max_tokens` is required by the API: when it is not set, the model's card gives it (its
    output size). `stop` is sent as `stop_sequences`; `parallel_tool_calls=False` as the tool
    choice's `disable_parallel_tool_use`. `temperature`, `top_p` and `seed` are refused here
    rather than by a 400 from the API, and left out of the parameter form.

    Thinking: `thinking_budget` alone turns on extended thinking with that budget (`thinking:
    {type: enabled, budget_tokens}`, at least 1,024 and below `max_tokens`); `thinking` picks
    another mode. Prompt caching: `cache_system`, `cache_tools` and `cache_messages` put a
    `cache_control` breakpoint on the system prompt's last block, the last tool, and the last
    message's last block (`cache_ttl` its lifetime).
    """

    temperature: SkipJsonSchema[None] = None
    top_p: SkipJsonSchema[None] = None
    seed: SkipJsonSchema[None] = None
    thinking: ThinkingMode | None = Field(
        default=None, description="How the model thinks; its default when not set."
    )
    thinking_budget: int | None = Field(
        default=None, ge=1024, description="Extended thinking: most tokens to think with."
    )
    thinking_display: Literal["summarized", "omitted"] | None = Field(
        default=None, description="Whether thinking text comes back (a signature always does)."
    )
    effort: Effort | None = Field(default=None, description="How much effort to put in.")
    cache_system: bool | None = Field(default=None, description="Cache the system prompt.")
    cache_tools: bool | None = Field(default=None, description="Cache the tool definitions.")
    cache_messages: bool | None = Field(
        default=None, description="Cache the conversation up to its last message."
    )
    cache_ttl: Literal["5m", "1h"] | None = Field(
        default=None, description="How long cached prompt parts live (Anthropic's default: 5m)."
    )
    server_tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="Anthropic's server tools as the API defines them, e.g. "
        '`{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}`.',
    )
    service_tier: Literal["auto", "standard_only"] | None = Field(
        default=None, description="Use priority capacity when available (`auto`)."
    )
    user_id: str | None = Field(
        default=None, description="An opaque id of the end user (`metadata.user_id`)."
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_what_the_api_removed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, reason in _REMOVED.items():
                if data.get(name) is not None:
                    raise ValueError(reason)
        return data

    @model_validator(mode="after")
    def _check_thinking(self) -> Self:
        if self.thinking == "enabled" and self.thinking_budget is None:
            raise ValueError("thinking='enabled' needs a thinking_budget (at least 1024)")
        if self.thinking_budget is not None and self.thinking not in (None, "enabled"):
            raise ValueError(
                f"thinking_budget applies to extended thinking only, not thinking={self.thinking!r}"
            )
        return self
