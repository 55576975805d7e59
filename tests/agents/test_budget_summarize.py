"""`context_size` compresses: old turns summarized by the model, as AgentScope does (seed 003)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from parley.agents import Agent, ContextBudget
from parley.agents.budget import message_text
from parley.agents.compress import SUMMARY_PREFIX, is_summary
from parley.errors import ModelHTTPError, UserError
from parley.messages import Msg, ToolCallBlock
from parley.models.testing import ScriptedModel


def words(msgs: Sequence[Msg]) -> int:
    """A token per word: a counter the tests can reason about."""
    return sum(len(message_text(m).split()) for m in msgs)


def call_round(call_id: str) -> list[Msg]:
    call = ToolCallBlock(id=call_id, name="lookup", input={"q": call_id})
    return [Msg.assistant(call), Msg.tool_result(call_id, "found it here", name="lookup")]


def history() -> list[Msg]:
    return [
        Msg.system("be brief"),
        Msg.user("my name is Ann"),
        *call_round("a"),
        Msg.assistant("hello Ann"),
        Msg.user("I live in Oslo"),
        Msg.assistant("noted"),
        Msg.user("where do I live?"),
    ]


async def test_old_turns_are_summarized_not_only_dropped() -> None:
    summarizer = ScriptedModel(["Ann lives in Oslo; lookup found it."])
    model = ScriptedModel(context_size=16)
    budget = ContextBudget(
        model, output_reserve=0, counter=words, strategy="summarize", summary_model=summarizer
    )
    msgs = history()
    sent = await budget.prepare(msgs)

    assert sent[0].text == "be brief"
    assert is_summary(sent[1])
    assert sent[1].role == "system"
    assert sent[1].text == SUMMARY_PREFIX + "Ann lives in Oslo; lookup found it."
    assert sent[-1].text == "where do I live?"
    # What the summarizer was asked: the dropped turns, the tool round whole.
    (request,) = summarizer.requests
    asked = request.messages[-1].text
    assert "my name is Ann" in asked
    assert "lookup(" in asked
    assert "found it here" in asked
    assert request.parameters.max_tokens is not None
    # No call is kept without its result, nor a result without its call.
    kept_calls = {c.id for m in sent for c in m.tool_calls}
    kept_results = {r.tool_call_id for m in sent for r in m.tool_results}
    assert kept_calls == kept_results


async def test_the_summary_is_kept_and_extended_with_new_turns_only() -> None:
    summarizer = ScriptedModel(["S1", "S2"])
    model = ScriptedModel(context_size=16)
    budget = ContextBudget(
        model, output_reserve=0, counter=words, strategy="summarize", summary_model=summarizer
    )
    msgs = history()
    first = await budget.prepare(msgs)
    again = await budget.prepare(msgs)
    assert again[1] is first[1]  # kept: no second summary call
    assert len(summarizer.requests) == 1

    longer = [*msgs, Msg.assistant("in Oslo"), Msg.user("and my name?")]
    extended = await budget.prepare(longer)
    assert extended[1].text == SUMMARY_PREFIX + "S2"
    second_ask = summarizer.requests[1].messages[-1].text
    assert "S1" in second_ask  # the kept summary, extended
    assert "my name is Ann" not in second_ask  # already in it: not summarized again


async def test_a_failed_summary_falls_back_to_trimming() -> None:
    summarizer = ScriptedModel([ModelHTTPError(500)])
    summarizer.retry = summarizer.retry.__class__(max_retries=0)
    budget = ContextBudget(
        ScriptedModel(context_size=16),
        output_reserve=0,
        counter=words,
        strategy="summarize",
        summary_model=summarizer,
    )
    msgs = history()
    sent = await budget.prepare(msgs)
    assert sent == budget.fit(msgs)
    assert not any(is_summary(m) for m in sent)


async def test_an_agent_summarizes_with_its_own_model_and_keeps_its_memory() -> None:
    model = ScriptedModel(["hello Ann", "noted", "Earlier: the user is Ann.", "Oslo"])
    model.context_size = 12
    agent = Agent(
        "short",
        model,
        output_reserve=0,
        token_counter=words,
        context_strategy="summarize",
    )
    await agent.reply("my name is Ann")
    await agent.reply("I live in Oslo")
    answer = await agent.reply("where do I live now?")
    assert answer.text == "Oslo"
    summary_request, last = model.requests[2], model.requests[3]
    assert "my name is Ann" in summary_request.messages[-1].text
    assert last.messages[0].text == SUMMARY_PREFIX + "Earlier: the user is Ann."
    assert last.messages[-1].text == "where do I live now?"
    assert len(await agent.memory.get()) == 6  # the memory is not changed


async def test_trim_stays_the_default_and_an_unknown_strategy_is_refused() -> None:
    budget = ContextBudget(ScriptedModel(context_size=16), output_reserve=0, counter=words)
    assert budget.strategy == "trim"
    msgs = history()
    assert await budget.prepare(msgs) == budget.fit(msgs)
    with pytest.raises(UserError, match="unknown context strategy 'squeeze'"):
        ContextBudget(ScriptedModel(), strategy="squeeze")  # type: ignore[arg-type]
