"""Token and time accounting for a model call, adding up across calls."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from parley.messages._base import DictLikeModel

__all__ = ["Usage"]


class Usage(DictLikeModel):
    """What a model call cost.

    Tokens in and out, tokens served from cache, seconds taken, and money (`cost`, in the
    model card's currency) when the model's price is known. `input_tokens` is the whole
    prompt; `cached_tokens` (read from the provider's prompt cache) and `cache_write_tokens`
    (written to it, which Anthropic bills above input) are parts of it.
    Usages add up: `total = first + second`, and `sum(usages, Usage())`. A `cost` of None
    means unknown; added to a known one it counts as nothing (seed 001's rule), so a run's
    cost is what its priced calls cost. A sum that spent no tokens costs 0, as seed 001 says
    (`(Usage() + Usage()).cost == 0`): nothing used is nothing paid, priced or not. Only a
    sum of unpriced calls that did use tokens keeps the unknown (None).
    """

    model_config = ConfigDict(extra="forbid")
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(
        default=0,
        ge=0,
        # Left out of dumps while zero: only Anthropic reports it, and every other usage
        # (stored threads, the service's events, the golden files) reads as before.
        exclude_if=lambda count: count == 0,
        description="Input tokens written to the provider's prompt cache.",
    )
    elapsed: float = Field(default=0.0, ge=0, description="Seconds the call took.")
    cost: float | None = Field(
        default=None, ge=0, description="What the call cost (None: the price is unknown)."
    )

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            elapsed=self.elapsed + other.elapsed,
            cost=_sum_cost(self, other),
        )

    def __radd__(self, other: int) -> Usage:
        # `sum()` starts from 0.
        if other == 0:
            return self
        return NotImplemented


def _sum_cost(first: Usage, second: Usage) -> float | None:
    if first.cost is None and second.cost is None and (first.total_tokens or second.total_tokens):
        return None  # calls were made and none was priced: the cost is unknown, not 0
    return (first.cost or 0.0) + (second.cost or 0.0)
