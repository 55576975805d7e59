"""End to end on the embedded defaults: the built-in agent (the local model and the code
interpreter) served on SQLite, asked through the API and through the web page in Chromium.
The built-in agent offers the embedded model no tool unless asked (`tools=True`, as here:
tests/service/test_builtin_agent.py has why); these tests keep its tool path working.

The model decodes greedily, so its answers are the same on every run; the questions are ones
the 135M model gets right with one tool call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from parley.providers.local import LocalChatModel
from parley.service import ServiceSettings, create_app
from parley.service.registry import builtin_agent
from tests.service._live import running
from tests.service._support import DONE, frames
from tests.service.conftest import MakeService

QUESTION = "What is 12*7?"


@pytest.fixture(scope="module")
def local_model() -> LocalChatModel:
    model = LocalChatModel()
    model.load_sync()
    return model


async def test_the_builtin_agent_answers_with_a_tool(
    service: MakeService, local_model: LocalChatModel
) -> None:
    svc = await service(builtin_agent(local_model, tools=True))
    response = await svc.client.post("/stream", json={"message": QUESTION})
    got = frames(response.text)
    assert got[-1] == DONE
    messages = [f["content"] for f in got[:-1] if f["type"] == "message"]
    call, result, answer = messages
    assert call["tool_calls"][0]["name"] == "code_interpreter"
    assert (result["type"], "84" in result["content"]) == ("tool", True)
    assert "84" in answer["content"]
    tokens = "".join(f["content"] for f in got[:-1] if f["type"] == "token")
    assert tokens == answer["content"]  # the answer was streamed, token by token


@pytest.fixture
def local_service(tmp_path: Path, local_model: LocalChatModel) -> Iterator[str]:
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}")
    with running(create_app(settings, agents=[builtin_agent(local_model, tools=True)])) as url:
        yield url


def test_a_question_typed_into_the_page_gets_a_tool_using_answer(
    local_service: str, chromium_page: Page
) -> None:
    page = chromium_page
    page.goto(local_service)
    page.get_by_test_id("message-input").fill(QUESTION)
    page.get_by_test_id("send").click()
    card = page.get_by_test_id("tool-card").first
    expect(card.get_by_test_id("tool-name")).to_contain_text("code_interpreter", timeout=60_000)
    expect(card.get_by_test_id("tool-result")).to_contain_text("84", timeout=60_000)
    answer = page.get_by_test_id("assistant-text").last
    expect(answer).to_contain_text("84", timeout=60_000)
    expect(page.get_by_test_id("stop")).to_be_disabled(timeout=60_000)
    expect(page.get_by_test_id("thread-item").first).to_contain_text(QUESTION)
