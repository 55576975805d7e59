"""Spans of agent runs on the scripted model: names, attributes, nesting, errors, content."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from parley.agents import Agent, InMemoryMemory, TextDelta
from parley.errors import RateLimitError
from parley.messages import ToolCallBlock
from parley.models import ChatResponse
from parley.models.cards import Pricing
from parley.models.testing import ScriptedModel
from parley.tools import RunContext, tool
from tests.sample_tools import add
from tests.tracing.fixtures import Spans, attrs, parent_of, span_id


@tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise ValueError(f"boom: {reason}")


def adding_agent(*steps: Any, **kwargs: Any) -> Agent:
    model = ScriptedModel(
        [ScriptedModel.tool_call("add", {"a": 2, "b": 3}, call_id="call_1"), *steps],
        model="scripted-1",
    )
    return Agent("calc", model, "You add numbers.", tools=[add], description="Adds.", **kwargs)


async def test_a_run_traces_the_agent_its_model_calls_and_its_tools(spans: Spans) -> None:
    agent = adding_agent("It is 5.")
    memory = InMemoryMemory()
    memory.thread_id = "thread-7"
    run = agent.stream("What is 2 + 3?", memory=memory)
    async with run:
        async for _ in run:
            pass

    assert spans.names() == [
        "chat scripted-1",
        "execute_tool add",
        "chat scripted-1",
        "invoke_agent calc",
    ]
    root = spans.one("invoke_agent calc")
    first_chat, second_chat = spans.named("chat scripted-1")
    tool_span = spans.one("execute_tool add")
    assert root.parent is None
    assert root.kind is SpanKind.INTERNAL
    for child in (first_chat, second_chat, tool_span):
        assert parent_of(child) == span_id(root)
        assert child.context is not None
        assert root.context is not None
        assert child.context.trace_id == root.context.trace_id

    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.agent.description": "Adds.",
        "gen_ai.conversation.id": "thread-7",
        "gen_ai.request.model": "scripted-1",
        "gen_ai.provider.name": "scripted",
        "parley.run.id": run.run_id,
        "parley.run.status": "completed",
        "parley.run.iterations": 2,
        "gen_ai.usage.input_tokens": run.usage.input_tokens,
        "gen_ai.usage.output_tokens": run.usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": 0,
    }
    assert root.status.status_code is StatusCode.UNSET

    chat = attrs(second_chat)
    assert first_chat.kind is SpanKind.CLIENT
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.provider.name"] == chat["gen_ai.system"] == "scripted"
    assert chat["gen_ai.request.model"] == chat["gen_ai.response.model"] == "scripted-1"
    assert chat["gen_ai.request.stream"] is True
    assert chat["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(first_chat)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat["gen_ai.response.id"] == run.final.metadata["response_id"]  # type: ignore[union-attr]
    assert chat["gen_ai.response.time_to_first_chunk"] >= 0
    assert chat["gen_ai.usage.output_tokens"] == 4  # "It is 5." is 3 words, +1
    assert attrs(first_chat)["gen_ai.usage.input_tokens"] + chat["gen_ai.usage.input_tokens"] == (
        run.usage.input_tokens
    )

    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two numbers.",
    }
    assert tool_span.kind is SpanKind.INTERNAL
    assert tool_span.status.status_code is StatusCode.UNSET


async def test_the_callers_context_is_never_changed_between_events(spans: Spans) -> None:
    agent = adding_agent("It is 5.")
    tracer = spans.provider.get_tracer("test")
    with tracer.start_as_current_span("request") as outer:
        seen = [trace.get_current_span() async for _ in agent.stream("2 + 3?")]
        assert trace.get_current_span() is outer

    assert len(seen) > 5
    assert all(span is outer for span in seen)
    root = spans.one("invoke_agent calc")
    assert parent_of(root) == span_id(spans.one("request"))


async def test_usage_and_cost_add_up_on_the_run(spans: Spans) -> None:
    agent = adding_agent("It is 5.")
    agent.model.pricing = Pricing(input=1_000_000.0, output=2_000_000.0)
    await agent.reply("2 + 3?")

    root = attrs(spans.one("invoke_agent calc"))
    chats = [attrs(s) for s in spans.named("chat scripted-1")]
    assert root["parley.usage.cost"] == pytest.approx(sum(c["parley.usage.cost"] for c in chats))
    expected = root["gen_ai.usage.input_tokens"] + 2 * root["gen_ai.usage.output_tokens"]
    assert root["parley.usage.cost"] == pytest.approx(expected)


async def test_a_tool_that_runs_an_agent_nests_that_agents_span(spans: Spans) -> None:
    helper = Agent("helper", ScriptedModel(["42"], model="inner"))

    @tool
    async def ask_helper(question: str, ctx: RunContext[None]) -> str:
        """Ask the helper.

        Args:
            question: What to ask.
        """
        answer = await helper.reply(question)
        return answer.text

    model = ScriptedModel(
        [ScriptedModel.tool_call("ask_helper", {"question": "?"}, call_id="c1"), "It says 42."],
        model="outer",
    )
    await Agent("boss", model, tools=[ask_helper]).reply("ask")

    boss = spans.one("invoke_agent boss")
    tool_span = spans.one("execute_tool ask_helper")
    inner = spans.one("invoke_agent helper")
    inner_chat = spans.one("chat inner")
    assert parent_of(tool_span) == span_id(boss)
    assert parent_of(inner) == span_id(tool_span)
    assert parent_of(inner_chat) == span_id(inner)
    assert {parent_of(s) for s in spans.named("chat outer")} == {span_id(boss)}


async def test_parallel_tool_calls_are_sibling_spans(spans: Spans) -> None:
    both = ChatResponse(
        content=[
            ToolCallBlock(id="a", name="add", input={"a": 1, "b": 2}),
            ToolCallBlock(id="b", name="add", input={"a": 3, "b": 4}),
        ],
        finish_reason="tool_calls",
    )
    await Agent("calc", ScriptedModel([both, "3 and 7"]), tools=[add]).reply("two sums")

    root = spans.one("invoke_agent calc")
    tools = spans.named("execute_tool add")
    assert sorted(attrs(s)["gen_ai.tool.call.id"] for s in tools) == ["a", "b"]
    assert {parent_of(s) for s in tools} == {span_id(root)}


# -- failures --------------------------------------------------------------------------------------


async def test_a_failed_tool_sets_error_status_and_type(spans: Spans) -> None:
    model = ScriptedModel(
        [
            ScriptedModel.tool_call("explode", {"reason": "test"}, call_id="x1"),
            ScriptedModel.tool_call("missing", {}, call_id="x2"),
            ScriptedModel.tool_call("add", {"a": "not a number"}, call_id="x3"),
            "Sorry.",
        ]
    )
    await Agent("bad", model, tools=[explode, add]).reply("go")

    exploded = spans.one("execute_tool explode")
    assert exploded.status.status_code is StatusCode.ERROR
    assert attrs(exploded)["error.type"] == "ValueError"
    assert [e.name for e in exploded.events] == ["exception"]
    # The message may quote the arguments: kept only with content capture on.
    assert "boom: test" not in (exploded.status.description or "")
    assert attrs(spans.one("execute_tool missing"))["error.type"] == "tool_not_found"
    bad_arguments = spans.one("execute_tool add")
    assert attrs(bad_arguments)["error.type"] == "invalid_arguments"
    assert bad_arguments.status.status_code is StatusCode.ERROR
    # The run itself did not fail: the model read the errors and answered.
    root = spans.one("invoke_agent bad")
    assert root.status.status_code is StatusCode.UNSET
    assert attrs(root)["parley.run.status"] == "completed"


async def test_a_tool_past_its_timeout_is_a_timeout(spans: Spans) -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Takes too long."""
        await asyncio.sleep(5)
        return "late"

    model = ScriptedModel([ScriptedModel.tool_call("slow", {}), "gave up"])
    await Agent("waiter", model, tools=[slow]).reply("go")

    span = spans.one("execute_tool slow")
    assert attrs(span)["error.type"] == "timeout"
    assert span.status.status_code is StatusCode.ERROR


