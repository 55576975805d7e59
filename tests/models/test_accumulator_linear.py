"""The accumulator's work is linear in the stream: pieces are kept and joined once at the end.

A piece is never added to what came before it (a copy of the whole so far at every delta, so
quadratic in a long stream): each test feeds pieces that count the concatenations made with
them, and checks the final block holds the whole.
"""

from __future__ import annotations

from typing import Any

from parley.messages import ThinkingBlock
from parley.models import StreamAccumulator
from parley.models.accumulator import ThinkingDelta


class _Piece(str):
    """A piece of a string that counts the times it is concatenated to another string."""

    added = 0

    def __radd__(self, other: Any) -> str:
        _Piece.added += 1
        return str(other) + str(self)


def test_a_signature_sent_in_pieces_is_joined_once() -> None:
    accumulator = StreamAccumulator("m")
    _Piece.added = 0
    for index in range(200):
        accumulator.add(ThinkingDelta(f"step {index}. ", signature=_Piece(f"s{index}|")))
    (block,) = accumulator.final().content
    assert isinstance(block, ThinkingBlock)
    assert block.signature == "".join(f"s{index}|" for index in range(200))
    assert block.thinking == "".join(f"step {index}. " for index in range(200))
    assert _Piece.added == 0


def test_an_empty_signature_is_kept_and_none_stays_none() -> None:
    accumulator = StreamAccumulator("m")
    accumulator.add(ThinkingDelta("a", signature=""))
    (block,) = accumulator.final().content
    assert isinstance(block, ThinkingBlock)
    assert block.signature == ""
    accumulator = StreamAccumulator("m")
    accumulator.add(ThinkingDelta("a"))
    (block,) = accumulator.final().content
    assert isinstance(block, ThinkingBlock)
    assert block.signature is None


def test_provider_fields_are_merged_as_they_come_later_keys_winning() -> None:
    accumulator = StreamAccumulator("m")
    first = {"id": "r1", "summary": ["a"]}
    accumulator.add(ThinkingDelta("a", extra=first))
    accumulator.add(ThinkingDelta("b", extra={"summary": ["a", "b"], "encrypted": "x"}))
    (block,) = accumulator.final().content
    assert isinstance(block, ThinkingBlock)
    assert block.extra == {"id": "r1", "summary": ["a", "b"], "encrypted": "x"}
    assert first == {"id": "r1", "summary": ["a"]}  # the provider's dict is not changed
