"""Model cards: what a model accepts and produces, its limits, and its parameter form.

Cards are YAML files in a `_models/` folder beside each provider's chat model, one model per
file. A card's `parameter_schema` is the provider's `Parameters` JSON schema with the card's
`parameter_overrides` merged on top, field by field: `{...}` shallow-merges into the field,
`{hidden: true}` hides it from forms, `null` removes it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from parley.errors import ConfigurationError
from parley.messages.usage import Usage

__all__ = [
    "EMBEDDING",
    "EmbeddingModelCard",
    "ModelCard",
    "Pricing",
    "PromptTier",
    "TTSModelCard",
    "load_cards",
    "merge_parameter_schema",
]

THINKING = "application/x-thinking"
"""The output type of a model that reasons before it answers."""

EMBEDDING = "application/x-embedding"
"""The output type of a model that turns its input into a dense vector."""


class _Rates(BaseModel):
    """A set of prices per million tokens, and what a call's tokens cost at them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="Per million input tokens.")
    output: float = Field(ge=0, description="Per million output tokens.")
    cached_input: float | None = Field(
        default=None, ge=0, description="Per million input tokens read from the prompt cache."
    )
    cache_write: float | None = Field(
        default=None, ge=0, description="Per million input tokens written to the prompt cache."
    )

    def _price(
        self, input_tokens: int, output_tokens: int, cached_tokens: int, cache_write_tokens: int
    ) -> float:
        # Cache reads and writes are parts of the input tokens: each token is priced once.
        cached = min(cached_tokens, input_tokens) if self.cached_input is not None else 0
        written = (
            min(cache_write_tokens, input_tokens - cached) if self.cache_write is not None else 0
        )
        return (
            (input_tokens - cached - written) * self.input
            + cached * (self.cached_input or 0.0)
            + written * (self.cache_write or 0.0)
            + output_tokens * self.output
        ) / 1_000_000


class PromptTier(_Rates):
    """The prices of a call whose prompt is longer than `above` tokens.

    They replace the base prices for every token of that call, output included (Claude
    Haiku 5.5 costs five times as much for a prompt over 100,000 tokens). The prompt is the
    call's `input_tokens`: cache reads and writes count.
    """

    above: int = Field(ge=1, description="Prompts longer than this many tokens cost these.")


class Pricing(_Rates):
    """What a model's tokens cost, per million, in `currency` (list prices, as of `as_of`).

    `cached_input` prices the input tokens served from the provider's prompt cache and
    `cache_write` those written to it (Anthropic bills a write above input: 1.25 times for
    its 5-minute cache, which the Claude cards give, and 2 times for the 1-hour one, which
    parley prices at the same `cache_write`). Both are parts of the input tokens, as
    parley's usage counts them; without their price they cost as input. `long_prompt`
    prices a long prompt differently, when the model does. `usage_cost(usage)` turns a
    call's usage into money.
    """

    currency: str = "USD"
    as_of: str | None = Field(default=None, description="When the price was read (YYYY-MM).")
    long_prompt: PromptTier | None = Field(
        default=None, description="Other prices for a prompt over a length."
    )

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float:
        """The price of a call's tokens."""
        tier = self.long_prompt
        rates: _Rates = tier if tier is not None and input_tokens > tier.above else self
        return rates._price(input_tokens, output_tokens, cached_tokens, cache_write_tokens)

    def usage_cost(self, usage: Usage) -> float:
        """The price of the tokens a call's usage counts."""
        return self.cost(
            usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.cache_write_tokens
        )


class ModelCard(BaseModel):
    """A declarative description of one model, for pickers and parameter forms."""

    model_config = ConfigDict(extra="forbid")

    name: str
    label: str = ""
    status: Literal["active", "deprecated", "sunset"] = "active"
    input_types: list[str] = Field(default_factory=lambda: ["text/plain"])
    output_types: list[str] = Field(default_factory=lambda: ["text/plain"])
    context_size: int | None = Field(default=None, ge=1)
    output_size: int | None = Field(default=None, ge=1)
    parameter_overrides: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    parameter_schema: dict[str, Any] = Field(default_factory=dict)
    pricing: Pricing | None = None
    """List prices per million tokens; None where unknown (and for local models: free)."""

    def accepts(self, media_type: str) -> bool:
        """Whether the model takes input of this MIME type (`image/png` matches `image/*`)."""
        return _matches(media_type, self.input_types)

    def produces(self, media_type: str) -> bool:
        """Whether the model can output this MIME type (e.g. `application/x-thinking`)."""
        return _matches(media_type, self.output_types)