async def test_a_failed_model_call_fails_its_span_and_the_run(spans: Spans) -> None:
    model = ScriptedModel([RateLimitError("slow down", provider="scripted")], model="m")
    run = Agent("talker", model).stream("hi")
    async with run:
        async for _ in run:
            pass

    chat = spans.one("chat m")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["error.type"] == "parley.errors.RateLimitError"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("error",)
    assert [e.name for e in chat.events] == ["exception"]
    root = spans.one("invoke_agent talker")
    assert root.status.status_code is StatusCode.ERROR
    assert attrs(root)["error.type"] == "parley.errors.RateLimitError"
    assert attrs(root)["parley.run.status"] == "error"
    assert parent_of(chat) == span_id(root)


async def test_a_cancelled_run_ends_its_spans_interrupted_not_failed(spans: Spans) -> None:
    words = "one two three four five six seven eight nine ten eleven twelve"
    run = Agent("talker", ScriptedModel([words], chunk_size=4, chunk_delay=0.02)).stream("talk")
    deltas = 0
    async for event in run:
        deltas += isinstance(event, TextDelta)
        if deltas == 2:
            run.cancel()

    chat = spans.one("chat scripted")
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("interrupted",)
    assert chat.status.status_code is StatusCode.UNSET
    root = spans.one("invoke_agent talker")
    assert attrs(root)["parley.run.status"] == "interrupted"
    assert root.status.status_code is StatusCode.UNSET


