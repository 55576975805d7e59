"""Agents on the embedded local model, given no tool-choice policy, use the model's own.

SmolLM2-135M calls a tool whenever it may: left to "auto" in every call, a run calls tools
until its iteration limit. The local model's default policy is one tool round, then an
answer; the run's own events count its model calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from parley.agents import Agent, MessageCompleted, PromptedToolsModel, RunEnded, one_tool_round
from parley.agents.multi.formatting import FoldingModel
from parley.compat.qwen import FnCallAgent
from parley.messages import Msg
from parley.models.testing import ScriptedModel
from parley.providers.local import LocalChatModel
from parley.tools import tool
from tests._requires import require_module

QUESTION = "compute 23 * 19"
PARAMETERS = {"seed": 7, "max_tokens": 64}
LIMIT = 4
"""Enough model calls for a run that does not stop after one tool round to show it."""

products: list[tuple[float, float]] = []


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    products.append((a, b))
    return a * b


def model_turns(events: Iterable[Any]) -> tuple[list[Msg], RunEnded]:
    """The assistant messages of a run (one per model call), and how it ended."""
    events = list(events)
    turns = [e.msg for e in events if isinstance(e, MessageCompleted) and e.msg.role == "assistant"]
    end = events[-1]
    assert isinstance(end, RunEnded)
    return turns, end


def assert_one_tool_round_then_an_answer(turns: list[Msg], end: RunEnded) -> None:
    assert end.status == "completed"
    assert 1 <= len(turns) <= 2
    assert all(m.tool_calls for m in turns[:-1])
    assert not turns[-1].tool_calls
    assert end.final == turns[-1]


async def test_an_agent_without_a_policy_makes_one_tool_round_then_answers() -> None:
    require_module("llama_cpp", "local")
    agent = Agent(
        "calculator",
        LocalChatModel(parameters=PARAMETERS),
        system_prompt="You are a helpful assistant.",
        tools=[multiply],
        max_iters=LIMIT,
    )
    turns, end = model_turns([event async for event in agent.stream(QUESTION)])
    assert_one_tool_round_then_an_answer(turns, end)


def test_a_qwen_fncall_agent_without_a_policy_makes_one_tool_round_then_answers() -> None:
    require_module("llama_cpp", "local")
    bot = FnCallAgent(
        [multiply],
        llm={"model_type": "local", "generate_cfg": PARAMETERS},
        max_iters=LIMIT,
    )
    turns, end = model_turns(bot.stream_sync([{"role": "user", "content": QUESTION}]))
    assert_one_tool_round_then_an_answer(turns, end)


# -- the policy's source, without running a model ------------------------------------------------


def test_an_agent_uses_its_models_default_policy_unless_given_one() -> None:
    model = ScriptedModel([])
    model.default_tool_choice = one_tool_round
    agent = Agent("a", model, tools=[multiply])
    assert [agent.choose_tool(i) for i in range(3)] == ["auto", "none", "none"]
    forced = Agent("a", model, tools=[multiply], tool_choice="multiply")
    assert [forced.choose_tool(i) for i in range(3)] == ["multiply", None, None]
    assert Agent("a", ScriptedModel([]), tools=[multiply]).choose_tool(1) is None


@pytest.mark.parametrize("wrap", [PromptedToolsModel, lambda m: FoldingModel(m, "a")])
def test_wrapping_models_keep_the_inner_models_default_policy(wrap: Any) -> None:
    inner = ScriptedModel([])
    inner.default_tool_choice = one_tool_round
    assert wrap(inner).default_tool_choice is one_tool_round


def test_a_local_agent_needs_no_policy_of_its_own() -> None:
    agent = Agent("a", LocalChatModel(), tools=[multiply])
    assert agent.tool_choice is None
    assert [agent.choose_tool(i) for i in range(2)] == ["auto", "none"]
