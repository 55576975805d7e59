"""The service's built-in agent with no model configured: the model the user already has.

Provider keys point at the project's wire-format stand-ins (`OPENAI_BASE_URL`,
`ANTHROPIC_BASE_URL`), and `OLLAMA_HOST` at its Ollama stand-in; the suite's conftest starts
every test with none of them (keys cleared, Ollama on a closed port, no pulled model). The
service chooses once at start-up; `/info` and the page's header say which, and why.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from parley.agents import Agent
from parley.models.testing import ScriptedModel
from parley.providers.anthropic import server as anthropic_server
from parley.providers.ollama.server import OllamaServer, RecordedRequest, Reply
from parley.providers.openai import server as openai_server
from parley.service import ServiceSettings, create_app
from parley.service.app import MODEL_CHOICE_VARIABLE
from tests.models.test_auto import CHAT, EMBEDDER, first_card
from tests.service._live import running

pytestmark = pytest.mark.usefixtures("no_ambient_settings")


@contextlib.asynccontextmanager
async def serving(**settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The service as `parley serve` builds it (its agents from the settings), in-process."""
    app = create_app(ServiceSettings(**settings))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=60
        ) as client,
    ):
        yield client


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}"


@pytest.fixture
def openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[openai_server.OpenAIServer]:
    """An OpenAI stand-in where the SDK's own variable says (no key set: the test's choice)."""
    with openai_server.OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        yield server


@pytest.fixture
def ollama(monkeypatch: pytest.MonkeyPatch) -> Iterator[OllamaServer]:
    with OllamaServer() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        yield server


def answer_or_load(text: str) -> Callable[[RecordedRequest], Reply]:
    """An Ollama step: `text` to a question, an empty reply to the warm-up's load (no messages).

    The service loads its default agent's model at start-up, so the Ollama model is asked to
    load, concurrently with the first question.
    """
    return lambda request: Reply(text=text if (request.json or {}).get("messages") else "")


