"""The web page (`src/parley/service/static/`) in real headless Chromium against a live service.

Each test serves the app with agents on `ScriptedModel` (uvicorn on 127.0.0.1, its own SQLite
file) and drives the page as a person would: typing, clicking, reading what is shown. What the
page claims (a run stopped, feedback recorded, a thread deleted) is checked through the API or
the store as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page
from playwright.sync_api import expect as playwright_expect

from parley.agents import Agent
from parley.errors import ModelError
from parley.models.response import ChatResponse
from parley.models.testing import ScriptedModel
from parley.service import ServiceSettings, create_app
from parley.service.store import Store
from parley.tools import tool
from tests._requires import require_module
from tests.service._live import running

TIMEOUT = 10_000  # ms: every wait on the page is bounded, by this
# Playwright's assertions with this module's timeout (its shared `expect` left as it is).
expect = type(playwright_expect)()
expect.set_options()
pytestmark = pytest.mark.timeout(120)


# -- tools and agents ------------------------------------------------------------------------

deleted_files: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
def shout(text: str) -> str:
    """Repeat the text (as it is, markup included)."""
    return text


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (asks a person first)."""
    deleted_files.append(path)
    return f"deleted {path}"


def agent(name: str, *steps: Any, tools: tuple[Any, ...] = (), **model: Any) -> Agent:
    """An agent on a streaming scripted model."""
    model.setdefault("chunk_size", 3)
    model.setdefault("chunk_delay", 0.01)
    scripted = ScriptedModel(steps, stream=True, **model)
    return Agent(name, scripted, tools=tools, description=f"the {name} agent")


# -- the live service and the page ------------------------------------------------------------


@dataclass
class Live:
    """A served app: its URL, an API client (with the key, if any) and its database."""

    url: str
    api: httpx.Client
    database_url: str

    def stored_feedback(self, run_id: str) -> list[dict[str, Any]]:
        """The feedback rows the store holds for a run (read through a Store of our own)."""

        async def read() -> list[dict[str, Any]]:
            store = await Store.open(self.database_url, migrate=False)
            try:
                return await store.get_feedback(run_id)
            finally:
                await store.close()

        # A thread of its own: this one may have Playwright's loop marked as running.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, read()).result(timeout=30)

    def wait_run(self, run_id: str) -> dict[str, Any]:
        """The run's info once it is no longer `running` (bounded)."""
        deadline = time.monotonic() + 10
        while True:
            info: dict[str, Any] = self.api.get(f"/runs/{run_id}").raise_for_status().json()
            if info["status"] != "running" or time.monotonic() > deadline:
                return info
            time.sleep(0.1)


