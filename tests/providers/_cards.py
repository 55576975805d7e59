"""What every provider's list of chat model cards must hold, for its `test_cards.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parley.models import ModelCard

__all__ = ["assert_cards_load", "card"]


def assert_cards_load(cards: Sequence[ModelCard], names: set[str]) -> None:
    """`cards` are the models named `names`, each with a label, its sizes, text input and the
    parameters it takes."""
    assert {card.name for card in cards} == names
    for card in cards:
        assert card.label, card.name
        assert card.context_size, card.name
        assert card.output_size, card.name
        assert "text/plain" in card.input_types, card.name
        assert card.parameter_schema["properties"], card.name


def card(cls: Any, name: str) -> ModelCard:
    """The card of the model `name` among those `cls` lists."""
    return next(each for each in cls.list_models() if each.name == name)