class EmbeddingModelCard(ModelCard):
    """A model card for an embedding model: it outputs vectors and has no output limit.

    Its `parameter_schema` comes from the embedding `Parameters` (`dimensions`), with the
    card's overrides pinning the sizes the model supports (`{"dimensions": {"enum": [...],
    "default": ...}}`).
    """

    type: Literal["embedding_model"] = "embedding_model"
    output_types: list[str] = Field(default_factory=lambda: [EMBEDDING])
    output_size: None = Field(default=None, exclude=True)

    def dimension_choices(self) -> list[int]:
        """The output sizes the model supports, as its card pins them (empty: any)."""
        field = self.parameter_schema.get("properties", {}).get("dimensions", {})
        return [int(d) for d in field.get("enum", [])]

    def dimension_range(self) -> tuple[int | None, int | None]:
        """The least and most output sizes, as its card bounds them (None: unbounded).

        For a model that gives any size up to its own (`text-embedding-3-small`: 1 to
        1536), which the card says with `{"minimum": ..., "maximum": ...}` rather than an
        `enum` of every size.
        """
        field = self.parameter_schema.get("properties", {}).get("dimensions", {})
        low, high = field.get("minimum"), field.get("maximum")
        return (
            int(low) if isinstance(low, int) else None,
            int(high) if isinstance(high, int) else None,
        )

    def default_dimensions(self) -> int | None:
        """The output size the model gives when asked for none, as its card says."""
        default = self.parameter_schema.get("properties", {}).get("dimensions", {}).get("default")
        return int(default) if isinstance(default, int) else None


class TTSModelCard(ModelCard):
    """A model card for a text-to-speech model: text in, audio out, and its voices.

    `voices` is injected into the `parameter_schema` as an enum on `voice`, the first voice
    the default, so a form renders a picker.
    """

    type: Literal["tts_model"] = "tts_model"
    realtime: bool = False
    """Whether the model takes its text in pieces (streaming input)."""
    voices: list[str] = Field(default_factory=list)
    custom_voices: bool = False
    """Whether the provider also speaks voices of the user's own (cloned or designed), so a
    voice not listed is passed on rather than refused."""
    output_types: list[str] = Field(default_factory=lambda: ["audio/wav"])
    context_size: None = Field(default=None, exclude=True)
    output_size: None = Field(default=None, exclude=True)

    def finish_schema(self) -> None:
        """Put the voices on the `voice` parameter as an enum, the first the default."""
        field = self.parameter_schema.get("properties", {}).get("voice")
        if field is None or not self.voices:
            return
        field.pop("anyOf", None)
        field.update({"type": "string", "default": self.voices[0]})
        # The listed voices are a form's choices; with custom voices they are suggestions.
        field["examples" if self.custom_voices else "enum"] = list(self.voices)


def _matches(media_type: str, patterns: Iterable[str]) -> bool:
    family = media_type.split("/", 1)[0]
    return any(p in (media_type, f"{family}/*", "*/*") for p in patterns)


def merge_parameter_schema(
    base: dict[str, Any], overrides: dict[str, dict[str, Any] | None]
) -> dict[str, Any]:
    """Merge a card's parameter overrides into the `Parameters` JSON schema.

    Raises:
        ConfigurationError: An override names a parameter the schema does not have.
    """
    schema = copy.deepcopy(base)
    properties: dict[str, Any] = schema.setdefault("properties", {})
    for name, override in overrides.items():
        if name not in properties:
            raise ConfigurationError(
                f"parameter override {name!r} names no parameter; known: {', '.join(properties)}"
            )
        if override is None:
            del properties[name]
            if name in schema.get("required", []):
                schema["required"].remove(name)
            continue
        properties[name] = {**properties[name], **override}
    return schema


def _read_card(
    source: Traversable, base_schema: dict[str, Any], card_class: type[ModelCard]
) -> ModelCard:
    import yaml  # noqa: PLC0415  (cards are read on first use, not at import)

    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
        card = card_class.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigurationError(f"bad model card {source.name}: {exc}") from None
    card.parameter_schema = merge_parameter_schema(base_schema, card.parameter_overrides)
    if isinstance(card, TTSModelCard):
        card.finish_schema()
    return card


def load_cards(
    location: str | Path | Traversable,
    base_schema: dict[str, Any],
    card_class: type[ModelCard] = ModelCard,
) -> list[ModelCard]:
    """Load every `*.yaml` card in a folder, sorted by name.

    Args:
        location: A folder path, or a package name whose `_models/` folder holds the cards.
        base_schema: The provider's `Parameters.model_json_schema()`.
        card_class: What the cards are: `ModelCard`, or `EmbeddingModelCard` for an
            embedding provider's (`parley.embeddings.<provider>/_models/`), `TTSModelCard`
            for a speech provider's (`parley.tts.<provider>/_models/`).
    """
    if isinstance(location, str) and "/" not in location and not Path(location).exists():
        folder: Traversable = resources.files(location) / "_models"
    elif isinstance(location, (str, Path)):
        folder = Path(location)
    else:
        folder = location
    if not folder.is_dir():
        return []
    files = sorted(
        (f for f in folder.iterdir() if f.name.endswith((".yaml", ".yml"))), key=lambda f: f.name
    )
    return sorted((_read_card(f, base_schema, card_class) for f in files), key=lambda c: c.name)