Serve = Callable[..., Live]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Serve agents live: `serve(*agents, key=None, **settings)`; stopped after the test."""
    with contextlib.ExitStack() as stack:

        def make(*agents: Agent, key: str | None = None, **settings: Any) -> Live:
            database_url = f"sqlite+aiosqlite:///{tmp_path / 'web.db'}"
            config = ServiceSettings(database_url=database_url, **settings)
            url = stack.enter_context(running(create_app(config, agents=list(agents))))
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            api = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=10))
            return Live(url, api, database_url)

        yield make


@pytest.fixture
def page(chromium_page: Page) -> Iterator[Page]:
    """A fresh page; fails the test on any script error or CSP violation it reports."""
    problems: list[str] = []
    chromium_page.set_default_timeout(TIMEOUT)
    # The shared browser fixture lifts Playwright's loop between tests, and `.on(...)`
    # subscribes through the current loop: one call into Playwright first puts it back.
    chromium_page.evaluate("0")
    chromium_page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))

    def console(message: Any) -> None:
        # A refused request (401, 404) is logged by Chromium itself; the page handles those.
        if message.type == "error" and "Failed to load resource" not in message.text:
            problems.append(f"console: {message.text}")

    chromium_page.on("console", console)
    yield chromium_page
    assert not problems, problems


def open_page(page: Page, live: Live) -> None:
    page.goto(live.url)
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")


def ask(page: Page, text: str) -> None:
    """Type a message and send it with Enter."""
    box = page.get_by_test_id("message-input")
    box.fill(text)
    box.press("Enter")


def wait_idle(page: Page) -> None:
    """Wait until no run is going on (Stop disabled, the answer no longer streaming)."""
    expect(page.get_by_test_id("stop")).to_be_disabled()
    expect(page.locator(".msg-assistant.is-streaming")).to_have_count(0)


# -- the tests ---------------------------------------------------------------------------------


def test_a_question_gets_a_streamed_answer(serve: Serve, page: Page) -> None:
    answer = "Paris is the capital of **France**, and it has been for a long time."
    helper = agent("helper", answer, chunk_size=2, chunk_delay=0.05)
    live = serve(helper)
    open_page(page, live)
    expect(page.get_by_test_id("agent-select")).to_have_value("helper")

    box = page.get_by_test_id("message-input")
    box.fill("Capital of France?")
    box.press("Shift+Enter")  # a new line, not a send
    box.press_sequentially("Answer briefly.")
    expect(box).to_have_value("Capital of France?\nAnswer briefly.")
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    box.press("Enter")

    expect(page.get_by_test_id("user-message")).to_contain_text("Answer briefly.")
    reply = page.get_by_test_id("assistant-message")
    # Tokens show as they arrive: part of the answer while the run still goes on.
    expect(reply).to_contain_text("Paris is")
    expect(page.get_by_test_id("stop")).to_be_enabled()
    assert "long time" not in reply.inner_text()
    wait_idle(page)
    expect(reply.get_by_test_id("assistant-text")).to_have_text(
        "Paris is the capital of France, and it has been for a long time."
    )
    expect(reply.locator("strong")).to_have_text("France")  # markdown-light
    expect(box).to_have_value("")
    expect(page.get_by_test_id("thread-item")).to_have_count(1)
    expect(page.get_by_test_id("thread-item")).to_contain_text("Capital of France?")

    assert helper.model.requests[0].messages[-1].text == "Capital of France?\nAnswer briefly."
    helper.model.assert_consumed()  # type: ignore[attr-defined]


def test_tool_calls_show_as_cards_with_their_results(serve: Serve, page: Page) -> None:
    helper = agent(
        "helper",
        ScriptedModel.tool_call("add", {"a": 2, "b": 3}),
        ScriptedModel.tool_call("divide", {"a": 1, "b": 0}),
        "2 + 3 = 5, and 1 / 0 has no answer.",
        tools=(add, divide),
    )
    live = serve(helper)
    open_page(page, live)
    ask(page, "Add 2 and 3, then divide 1 by 0.")

    cards = page.get_by_test_id("tool-card")
    expect(cards).to_have_count(2)
    wait_idle(page)
    first, second = cards.nth(0), cards.nth(1)
    expect(first.get_by_test_id("tool-name")).to_have_text("add")
    expect(first.get_by_test_id("tool-status")).to_have_text("done")
    expect(first.get_by_test_id("tool-args")).to_be_hidden()  # collapsed until opened
    first.locator("summary").click()
    expect(first.get_by_test_id("tool-args")).to_be_visible()
    expect(first.get_by_test_id("tool-args")).to_contain_text('"a": 2')
    expect(first.get_by_test_id("tool-result")).to_have_text("5")

    expect(second.get_by_test_id("tool-name")).to_have_text("divide")
    expect(second).to_have_attribute("data-error", "true")
    expect(second.get_by_test_id("tool-status")).to_have_text("error")
    expect(second.get_by_test_id("tool-result")).to_be_visible()  # errors open themselves
    expect(second.get_by_test_id("tool-result")).to_contain_text("division by zero")
    expect(page.get_by_test_id("assistant-text").last).to_have_text(
        "2 + 3 = 5, and 1 / 0 has no answer."
    )
    # One turn holds the whole run: the cards, then the answer.
    expect(page.get_by_test_id("assistant-message")).to_have_count(1)

    # The same thread opened afresh shows the same cards from the stored messages.
    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    page.get_by_test_id("thread-open").first.click()
    expect(page.get_by_test_id("tool-card")).to_have_count(2)
    expect(page.get_by_test_id("tool-result").first).to_have_text("5", use_inner_text=False)
    expect(page.get_by_test_id("tool-card").nth(1)).to_have_attribute("data-error", "true")
    helper.model.assert_consumed()  # type: ignore[attr-defined]


def test_stop_keeps_the_partial_answer_and_interrupts_the_run(serve: Serve, page: Page) -> None:
    long_answer = " ".join(f"word{i}" for i in range(400))
    slow = agent("slow", long_answer, chunk_size=4, chunk_delay=0.05)  # ~20 s if not stopped
    live = serve(slow)
    open_page(page, live)
    ask(page, "Tell me everything.")

    reply = page.get_by_test_id("assistant-message")
    expect(reply.get_by_test_id("assistant-text")).to_contain_text("word3")
    stop = page.get_by_test_id("stop")
    expect(stop).to_be_enabled()
    with page.expect_response("**/cancel") as cancelled:
        stop.click()
    assert cancelled.value.status == 200

    expect(reply.get_by_test_id("interrupted")).to_be_visible()
    expect(reply).to_have_attribute("data-interrupted", "true")
    wait_idle(page)
    kept = reply.get_by_test_id("assistant-text").inner_text()
    assert kept.startswith("word0 word1 word2")
    assert "word399" not in kept
    expect(page.get_by_test_id("feedback-up")).to_have_count(0)  # no rating of a cut answer

    run_id = reply.get_attribute("data-run-id")
    assert run_id
    assert live.wait_run(run_id)["status"] == "interrupted"
    thread = live.api.get("/threads").json()["threads"][0]
    detail = live.api.get(f"/threads/{thread['thread_id']}").json()
    last = detail["messages"][-1]
    assert last["role"] == "assistant"
    assert last["metadata"].get("interrupted") is True

    # Opened again, the stored partial answer is still marked interrupted.
    page.get_by_test_id("new-chat").click()
    page.get_by_test_id("thread-open").first.click()
    expect(page.get_by_test_id("interrupted")).to_be_visible()
    expect(page.get_by_test_id("assistant-text")).to_contain_text("word0 word1")


@pytest.mark.parametrize("approved", [True, False], ids=["approve", "deny"])
def test_a_call_waits_for_approval(serve: Serve, page: Page, approved: bool) -> None:
    deleted_files.clear()
    target = f"notes-{'yes' if approved else 'no'}.txt"
    helper = agent(
        "helper",
        ScriptedModel.tool_call("delete_file", {"path": target}),
        "It is gone." if approved else "I left it alone.",
        tools=(delete_file,),
    )
    live = serve(helper)
    open_page(page, live)
    ask(page, f"Delete {target}")

    prompt = page.get_by_test_id("approval")
    expect(prompt).to_be_visible()
    wait_idle(page)
    expect(prompt.get_by_test_id("approval-call")).to_have_count(1)
    expect(prompt.get_by_test_id("approval-call")).to_contain_text("delete_file")
    expect(prompt.get_by_test_id("approval-call")).to_contain_text(target)
    card = page.get_by_test_id("tool-card")
    expect(card.get_by_test_id("tool-status")).to_have_text("needs approval")
    assert deleted_files == []
    thread_id = live.api.get("/threads").json()["threads"][0]["thread_id"]
    assert live.api.get(f"/threads/{thread_id}").json()["status"] == "awaiting_approval"

    button = prompt.get_by_test_id("approve" if approved else "deny")
    with page.expect_response("**/approvals/*/stream") as answered:
        button.click()
    assert answered.value.status == 200
    request = answered.value.request.post_data_json
    assert request == {"approved": approved, "stream_tokens": True, "events": "parley"}

    final = "It is gone." if approved else "I left it alone."
    expect(page.get_by_test_id("assistant-text").last).to_have_text(final)
    wait_idle(page)
    expect(prompt.get_by_test_id("approve")).to_be_disabled()
    expect(prompt.get_by_test_id("deny")).to_be_disabled()
    expect(prompt.get_by_test_id("approval-outcome")).to_have_text(
        "Approved" if approved else "Denied"
    )
    if approved:
        expect(card.get_by_test_id("tool-status")).to_have_text("done")
        expect(card.get_by_test_id("tool-result")).to_have_text(f"deleted {target}")
        assert deleted_files == [target]
    else:
        expect(card).to_have_attribute("data-error", "true")
        expect(card.get_by_test_id("tool-result")).to_have_text("denied by the user")
        assert deleted_files == []
    expect(page.get_by_test_id("feedback-up")).to_have_count(1)  # the resumed run is rated
    assert live.api.get(f"/threads/{thread_id}").json()["status"] == "idle"
    helper.model.assert_consumed()  # type: ignore[attr-defined]


def test_a_pending_approval_shows_when_the_thread_is_opened(serve: Serve, page: Page) -> None:
    deleted_files.clear()
    helper = agent(
        "helper",
        ScriptedModel.tool_call("delete_file", {"path": "later.txt"}),
        "Done.",
        tools=(delete_file,),
    )
    live = serve(helper)
    open_page(page, live)
    ask(page, "Delete later.txt")
    expect(page.get_by_test_id("approval")).to_be_visible()
    wait_idle(page)

    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("thread-item")).to_contain_text("awaiting approval")
    page.get_by_test_id("thread-open").first.click()
    prompt = page.get_by_test_id("approval")
    expect(prompt.get_by_test_id("approval-call")).to_contain_text("later.txt")
    prompt.get_by_test_id("approve").click()
    expect(page.get_by_test_id("assistant-text").last).to_have_text("Done.")
    assert deleted_files == ["later.txt"]


def test_feedback_is_recorded(serve: Serve, page: Page) -> None:
    live = serve(agent("helper", "Forty-two."))
    open_page(page, live)
    ask(page, "The answer?")
    reply = page.get_by_test_id("assistant-message")
    expect(reply.get_by_test_id("assistant-text")).to_have_text("Forty-two.")
    wait_idle(page)
    run_id = reply.get_attribute("data-run-id")
    assert run_id
    assert live.stored_feedback(run_id) == []

    up = reply.get_by_test_id("feedback-up")
    expect(up).to_have_attribute("aria-pressed", "false")
    with page.expect_response("**/feedback") as sent:
        up.click()
    assert sent.value.status == 200
    assert sent.value.json() == {"status": "success"}
    assert sent.value.request.post_data_json == {
        "run_id": run_id,
        "key": "human-feedback-stars",
        "score": 1,
        "kwargs": {},
    }
    expect(reply.get_by_test_id("feedback-status")).to_contain_text("recorded")
    expect(up).to_have_attribute("aria-pressed", "true")

    with page.expect_response("**/feedback") as sent_again:
        reply.get_by_test_id("feedback-down").click()
    assert sent_again.value.status == 200
    expect(reply.get_by_test_id("feedback-down")).to_have_attribute("aria-pressed", "true")
    expect(up).to_have_attribute("aria-pressed", "false")

    rows = live.stored_feedback(run_id)
    assert [(r["key"], r["score"]) for r in rows] == [
        ("human-feedback-stars", 1.0),
        ("human-feedback-stars", 0.0),
    ]
    assert live.wait_run(run_id)["status"] == "completed"


def test_an_earlier_answer_takes_feedback_when_its_thread_is_reopened(
    serve: Serve, page: Page
) -> None:
    live = serve(agent("helper", "Forty-two."))
    open_page(page, live)
    ask(page, "The answer?")
    wait_idle(page)
    run_id = page.get_by_test_id("assistant-message").get_attribute("data-run-id")
    assert run_id

    page.reload()  # the thread is read back from GET /threads/{id}, not from the page's memory
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    page.get_by_test_id("thread-open").first.click()
    reply = page.get_by_test_id("assistant-message")
    expect(reply.get_by_test_id("assistant-text")).to_have_text("Forty-two.")
    expect(reply).to_have_attribute("data-run-id", run_id)
    with page.expect_response("**/feedback") as sent:
        reply.get_by_test_id("feedback-down").click()
    assert sent.value.status == 200
    assert [f["score"] for f in live.stored_feedback(run_id)] == [0]


def test_threads_are_listed_switched_and_deleted(serve: Serve, page: Page) -> None:
    alpha = agent("alpha", "Alpha answers one.")
    beta = agent("beta", "Beta answers two.")
    live = serve(alpha, beta)
    open_page(page, live)
    picker = page.get_by_test_id("agent-select")
    expect(picker.locator("option")).to_have_count(2)
    expect(picker).to_have_value("alpha")  # the default agent

    ask(page, "First question")
    expect(page.get_by_test_id("assistant-text")).to_have_text("Alpha answers one.")
    wait_idle(page)

    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    expect(page.get_by_test_id("thread-title")).to_have_text("New chat")
    picker.select_option("beta")
    with page.expect_request("**/beta/stream"):
        ask(page, "Second question")
    expect(page.get_by_test_id("assistant-text")).to_have_text("Beta answers two.")
    wait_idle(page)

    items = page.get_by_test_id("thread-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Second question")  # newest first
    expect(items.nth(1)).to_contain_text("First question")
    expect(items.nth(0).get_by_test_id("thread-open")).to_have_attribute("aria-current", "true")

    # Switch to the first thread: its messages, its agent.
    items.nth(1).get_by_test_id("thread-open").click()
    expect(page.get_by_test_id("user-message")).to_contain_text("First question")
    expect(page.get_by_test_id("assistant-text")).to_have_text("Alpha answers one.")
    expect(page.get_by_test_id("thread-title")).to_have_text("First question")
    expect(picker).to_have_value("alpha")
    expect(items.nth(1).get_by_test_id("thread-open")).to_have_attribute("aria-current", "true")

    # Back to the second.
    items.nth(0).get_by_test_id("thread-open").click()
    expect(page.get_by_test_id("assistant-text")).to_have_text("Beta answers two.")
    expect(picker).to_have_value("beta")

    # Delete the open thread: gone from the list, the API and the view.
    second_id = items.nth(0).get_attribute("data-thread-id")
    with page.expect_response(lambda r: r.request.method == "DELETE") as deleted:
        items.nth(0).get_by_test_id("thread-delete").click()
    assert deleted.value.status == 204
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("First question")
    expect(page.get_by_test_id("thread-title")).to_have_text("New chat")
    expect(page.get_by_test_id("user-message")).to_have_count(0)
    listed = live.api.get("/threads").json()["threads"]
    assert [t["title"] for t in listed] == ["First question"]
    assert live.api.get(f"/threads/{second_id}").status_code == 404

    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("thread-item")).to_have_count(1)


def test_model_output_is_shown_as_text_never_as_html(serve: Serve, page: Page) -> None:
    evil = (
        '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
        "<b>bold?</b> [click](javascript:window.__pwned=3) `<i>code</i>`"
    )
    helper = agent(
        "helper",
        ScriptedModel.tool_call("shout", {"text": '<img src=y onerror="window.__pwned=4">'}),
        ChatResponse.model_validate(
            {
                "content": [
                    {"type": "thinking", "thinking": "<svg onload=window.__pwned=5>"},
                    {"type": "text", "text": evil},
                ]
            }
        ),
        tools=(shout,),
    )
    live = serve(helper)
    open_page(page, live)
    ask(page, '<img src=z onerror="window.__pwned=6">Hi')

    reply = page.get_by_test_id("assistant-message")
    expect(reply.get_by_test_id("assistant-text")).to_contain_text("<script>")
    wait_idle(page)
    expect(reply.get_by_test_id("assistant-text")).to_contain_text(
        '<img src=x onerror="window.__pwned=1">'
    )
    expect(reply.get_by_test_id("assistant-text").locator("code")).to_have_text("<i>code</i>")
    expect(page.get_by_test_id("tool-result")).to_have_text(
        '<img src=y onerror="window.__pwned=4">', use_inner_text=False
    )
    thinking = reply.get_by_test_id("thinking")
    thinking.locator("summary").click()
    expect(thinking).to_contain_text("<svg onload=window.__pwned=5>")
    expect(page.get_by_test_id("user-message")).to_contain_text("<img src=z")
    expect(page.get_by_test_id("thread-item")).to_contain_text("<img src=z")
    messages = page.get_by_test_id("messages")
    assert messages.locator("img, script, b, i, svg:not(.feedback-btn svg)").count() == 0
    assert page.locator("#thread-list img").count() == 0
    assert reply.locator("a").count() == 0  # a javascript: link is not a link
    assert page.evaluate("window.__pwned") is None


def test_a_failed_run_shows_its_error(serve: Serve, page: Page) -> None:
    live = serve(agent("helper", ModelError("the model is <b>down</b>")))
    open_page(page, live)
    ask(page, "Anyone there?")
    error = page.get_by_test_id("assistant-message").get_by_test_id("error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("ModelError: the model is <b>down</b>")
    wait_idle(page)
    expect(page.get_by_test_id("feedback-up")).to_have_count(0)
    run_id = page.get_by_test_id("assistant-message").get_attribute("data-run-id")
    assert run_id
    assert live.wait_run(run_id)["status"] == "error"


def test_a_401_asks_for_the_key_and_the_key_then_works(serve: Serve, page: Page) -> None:
    secret = "s3cret-page-key"
    live = serve(agent("helper", "Welcome in."), key=secret, auth_secret=secret)
    assert httpx.get(f"{live.url}/agents", timeout=10).status_code == 401
    page.goto(live.url)

    panel = page.get_by_test_id("auth-panel")
    expect(panel).to_be_visible()
    key_box = page.get_by_label("API key", exact=True)
    expect(key_box).to_be_focused()
    expect(page.get_by_test_id("send")).to_be_disabled()

    # A wrong key: asked again, with a reason.
    key_box.fill("not-the-key")
    page.get_by_test_id("api-key-save").click()
    expect(page.get_by_test_id("auth-error")).to_contain_text("refused")
    expect(panel).to_be_visible()

    key_box.fill(secret)
    with page.expect_response("**/agents") as agents:
        page.get_by_test_id("api-key-save").click()
    assert agents.value.status == 200
    assert agents.value.request.headers["authorization"] == f"Bearer {secret}"
    expect(panel).to_be_hidden()
    expect(page.get_by_test_id("agent-select")).to_have_value("helper")
    ask(page, "Let me in")
    expect(page.get_by_test_id("assistant-text")).to_have_text("Welcome in.")
    wait_idle(page)
    assert page.evaluate("localStorage.getItem('parley.apiKey')") == secret

    # The key is kept: a reload asks nothing and lists the thread.
    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    expect(panel).to_be_hidden()
    expect(page.get_by_test_id("thread-item")).to_have_count(1)
    assert [t["title"] for t in live.api.get("/threads").json()["threads"]] == ["Let me in"]


def test_an_answer_from_documents_lists_its_sources(
    serve: Serve, page: Page, tmp_path: Path
) -> None:
    from parley.rag import DocumentIndex  # noqa: PLC0415
    from parley.rag.assistant import Assistant  # noqa: PLC0415
    from tests.tools._hostile import text_pdf  # noqa: PLC0415

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "handbook.md").write_text("# Kettles\n\nOur kettle must be descaled monthly.\n")
    text_pdf(docs / "manual.pdf", [["Safety first."], ["Descale the kettle with citric acid."]])
    # A file name written to break the page: it must show as text.
    (docs / "<img src=x onerror=alert(1)>.md").write_text("Descale kettle notes.\n")

    async def build() -> DocumentIndex:
        index = await DocumentIndex.open(tmp_path / "docs.sqlite", embedding_model=None)
        await index.sync(docs)
        return index

    with ThreadPoolExecutor(max_workers=1) as pool:
        index = pool.submit(asyncio.run, build()).result(timeout=60)
    model = ScriptedModel(["Descale it monthly [1], with citric acid [2]."], stream=True)
    live = serve(Assistant(index, model, name="documents"))
    open_page(page, live)
    ask(page, "How do I descale the kettle?")
    wait_idle(page)

    sources = page.get_by_test_id("sources")
    expect(sources).to_be_visible()
    items = sources.get_by_test_id("source")
    expect(items).to_have_count(3)
    # Numbered as the passages were, each with its file and page or heading.
    texts = sorted(t.split(" ", 1)[1] for t in items.all_inner_texts())
    assert texts == [
        "<img src=x onerror=alert(1)>.md",
        "handbook.md: Kettles",
        "manual.pdf, page 2",
    ]
    assert sorted(t.split(" ", 1)[0] for t in items.all_inner_texts()) == ["[1]", "[2]", "[3]"]
    expect(sources.locator("img")).to_have_count(0)
    expect(page.get_by_test_id("tool-name")).to_have_text("retrieval")
    expect(page.get_by_test_id("assistant-text").last).to_have_text(
        "Descale it monthly [1], with citric acid [2]."
    )

    # Reopened from the stored thread, the sources are there again.
    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    page.get_by_test_id("thread-open").first.click()
    expect(page.get_by_test_id("source")).to_have_count(3)


# -- speech ------------------------------------------------------------------------------------


@pytest.fixture
def speaking_page(chromium_browser: Any, chromium_launch_options: dict[str, Any]) -> Iterator[Page]:
    """A page in a Chromium that lets audio play without a click (as after the user's)."""
    require_module("piper", "the extra tts-piper")
    options = dict(chromium_launch_options)
    options["args"] = [*options["args"], "--autoplay-policy=no-user-gesture-required"]
    browser = chromium_browser.browser_type.launch(**options)
    with contextlib.ExitStack() as stack:
        stack.callback(browser.close)
        page = browser.new_context().new_page()
        page.set_default_timeout(TIMEOUT)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        assert not errors, errors


def test_speak_plays_the_answer_while_it_is_written(serve: Serve, speaking_page: Page) -> None:
    page = speaking_page
    answer = (
        "Paris is the capital of France. It lies on the river Seine. "
        "Millions of people visit it every year, for its museums and its food."
    )
    live = serve(agent("helper", answer, answer, chunk_size=4, chunk_delay=0.06))
    open_page(page, live)
    toggle = page.get_by_test_id("speak")
    expect(toggle).not_to_be_checked()
    toggle.check()
    ask(page, "Tell me about Paris.")
    wait_idle(page)

    log: list[dict[str, Any]] = page.evaluate("window.__parleyAudio")
    buffers = [e for e in log if e["kind"] == "buffer"]
    texts = [e["at"] for e in log if e["kind"] == "text"]
    [ended] = [e["at"] for e in log if e["kind"] == "run_ended"]
    assert buffers, log
    # Playback was scheduled while the answer was still being written, not after it.
    assert buffers[0]["at"] < texts[-1] < ended
    assert all(b["rate"] == 22050 for b in buffers)
    seconds = sum(b["seconds"] for b in buffers)
    assert 4.0 < seconds < 16.0  # 25 words at a speaking pace
    loudness = sum(b["rms"] * b["seconds"] for b in buffers) / seconds
    assert loudness > 300  # speech, not silence (16-bit sample units)
    starts = [b["start"] for b in buffers]
    assert starts == sorted(starts)  # back to back, in order

    # The choice is remembered, and a new question silences the last answer.
    page.reload()
    expect(page.locator("#app")).to_have_attribute("data-ready", "true")
    expect(page.get_by_test_id("speak")).to_be_checked()
    page.get_by_test_id("speak").uncheck()
    ask(page, "Again, quietly.")
    wait_idle(page)
    after: list[dict[str, Any]] = page.evaluate("window.__parleyAudio")
    assert not [e for e in after if e["kind"] == "buffer"]
