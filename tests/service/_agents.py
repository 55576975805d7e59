"""Apps for service processes the tests start (`uvicorn --factory tests.service._agents:app`).

The agent's model answers from the request itself (`turn N: <last question>`, N counting the
questions it sees), so processes that share a database but not memory show whether each one
read the whole thread. `PARLEY_TEST_DELAY` slows its streaming (seconds per chunk).
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from parley.agents import Agent
from parley.models.base import ChatRequest
from parley.models.testing import ScriptedModel
from parley.service import create_app

__all__ = ["app", "echo_agent", "turn_answer"]


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
