"""Gemini's model cards, credential, registry entry, and an agent run on the scripted server."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from parley import Msg
from parley.agents import Agent
from parley.errors import ConfigurationError
from parley.models import CredentialFactory
from parley.models.cards import THINKING
from parley.models.spec import model_from_spec
from parley.providers.gemini import GeminiChatModel, GeminiCredential
from parley.providers.gemini.server import FunctionCall, GeminiServer, Reply
from parley.tools import tool
from tests.providers import _cards
from tests.providers._cards import assert_cards_load

NAMES = {
    "gemini-2.5-pro",
    "gemini-2.5-flash",
    "gemini-2.5-flash-lite",
    "gemini-3.1-pro-preview",
    "gemini-3.1-flash-lite",
    "gemini-3.7-flash",
    "gemini-3.8-flash",
}


card = partial(_cards.card, GeminiChatModel)
"""The card of one of its models, by name."""


def test_every_card_loads() -> None:
    cards = GeminiChatModel.list_models()
    assert_cards_load(cards, NAMES)
    for each in cards:
        assert each.context_size == 1048576
        assert each.output_size == 65536
        for media in ("text/plain", "image/png", "audio/wav", "video/mp4", "application/pdf"):
            assert each.accepts(media), (each.name, media)
        assert each.produces(THINKING)
        assert each.parameter_schema["properties"]["max_tokens"]["maximum"] == 65536


def test_thinking_controls_per_generation() -> None:
    budget = card("gemini-2.5-flash").parameter_schema["properties"]
    assert "thinking_level" not in budget
    assert budget["thinking_budget"]["maximum"] == 24576
    level = card("gemini-3.8-flash").parameter_schema["properties"]
    assert level["thinking_level"]["enum"] == ["low", "medium", "high"]
    assert level["thinking_budget"]["hidden"] is True
    assert (
        card("gemini-3.1-flash-lite").parameter_schema["properties"]["thinking_level"]["default"]
        == "minimal"
    )


def test_context_size_comes_from_the_card() -> None:
    model = GeminiChatModel(GeminiCredential(api_key="k"), "gemini-2.5-pro")  # type: ignore[arg-type]
    assert model.context_size == 1048576


def test_credential_lists_its_model_class_and_cards() -> None:
    assert GeminiCredential.chat_model_classes() == [GeminiChatModel]
    assert {c.name for c in GeminiCredential.list_models()} == NAMES


def test_credential_factory_and_registry() -> None:
    credential = CredentialFactory.from_dict({"type": "gemini", "api_key": "AIza-hidden"})
    assert type(credential) is GeminiCredential
    assert "gemini" in CredentialFactory.known_types()
    for text in (repr(credential), str(credential), credential.model_dump_json()):
        assert "AIza-hidden" not in text
    vertex = CredentialFactory.from_dict(
        {"type": "gemini", "vertexai": True, "project": "p", "location": "us-central1"}
    )
    assert isinstance(vertex, GeminiCredential)
    assert vertex.endpoint() == "https://us-central1-aiplatform.googleapis.com/"


def test_vertex_fields_need_vertexai() -> None:
    with pytest.raises(ConfigurationError, match="set vertexai=True"):
        CredentialFactory.from_dict({"type": "gemini", "project": "p"})


def test_model_from_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    model = model_from_spec("gemini:gemini-3.8-flash")
    assert isinstance(model, GeminiChatModel)
    assert model.model == "gemini-3.8-flash"
    # Without a name: the first card.
    assert model_from_spec("gemini").model == "gemini-2.5-flash"


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}"


async def test_agent_runs_a_tool_round_on_the_server(server: GeminiServer, make_model: Any) -> None:
    server.add(
        Reply(
            thinking="I should look.",
            function_calls=[FunctionCall("get_weather", {"city": "Oslo"}, signature="sig-1")],
        ),
        Reply(text="It is sunny in Oslo."),
    )
    agent = Agent("helper", make_model(), "Be brief.", tools=[get_weather])
    answer = await agent.reply(Msg.user("Weather in Oslo?"))
    assert answer.text == "It is sunny in Oslo."
    first, second = server.bodies()
    assert first["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_weather"
    assert declaration["parametersJsonSchema"]["properties"]["city"]["type"] == "string"
    # The call came without an id: the one parley made for it stays in parley's messages.
    assert second["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "I should look.", "thought": True},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": "sig-1",
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "get_weather",
                        "response": {"output": "Sunny in Oslo"},
                    }
                }
            ],
        },
    ]
    server.assert_consumed()