async def model_info(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/info")
    assert response.status_code == 200
    info: dict[str, Any] = response.json()
    assert {"agents", "models", "default_agent", "default_model"} <= set(info)  # the toolkit's
    return info["model"]  # type: ignore[no-any-return]


async def test_with_an_openai_key_the_service_answers_through_openai(
    monkeypatch: pytest.MonkeyPatch, db: str, openai: openai_server.OpenAIServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai.add(openai_server.Reply(text="Hello from OpenAI's stand-in."))
    async with serving(database_url=db) as client:
        model = await model_info(client)
        answer = await client.post("/invoke", json={"message": "Hi"})
    assert model["spec"] == f"openai:{first_card('openai')}"
    assert (model["source"], model["tiny"]) == ("env:OPENAI_API_KEY", False)
    assert "OPENAI_API_KEY" in model["reason"]
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"] == "Hello from OpenAI's stand-in."
    [request] = openai.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json["model"] == first_card("openai")


async def test_with_an_ollama_chat_model_the_service_answers_through_ollama(
    db: str, ollama: OllamaServer
) -> None:
    ollama.models = [EMBEDDER, CHAT]  # the embedding-only model is passed over
    ollama.add(*[answer_or_load("Hello from Ollama's stand-in.")] * 2)
    async with serving(database_url=db) as client:
        model = await model_info(client)
        answer = await client.post("/invoke", json={"message": "Hi"})
    assert (model["spec"], model["source"], model["tiny"]) == ("ollama:qwen3:1.7b", "ollama", False)
    assert answer.json()["content"] == "Hello from Ollama's stand-in."
    [chat] = [body for body in ollama.bodies("/api/chat") if body.get("messages")]
    assert chat["model"] == "qwen3:1.7b"
    assert [r.path for r in ollama.requests].count("/api/tags") == 1  # chosen once


async def test_with_nothing_found_the_service_runs_the_embedded_model_and_says_it_is_tiny(
    db: str,
) -> None:
    async with serving(database_url=db) as client:
        model = await model_info(client)
        served = (await client.get("/v1/models")).json()
    assert (model["spec"], model["source"], model["tiny"]) == ("local", "embedded", True)
    assert "parley models pull qwen3-1.7b" in model["reason"]
    assert [m["id"] for m in served["data"]] == ["assistant", "local"]  # as before: `local`


async def test_an_explicit_model_wins_over_a_key_and_nothing_reaches_that_provider(
    monkeypatch: pytest.MonkeyPatch,
    db: str,
    openai: openai_server.OpenAIServer,
    ollama: OllamaServer,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ollama.models = [CHAT]
    ollama.add(*[answer_or_load("From the configured model.")] * 2)
    async with serving(database_url=db, model="ollama:qwen3:1.7b") as client:
        model = await model_info(client)
        answer = await client.post("/invoke", json={"message": "Hi"})
    assert (model["spec"], model["source"], model["tiny"]) == (
        "ollama:qwen3:1.7b",
        "setting",
        False,
    )
    assert answer.json()["content"] == "From the configured model."
    assert openai.requests == []


async def test_an_explicit_local_setting_is_the_embedded_model(
    monkeypatch: pytest.MonkeyPatch, db: str, openai: openai_server.OpenAIServer
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("PARLEY_MODEL", "local")
    async with serving(database_url=db) as client:
        model = await model_info(client)
    assert (model["spec"], model["source"], model["tiny"]) == ("local", "setting", True)
    assert openai.requests == []


async def test_a_key_for_one_provider_never_makes_a_request_to_another(
    monkeypatch: pytest.MonkeyPatch,
    db: str,
    openai: openai_server.OpenAIServer,
    ollama: OllamaServer,
) -> None:
    ollama.models = [CHAT]
    with anthropic_server.AnthropicServer(
        [anthropic_server.Reply(text="Hello from Anthropic's stand-in.")]
    ) as anthropic:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        async with serving(database_url=db) as client:
            model = await model_info(client)
            answer = await client.post("/invoke", json={"message": "Hi"})
        assert len(anthropic.requests) == 1
    assert model["source"] == "env:ANTHROPIC_API_KEY"
    assert answer.json()["content"] == "Hello from Anthropic's stand-in."
    assert openai.requests == []  # its base URL is set, its key is not
    assert ollama.requests == []  # a key found first: not even Ollama's listing


async def test_a_service_of_its_own_agents_looks_for_no_model(
    db: str, ollama: OllamaServer
) -> None:
    ollama.models = [CHAT]
    agent = Agent("mine", ScriptedModel([]))
    app = create_app(ServiceSettings(database_url=db), agents=[agent])
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client,
    ):
        info = (await client.get("/info")).json()
    assert info["model"] is None
    assert ollama.requests == []


async def test_the_choice_handed_down_by_parley_serve_is_taken_without_looking_again(
    monkeypatch: pytest.MonkeyPatch, db: str, ollama: OllamaServer
) -> None:
    # `parley serve` chooses once and hands the choice to uvicorn's worker processes.
    ollama.models = [CHAT]
    handed = {"spec": "local", "source": "embedded", "reason": "chosen by serve", "tiny": True}
    monkeypatch.setenv(MODEL_CHOICE_VARIABLE, json.dumps(handed))
    async with serving(database_url=db) as client:
        assert await model_info(client) == handed
    assert ollama.requests == []


# -- the page ------------------------------------------------------------------------------------


def test_the_page_header_shows_the_model_and_says_the_embedded_one_is_tiny(
    tmp_path: Path, chromium_page: Page
) -> None:
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}")
    with running(create_app(settings)) as url:
        chromium_page.goto(url)
        expect(chromium_page.get_by_test_id("model-name")).to_have_text("local")
        note = chromium_page.get_by_test_id("model-note")
        expect(note).to_be_visible()
        expect(note).to_contain_text("tiny")
        expect(note).to_contain_text("parley models pull qwen3-1.7b")
        expect(note).to_contain_text("parley serve --model local:qwen3-1.7b")
        chip = chromium_page.get_by_test_id("model-chip")
        assert "parley models pull" in (chip.get_attribute("title") or "")


def test_the_page_header_shows_a_hosted_model_without_the_note(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    chromium_page: Page,
    openai: openai_server.OpenAIServer,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = ServiceSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'parley.db'}")
    with running(create_app(settings)) as url:
        chromium_page.goto(url)
        expect(chromium_page.get_by_test_id("model-name")).to_have_text(
            f"openai:{first_card('openai')}"
        )
        expect(chromium_page.locator("#app[data-ready=true]")).to_be_attached()
        expect(chromium_page.get_by_test_id("model-note")).to_be_hidden()
    assert openai.requests == []  # showing the page asks the model nothing
