"""Seed 001's rules in parley's own messages: tool names, usage sums."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parley.messages import Msg, ToolCallBlock, Usage
from parley.models.accumulator import StreamAccumulator, ToolCallDelta


def test_a_tool_calls_name_is_stripped_and_not_empty() -> None:
    assert ToolCallBlock(id="c", name=" get_weather\n").name == "get_weather"
    for blank in ("", "  "):
        with pytest.raises(ValidationError, match="needs the tool's name"):
            ToolCallBlock(id="c", name=blank)
    with pytest.raises(ValidationError, match="needs the tool's name"):
        Msg.model_validate(
            {"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": ""}]}
        )


def test_a_streams_partial_call_is_exempt_and_its_final_is_checked() -> None:
    accumulator = StreamAccumulator("m")
    chunk = accumulator.add(ToolCallDelta(key=0, id="c", name=" f ", arguments='{"a": '))
    assert chunk is not None
    (partial,) = chunk.content  # a prefix of the arguments: handed out unvalidated
    assert isinstance(partial, ToolCallBlock)
    assert partial.raw_input == '{"a": '
    accumulator.add(ToolCallDelta(key=0, arguments="1}"))
    (final,) = accumulator.final().content
    assert isinstance(final, ToolCallBlock)
    assert (final.name, final.input, final.raw_input) == ("f", {"a": 1}, None)


def test_a_final_call_without_a_name_reaches_the_tool_layer() -> None:
    # A provider that sent no name: no MessageError mid-stream; the toolkit answers the model.
    accumulator = StreamAccumulator("m")
    accumulator.add(ToolCallDelta(key=0, id="c", arguments="{}"))
    (final,) = accumulator.final().content
    assert isinstance(final, ToolCallBlock)
    assert final.name == ""


def test_usage_sum_that_spent_nothing_costs_zero() -> None:
    assert (Usage() + Usage()).cost == 0
    assert sum([Usage(), Usage()], Usage()).cost == 0
    priced = Usage(input_tokens=1, cost=0.25)
    assert (priced + Usage()).cost == 0.25
    # Unpriced calls that used tokens: the cost is unknown, not 0.
    assert (Usage(input_tokens=2) + Usage(output_tokens=1)).cost is None


def test_the_tool_name_rule_is_in_the_schema_not_a_python_validator() -> None:
    # Checked in pydantic-core (a tool call is built or parsed for every call a model makes),
    # and published: the JSON schema says a name is not empty.
    assert not ToolCallBlock.__pydantic_decorators__.field_validators
    assert ToolCallBlock.model_json_schema()["properties"]["name"]["minLength"] == 1
    with pytest.raises(ValidationError, match="needs the tool's name"):
        ToolCallBlock.model_validate_json('{"type": "tool_call", "id": "c", "name": " \\t"}')
    with pytest.raises(ValidationError, match="needs the tool's name"):
        ToolCallBlock(id="c", name=None)  # type: ignore[arg-type]
