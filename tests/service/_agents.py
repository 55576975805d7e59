"""Apps for service processes the tests start (`uvicorn --factory tests.service._agents:app`).

The agent's model answers from the request itself (`turn N: <last question>`, N counting the
questions it sees), so processes that share a database but not memory show whether each one
read the whole thread. `PARLEY_TEST_DELAY` slows its streaming (seconds per chunk).

`long_answer_app` serves an agent with a long answer (`PARLEY_TEST_SENTENCES` sentences of
about a thousand characters): a lot to stream, and to speak, for a client that does not read.
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel
from parley.service import create_app

__all__ = ["LONG_SENTENCE", "app", "echo_agent", "long_answer_app", "turn_answer"]

LONG_SENTENCE = (
    ", ".join(["Paris is the capital of France", "it lies on the Seine", "and many visit it"] * 12)
    + ". "
)
"""One sentence of about a thousand characters (the local voice speaks it in one go)."""


def turn_answer(request: ChatRequest) -> str:
    """`turn N: <last question>`, N being how many questions the model sees."""
    questions = [m.text for m in request.messages if m.role == "user"]
    return f"turn {len(questions)}: {questions[-1]}"


def echo_agent(delay: float = 0.0) -> Agent:
    """An agent whose model answers with `turn_answer`, as many times as asked."""
    model = ScriptedModel([turn_answer] * 10_000, stream=True, chunk_size=2, chunk_delay=delay)
    return Agent("echo", model)


def app() -> FastAPI:
    """The app factory: settings from `PARLEY_*`, one echo agent."""
    return create_app(agents=[echo_agent(float(os.environ.get("PARLEY_TEST_DELAY", "0")))])


def long_answer_app() -> FastAPI:
    """The app factory: settings from `PARLEY_*`, one agent (`assistant`) with a long answer."""
    answer = LONG_SENTENCE * int(os.environ.get("PARLEY_TEST_SENTENCES", "4"))
    model = ScriptedModel([answer] * 1000, stream=True, chunk_size=500)
    return create_app(agents=[Agent("assistant", model)])
