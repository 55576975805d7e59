"""AG-UI over a provider that sends a tool call's id after its first fragment.

The agent's model is parley's OpenAI chat model (the official openai SDK) against the local
OpenAI server; the AG-UI stream must show one call, under the provider's id, with all its
arguments (a call announced under a stand-in id first showed as two, one with half the
arguments).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from ag_ui.core import ToolCallArgsEvent, ToolCallEndEvent, ToolCallResultEvent, ToolCallStartEvent

from parley.agents import Agent
from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.server import OpenAIServer, Reply
from tests.models.test_tool_call_ids import late_id_stream
from tests.sample_tools import add
from tests.service.conftest import MakeService
from tests.service.test_agui import of, run, run_input, user

pytestmark = pytest.mark.usefixtures("no_ambient_settings")


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


async def test_a_call_whose_id_comes_late_is_one_agui_tool_call(
    service: MakeService, server: OpenAIServer
) -> None:
    server.add(late_id_stream())
    server.add(Reply(text="It is 4."))
    model = OpenAIChatModel(server.credential(), "gpt-4o-mini")
    try:
        svc = await service(Agent("helper", model, tools=[add]))
        events = await run(svc, run_input("t-late", user("2+2?")))  # checked as a client would
    finally:
        await model.aclose()

    [start] = of(events, ToolCallStartEvent)
    assert (start.tool_call_id, start.tool_call_name) == ("call_late", "add")
    arguments = of(events, ToolCallArgsEvent)
    assert {a.tool_call_id for a in arguments} == {"call_late"}
    assert json.loads("".join(a.delta for a in arguments)) == {"a": 2, "b": 2}
    assert [e.tool_call_id for e in of(events, ToolCallEndEvent)] == ["call_late"]
    [result] = of(events, ToolCallResultEvent)
    assert (result.tool_call_id, result.content) == ("call_late", "4")
    server.assert_consumed()
