"""Seed 001's rules for the Qwen-Agent schema: validators, content default, usage sums."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parley.compat.qwen import FunctionCall, Message, Usage
from parley.compat.qwen.convert import from_msgs, to_msgs
from parley.messages import Msg, ToolCallBlock


def test_a_function_message_must_have_a_name() -> None:
    with pytest.raises(ValidationError, match="function message must have a name"):
        Message("function", "25 degrees")
    with pytest.raises(ValidationError, match="function message must have a name"):
        Message.model_validate({"role": "function", "content": "x", "name": ""})
    assert Message("function", "25 degrees", name="get_weather").name == "get_weather"


def test_a_function_name_is_stripped_and_not_empty() -> None:
    assert FunctionCall("  get_weather ", "{}").name == "get_weather"
    for blank in ("", "   "):
        with pytest.raises(ValidationError, match="needs the function's name"):
            FunctionCall(blank, "{}")


def test_complete_arguments_must_be_json() -> None:
    assert FunctionCall("f", '{"city": "Tokyo"}').arguments == '{"city": "Tokyo"}'
    with pytest.raises(ValidationError, match="must be a JSON string"):
        FunctionCall("f", '{"city": ')
    with pytest.raises(ValidationError, match="must be a JSON string"):
        Message.model_validate(
            {"role": "assistant", "function_call": {"name": "f", "arguments": "not json"}}
        )


def test_streaming_partials_are_exempt() -> None:
    partial = FunctionCall.partial("f", '{"city": "To')
    assert partial.arguments == '{"city": "To'
    message = Message("assistant", "", function_call=partial)  # a response in progress
    assert message.function_call is partial
    with pytest.raises(Exception, match="strings"):
        FunctionCall.partial("f", {"a": 1})  # type: ignore[arg-type]


def test_parleys_conversion_of_a_models_malformed_call_is_exempt() -> None:
    # A model wrote arguments that are not JSON: parley keeps them (raw_input) and converts.
    msg = Msg.assistant(ToolCallBlock(id="c1", name="f", raw_input='{"a": '))
    (message,) = from_msgs([msg])
    assert message.function_call is not None
    assert message.function_call.arguments == '{"a": '


def test_content_defaults_to_empty() -> None:
    assert Message(role="assistant").content == ""
    assert Message("user").content == ""
    assert Message.model_validate({"role": "system"}).model_dump() == {
        "role": "system",
        "content": "",
    }
    assert to_msgs([Message("user")])[0].content == []


def test_usage_sums_cost_zero_as_seed_001() -> None:
    assert (Usage() + Usage()).cost == 0
    assert (Usage(total_tokens=3) + Usage(total_tokens=4)).cost == 0
    assert (Usage(cost=0.5) + Usage()).cost == 0.5
    assert sum([Usage(), Usage()], Usage()).cost == 0
