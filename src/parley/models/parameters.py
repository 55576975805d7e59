"""Generation parameters: a pydantic class per provider, checked before any request."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from parley.errors import UserError

__all__ = ["Parameters", "ParametersBase"]


class ParametersBase(BaseModel):
    """Checked request parameters: chat (`Parameters`) and embedding ones build on it.

    A field left `None` is not sent, so the provider's default applies. Unknown names are
    refused, so a typo never silently does nothing.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def merged(self, **overrides: Any) -> Self:
        """A copy with `overrides` applied and validated.

        Raises:
            UserError: An override names no parameter of this provider, or has a bad value.
        """
        if not overrides:
            return self
        unknown = sorted(set(overrides) - set(type(self).model_fields))
        if unknown:
            raise UserError(
                f"unknown parameter {unknown[0]!r} for {type(self).__qualname__}; known: "
                + ", ".join(sorted(type(self).model_fields))
            )
        try:
            return type(self).model_validate({**self.model_dump(exclude_none=True), **overrides})
        except ValidationError as exc:
            raise UserError(f"bad parameter value: {exc}") from None

    def to_kwargs(self) -> dict[str, Any]:
        """The parameters that are set, as keyword arguments for a request."""
        return self.model_dump(exclude_none=True)


class Parameters(ParametersBase):
    """Parameters every chat API takes; providers subclass it to add their own."""

    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(default=None, ge=1, description="Most tokens to generate.")
    stop: list[str] | None = Field(default=None, description="Sequences that end the output.")
    seed: int | None = Field(default=None, description="Seed for repeatable sampling.")
    parallel_tool_calls: bool | None = Field(
        default=None, description="Whether the model may call several tools at once."
    )
