"""Generation parameters of DashScope's native API (the request's `parameters` object)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from parley.models.parameters import Parameters

__all__ = ["DashScopeChatParameters"]


class DashScopeChatParameters(Parameters):
    """What the native text-generation and multimodal-generation APIs take.

    Every field that is set goes into the request's `parameters` under its own name;
    `extra_parameters` adds any other (a new API field, a model's own knob) as given.
    `stop`, `seed` and `max_tokens` keep their names on this API. (A JSON schema for the
    answer goes through `generate_structured_output`, which sends `response_format`.)
    """

    enable_thinking: bool | None = Field(
        default=None, description="Hybrid models (Qwen3, qwen-plus...): think before answering."
    )
    thinking_budget: int | None = Field(
        default=None, ge=1, description="The most tokens the thinking may take."
    )
    incremental_output: bool | None = Field(
        default=None,
        description="Streams: send each chunk's new text only (parley's default, and the only "
        "mode thinking supports); false makes DashScope repeat the whole text in every chunk.",
    )
    top_k: int | None = Field(default=None, ge=1, description="Sample from the k likeliest tokens.")
    repetition_penalty: float | None = Field(
        default=None, gt=0, description="Penalize repetition; 1.0 is none."
    )
    presence_penalty: float | None = Field(
        default=None, ge=-2, le=2, description="Penalize tokens that appeared at all."
    )
    enable_search: bool | None = Field(default=None, description="Search the web first.")
    search_options: dict[str, Any] | None = Field(
        default=None, description="How to search (with `enable_search`)."
    )
    vl_high_resolution_images: bool | None = Field(
        default=None, description="Qwen-VL: read images at their full resolution."
    )
    json_object: bool | None = Field(
        default=None,
        description='JSON mode, sent as `response_format: {"type": "json_object"}` (the '
        'prompt must say "JSON").',
    )
    extra_parameters: dict[str, Any] | None = Field(
        default=None, description="Other fields for the request's `parameters`, sent as given."
    )