async def test_a_consumer_that_stops_early_still_ends_every_span(spans: Spans) -> None:
    run = adding_agent("It is 5.").stream("2 + 3?")
    async for _ in run:
        break
    await run.aclose()

    root = spans.one("invoke_agent calc")
    assert attrs(root)["parley.run.status"] == "interrupted"
    assert root.status.status_code is StatusCode.UNSET


# -- content ---------------------------------------------------------------------------------------

CONTENT_ATTRIBUTES = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


async def test_content_is_absent_by_default(spans: Spans) -> None:
    await adding_agent("It is 5.").reply("What is 2 + 3?")
    recorded = {name for span in spans.all() for name in attrs(span)}
    assert not recorded & CONTENT_ATTRIBUTES
    assert "What is 2 + 3?" not in repr([attrs(s) for s in spans.all()])


@pytest.mark.usefixtures("content")
async def test_content_is_recorded_when_asked_for(spans: Spans) -> None:
    await adding_agent("It is 5.").reply("What is 2 + 3?")

    root = attrs(spans.one("invoke_agent calc"))
    assert json.loads(root["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You add numbers."}
    ]
    assert json.loads(root["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2 + 3?"}]}
    ]
    assert json.loads(root["gen_ai.output.messages"]) == [
        {"role": "assistant", "name": "calc", "parts": [{"type": "text", "content": "It is 5."}]}
    ]

    first, second = (attrs(s) for s in spans.named("chat scripted-1"))
    assert json.loads(first["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You add numbers."}
    ]
    assert json.loads(first["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    history = json.loads(second["gen_ai.input.messages"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[2]["parts"] == [{"type": "tool_call_response", "id": "call_1", "response": "5"}]

    tool_span = attrs(spans.one("execute_tool add"))
    assert json.loads(tool_span["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert tool_span["gen_ai.tool.call.result"] == "5"


def test_a_sync_reply_nests_in_the_callers_span(spans: Spans) -> None:
    tracer = spans.provider.get_tracer("test")
    with tracer.start_as_current_span("script"):
        assert adding_agent("It is 5.").reply_sync("2 + 3?").text == "It is 5."

    assert parent_of(spans.one("invoke_agent calc")) == span_id(spans.one("script"))
