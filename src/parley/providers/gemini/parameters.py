"""Generation parameters of the Gemini API (`generationConfig` and its neighbours)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from parley.models.parameters import Parameters

__all__ = ["GeminiParameters", "ThinkingLevel"]

ThinkingLevel = Literal["minimal", "low", "medium", "high"]
"""Gemini 3 models: how much to think; which levels a model takes is on its card."""


class GeminiParameters(Parameters):
    """Gemini parameters: the common ones, sampling extras, thinking, safety and caching.

    Wire names (Gemini API reference, `GenerationConfig`): `max_tokens` is sent as
    `maxOutputTokens`, `stop` as `stopSequences`; `thinking_budget`, `include_thoughts` and
    `thinking_level` make `thinkingConfig`. Gemini 2.5 models take a budget (0 switches
    thinking off on Flash, -1 lets the model choose), Gemini 3 models a level.
    `parallel_tool_calls` has no Gemini equivalent: the models call tools in parallel when
    they see fit, and the field is not sent.
    """

    top_k: int | None = Field(default=None, ge=1, description="Sample from the k likeliest.")
    presence_penalty: float | None = Field(
        default=None, ge=-2, lt=2, description="Penalize tokens that appeared at all."
    )
    frequency_penalty: float | None = Field(
        default=None, ge=-2, lt=2, description="Penalize tokens by how often they appeared."
    )
    thinking_budget: int | None = Field(
        default=None,
        ge=-1,
        description="Gemini 2.5: tokens to think with (0: no thinking, -1: dynamic).",
    )
    include_thoughts: bool | None = Field(
        default=None, description="Return summaries of the model's thoughts."
    )
    thinking_level: ThinkingLevel | None = Field(
        default=None, description="Gemini 3: how much to think before answering."
    )
    response_mime_type: str | None = Field(
        default=None,
        description="The answer's MIME type: application/json for JSON mode, text/x.enum.",
    )
    media_resolution: Literal["low", "medium", "high"] | None = Field(
        default=None, description="How finely images and video frames are tokenized."
    )
    safety_settings: list[dict[str, str]] | None = Field(
        default=None,
        description="Safety thresholds: [{category: HARM_CATEGORY_..., threshold: BLOCK_...}].",
    )
    cached_content: str | None = Field(
        default=None, description="A context cache to answer from (cachedContents/...)."
    )
    labels: dict[str, str] | None = Field(
        default=None, description="Vertex AI: billing labels for the request."
    )

    def generation_config(self) -> dict[str, Any]:
        """The `generationConfig` fields for the parameters that are set."""
        set_ = self.to_kwargs()
        config: dict[str, Any] = {}
        for name, wire in _GENERATION_FIELDS.items():
            if name in set_:
                config[wire] = set_[name]
        if "media_resolution" in set_:
            config["mediaResolution"] = "MEDIA_RESOLUTION_" + set_["media_resolution"].upper()
        thinking = {wire: set_[name] for name, wire in _THINKING_FIELDS.items() if name in set_}
        if "thinkingLevel" in thinking:
            thinking["thinkingLevel"] = thinking["thinkingLevel"].upper()
        if thinking:
            config["thinkingConfig"] = thinking
        return config

    def request_fields(self) -> dict[str, Any]:
        """The top-level request fields (beside `generationConfig`) that are set."""
        set_ = self.to_kwargs()
        return {wire: set_[name] for name, wire in _REQUEST_FIELDS.items() if name in set_}


_GENERATION_FIELDS = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_tokens": "maxOutputTokens",
    "stop": "stopSequences",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "response_mime_type": "responseMimeType",
}
_THINKING_FIELDS = {
    "thinking_budget": "thinkingBudget",
    "include_thoughts": "includeThoughts",
    "thinking_level": "thinkingLevel",
}
_REQUEST_FIELDS = {
    "safety_settings": "safetySettings",
    "cached_content": "cachedContent",
    "labels": "labels",
}
