"""Targets the `parley eval` tests name on the command line (`tests.evals._fixtures:agent`).

A scripted model stands in for a real one: it answers 12*7 right, any other sum wrong, and
calls the `multiply` tool when asked to use it, so a run has a pass, a failure and a tool call.
"""

from __future__ import annotations

from typing import Any

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel


def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a * b


def _answer(request: ChatRequest) -> ChatResponse | str:
    last = request.messages[-1]
    if last.role == "tool":
        return "6*7 is 42, the tool says."
    if "Use the tool" in last.text:
        return ScriptedModel.tool_call("multiply", {"a": 6, "b": 7})
    return "12*7 is 84." if "12*7" in last.text else "It is 90, I think."


def make_agent() -> Agent:
    """An agent on the scripted model, with the `multiply` tool."""
    return Agent("maths", ScriptedModel([_answer] * 50), tools=[multiply])


agent = make_agent()


async def answer(inputs: Any) -> str:
    """A function target: the same answers, without a model."""
    return "84" if "12*7" in str(inputs) else "90"


not_an_agent = 42
