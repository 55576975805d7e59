"""Errors on spans without content capture: the exception's type, never its text.

A tool's exception quotes its arguments, a provider's error may quote the prompt, and a
traceback holds both; with capture off (the default) none of that reaches a span, through
the OpenTelemetry SDK's in-memory exporter. With capture on, everything is kept.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from parley.agents import Agent
from parley.errors import ModelHTTPError
from parley.models.testing import ScriptedModel
from parley.tools import tool
from tests.sample_tools import add
from tests.tracing.fixtures import Spans

SECRET = "4111-1111-1111-1111"
WITHHELD = "not recorded: content capture is off"


@tool
def charge(card: str) -> str:
    """Charge a card.

    Args:
        card: The card number.
    """
    raise ValueError(f"card {card} was declined")


async def failing_run() -> None:
    """A tool that fails quoting its argument, bad arguments, then a provider error."""
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("charge", {"card": SECRET}, call_id="c1"),
            ScriptedModel.tool_call("add", {"a": SECRET, "b": 1}, call_id="c2"),
            ModelHTTPError(400, message=f"messages[0].content {SECRET!r} is refused"),
        ],
        model="m",
    )
    with pytest.raises(ModelHTTPError):
        await Agent("payer", model, tools=[charge, add]).reply(f"Pay with {SECRET}")


def recorded_text(span: ReadableSpan) -> str:
    """Everything a span records as text: attributes, its events', its status."""
    parts: list[Any] = [span.status.description, *(span.attributes or {}).values()]
    for event in span.events:
        parts += [event.name, *(event.attributes or {}).values()]
    return " ".join(str(p) for p in parts)


async def test_without_capture_no_span_holds_an_error_message_or_traceback(spans: Spans) -> None:
    await failing_run()

    for span in spans.all():
        assert SECRET not in recorded_text(span), span.name
    tool_span = spans.one("execute_tool charge")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description == f"ValueError ({WITHHELD})"
    [event] = tool_span.events
    assert dict(event.attributes or {}) == {
        "exception.type": "ValueError",
        "exception.message": WITHHELD,  # no stack trace either
    }
    bad = spans.one("execute_tool add")
    assert (bad.attributes or {})["error.type"] == "invalid_arguments"
    for name in ("chat m", "invoke_agent payer"):
        failed = spans.named(name)[-1]
        assert failed.status.status_code is StatusCode.ERROR
        assert [e.attributes for e in failed.events] == [
            {"exception.type": "parley.errors.ModelHTTPError", "exception.message": WITHHELD}
        ]


async def test_with_capture_errors_keep_their_message_and_traceback(
    spans: Spans, content: None
) -> None:
    await failing_run()

    tool_span = spans.one("execute_tool charge")
    assert tool_span.status.description == f"charge failed: ValueError: card {SECRET} was declined"
    [event] = tool_span.events
    attributes = dict(event.attributes or {})
    assert attributes["exception.message"] == f"card {SECRET} was declined"
    assert "Traceback" in str(attributes["exception.stacktrace"])
    chat = spans.named("chat m")[-1]
    assert SECRET in str(dict(chat.events[0].attributes or {})["exception.message"])
