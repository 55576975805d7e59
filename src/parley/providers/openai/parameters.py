"""Generation parameters of OpenAI's two APIs (Chat Completions and Responses)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from parley.models.parameters import Parameters

__all__ = ["OpenAIParameters", "OpenAIResponsesParameters", "ReasoningEffort"]

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
"""How hard a reasoning model thinks; which values a model takes is on its card."""


class _OpenAIShared(Parameters):
    """What both OpenAI APIs take beyond the common parameters."""

    reasoning_effort: ReasoningEffort | None = Field(
        default=None, description="Reasoning models: how much to think before answering."
    )
    verbosity: Literal["low", "medium", "high"] | None = Field(
        default=None, description="GPT-5 family: how long the answer should be."
    )
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = Field(
        default=None, description="The processing tier to serve the request."
    )


class OpenAIParameters(_OpenAIShared):
    """Chat Completions parameters.

    `max_tokens` is sent as `max_completion_tokens`: OpenAI deprecated `max_tokens`, and its
    reasoning models refuse it.
    """

    frequency_penalty: float | None = Field(
        default=None, ge=-2, le=2, description="Penalize tokens by how often they appeared."
    )
    presence_penalty: float | None = Field(
        default=None, ge=-2, le=2, description="Penalize tokens that appeared at all."
    )
    logprobs: bool | None = Field(default=None, description="Return the output's log probs.")
    top_logprobs: int | None = Field(
        default=None, ge=0, le=20, description="Alternatives per token, with `logprobs`."
    )
    logit_bias: dict[str, int] | None = Field(
        default=None, description="Token id to a bias from -100 to 100."
    )


class OpenAIResponsesParameters(_OpenAIShared):
    """Responses API parameters.

    The Responses API has no stop sequences and no seed, so those two are refused here (and
    left out of the parameter form); `max_tokens` is sent as `max_output_tokens`.
    """

    stop: SkipJsonSchema[None] = None
    seed: SkipJsonSchema[None] = None
    reasoning_summary: Literal["auto", "concise", "detailed"] | None = Field(
        default=None, description="Reasoning models: return a summary of the reasoning."
    )
    store: bool | None = Field(
        default=None, description="Whether OpenAI keeps the response (its default: yes)."
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_what_the_api_lacks(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in ("stop", "seed"):
                if data.get(name) is not None:
                    raise ValueError(
                        f"the Responses API takes no `{name}`; OpenAIChatModel (Chat "
                        "Completions) does"
                    )
        return data
