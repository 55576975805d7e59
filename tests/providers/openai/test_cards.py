"""Model cards, credentials and the registry for the OpenAI family."""

from __future__ import annotations

from typing import Any

import pytest

from parley.models import CredentialFactory
from parley.models.cards import THINKING
from parley.providers.openai import (
    DashScopeCompatibleChatModel,
    DashScopeCompatibleCredential,
    DeepSeekChatModel,
    DeepSeekCredential,
    MoonshotChatModel,
    MoonshotCredential,
    OpenAIChatModel,
    OpenAICompatibleChatModel,
    OpenAICompatibleCredential,
    OpenAICredential,
    OpenAIResponseModel,
    XAIChatModel,
    XAICredential,
)
from tests.providers._cards import assert_cards_load, card

EXPECTED = {
    OpenAIChatModel: {
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "o3-mini",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
    },
    DeepSeekChatModel: {"deepseek-chat", "deepseek-reasoner"},
    MoonshotChatModel: {
        "kimi-k2-0905-preview",
        "kimi-k2-thinking",
        "moonshot-v1-8k",
        "moonshot-v1-32k",
    },
    XAIChatModel: {"grok-3", "grok-3-mini", "grok-4"},
    DashScopeCompatibleChatModel: {
        "qwen-plus",
        "qwen-max",
        "qwen-turbo",
        "qwen3-235b-a22b",
        "qwq-plus",
    },
}


@pytest.mark.parametrize(
    ("cls", "names"), EXPECTED.items(), ids=lambda v: getattr(v, "__name__", "")
)
def test_every_card_loads(cls: Any, names: set[str]) -> None:
    assert_cards_load(cls.list_models(), names)


def test_null_override_removes_a_parameter() -> None:
    o3 = card(OpenAIChatModel, "o3-mini")
    assert o3.parameter_overrides["temperature"] is None
    assert "temperature" not in o3.parameter_schema["properties"]
    assert "temperature" in card(OpenAIChatModel, "gpt-4o").parameter_schema["properties"]


def test_hidden_override_marks_a_parameter() -> None:
    reasoner = card(DeepSeekChatModel, "deepseek-reasoner")
    assert reasoner.parameter_schema["properties"]["temperature"]["hidden"] is True
    assert (
        "hidden"
        not in card(DeepSeekChatModel, "deepseek-chat").parameter_schema["properties"][
            "temperature"
        ]
    )


def test_overrides_merge_into_the_field() -> None:
    effort = card(OpenAIChatModel, "o3-mini").parameter_schema["properties"]["reasoning_effort"]
    assert effort["enum"] == ["low", "medium", "high"]
    assert effort["default"] == "medium"
    assert effort["description"]  # kept from the base schema


def test_thinking_is_an_output_type() -> None:
    assert card(OpenAIChatModel, "o4-mini").produces(THINKING)
    assert not card(OpenAIChatModel, "gpt-4o").produces(THINKING)
    assert card(OpenAIChatModel, "gpt-4o").accepts("image/png")


def test_responses_model_shares_the_cards_with_its_own_parameters() -> None:
    gpt5 = card(OpenAIResponseModel, "gpt-5")
    properties = gpt5.parameter_schema["properties"]
    assert "reasoning_summary" in properties
    assert "stop" not in properties  # the Responses API has none
    assert "frequency_penalty" not in properties


def test_model_context_size_comes_from_its_card() -> None:
    model = OpenAIChatModel(OpenAICredential(api_key="k"), "gpt-4.1")  # type: ignore[arg-type]
    assert model.context_size == 1047576
    assert OpenAIChatModel(OpenAICredential(), "gpt-4.1", context_size=5).context_size == 5


@pytest.mark.parametrize(
    ("credential_cls", "classes"),
    [
        (OpenAICredential, [OpenAIChatModel, OpenAIResponseModel]),
        (OpenAICompatibleCredential, [OpenAICompatibleChatModel]),
        (DeepSeekCredential, [DeepSeekChatModel]),
        (MoonshotCredential, [MoonshotChatModel]),
        (XAICredential, [XAIChatModel]),
        (DashScopeCompatibleCredential, [DashScopeCompatibleChatModel]),
    ],
)
def test_credentials_name_their_model_classes(credential_cls: Any, classes: list[Any]) -> None:
    assert credential_cls.chat_model_classes() == classes


def test_list_models_on_credentials() -> None:
    # OpenAI's two APIs serve the same models: each card once.
    assert {c.name for c in OpenAICredential.list_models()} == EXPECTED[OpenAIChatModel]
    assert {c.name for c in DeepSeekCredential.list_models()} == EXPECTED[DeepSeekChatModel]
    assert OpenAICompatibleCredential.list_models() == []


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ({"type": "openai", "api_key": "sk"}, OpenAICredential),
        (
            {"type": "openai_compatible", "base_url": "http://localhost:8000/v1"},
            OpenAICompatibleCredential,
        ),
        ({"type": "deepseek", "api_key": "sk"}, DeepSeekCredential),
        ({"type": "moonshot", "api_key": "sk"}, MoonshotCredential),
        ({"type": "xai", "api_key": "sk"}, XAICredential),
        ({"type": "dashscope_compatible", "api_key": "sk"}, DashScopeCompatibleCredential),
    ],
)
def test_credential_factory(data: dict[str, Any], cls: Any) -> None:
    credential = CredentialFactory.from_dict(data)
    assert type(credential) is cls
    assert data["type"] in CredentialFactory.known_types()


def test_secret_never_in_repr_str_or_dump() -> None:
    credential = CredentialFactory.from_dict({"type": "deepseek", "api_key": "sk-hidden-1"})
    for text in (repr(credential), str(credential), credential.model_dump_json()):
        assert "sk-hidden-1" not in text
    assert credential.key() == "sk-hidden-1"  # type: ignore[attr-defined]
