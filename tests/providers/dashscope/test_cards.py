"""DashScope's model cards, its credential, the registry and `provider:model` specs."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from parley.errors import ConfigurationError
from parley.models import CredentialFactory
from parley.models.cards import THINKING
from parley.models.spec import model_from_spec
from parley.providers.dashscope import (
    BEIJING_URL,
    INTERNATIONAL_URL,
    DashScopeChatModel,
    DashScopeCredential,
)
from parley.providers.dashscope.chat import is_multimodal_model, is_stream_only
from parley.providers.openai import DashScopeCompatibleCredential
from tests.providers import _cards
from tests.providers._cards import assert_cards_load

NAMES = {
    "qwen-max",
    "qwen-plus",
    "qwen-turbo",
    "qwen-flash",
    "qwen3-max",
    "qwen3-235b-a22b",
    "qwen3-32b",
    "qwq-plus",
    "qwen-vl-max",
    "qwen-vl-plus",
    "qwen3-vl-plus",
    "qwen-omni-turbo",
    "qwen3-omni-flash",
}


card = partial(_cards.card, DashScopeChatModel)
"""The card of one of its models, by name."""


def test_every_card_loads() -> None:
    assert_cards_load(DashScopeChatModel.list_models(), NAMES)
    assert {c.name for c in DashScopeCredential.list_models()} == NAMES


def test_thinking_and_media_on_the_cards() -> None:
    assert card("qwq-plus").produces(THINKING)
    assert card("qwen-plus").produces(THINKING)
    assert not card("qwen-max").produces(THINKING)
    assert card("qwen-vl-max").accepts("image/png")
    assert card("qwen-vl-max").accepts("video/mp4")
    assert not card("qwen-vl-max").accepts("audio/wav")
    assert card("qwen-omni-turbo").accepts("audio/wav")
    assert not card("qwen-plus").accepts("image/png")


def test_parameter_overrides() -> None:
    # QwQ always thinks: no switch; qwen-plus's is off by default; Qwen3's open models' on.
    assert "enable_thinking" not in card("qwq-plus").parameter_schema["properties"]
    plus = card("qwen-plus").parameter_schema["properties"]
    assert plus["enable_thinking"]["default"] is False
    assert plus["thinking_budget"]["maximum"] == 38912
    assert card("qwen3-32b").parameter_schema["properties"]["enable_thinking"]["default"] is True
    assert "vl_high_resolution_images" not in plus
    assert "vl_high_resolution_images" in card("qwen-vl-max").parameter_schema["properties"]


def test_context_size_comes_from_the_card() -> None:
    assert DashScopeChatModel(DashScopeCredential(), "qwen-turbo").context_size == 1000000
    assert DashScopeChatModel(DashScopeCredential(), "qwen-turbo", context_size=5).context_size == 5
    assert DashScopeChatModel(DashScopeCredential(), "qwen-unknown").context_size is None


@pytest.mark.parametrize(
    ("name", "multimodal"),
    [
        ("qwen-plus", False),
        ("qwq-plus", False),
        ("qwen3-235b-a22b", False),
        ("qwen-vl-max", True),
        ("qwen3-vl-plus", True),
        ("qwen2.5-vl-72b-instruct", True),
        ("qvq-max", True),
        ("qwen-omni-turbo", True),
        ("qwen3.5-plus", True),
        ("qwen-audio-turbo", True),
    ],
)
def test_which_models_use_multimodal_generation(name: str, multimodal: bool) -> None:
    assert is_multimodal_model(name) is multimodal


@pytest.mark.parametrize(
    ("name", "thinking", "stream_only"),
    [
        ("qwen-plus", None, False),
        ("qwen-plus", True, True),
        ("qwq-plus", None, True),
        ("qwen-omni-turbo", None, True),
        ("qwen3-32b", None, True),
        ("qwen3-32b", False, False),
        ("qwen3-0.6b", None, True),
        ("qwen3-1.7b", None, True),
        ("qwen3-30b-a3b", None, True),
        ("qwen3-235b-a22b-instruct-2507", None, False),
        ("qwen3-235b-a22b-thinking-2507", None, True),
    ],
)
def test_which_calls_must_stream(name: str, thinking: bool | None, stream_only: bool) -> None:
    assert is_stream_only(name, thinking) is stream_only


# -- the credential ---------------------------------------------------------------------------


def test_the_credential_reads_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "from-env")
    monkeypatch.delenv("DASHSCOPE_HTTP_BASE_URL", raising=False)
    credential = DashScopeCredential()
    assert credential.key() == "from-env"
    assert credential.endpoint() == BEIJING_URL == "https://dashscope.aliyuncs.com/api/v1"
    monkeypatch.setenv("DASHSCOPE_HTTP_BASE_URL", INTERNATIONAL_URL)
    assert credential.endpoint() == "https://dashscope-intl.aliyuncs.com/api/v1"
    # The credential's own URL wins over the environment.
    assert DashScopeCredential(base_url="http://127.0.0.1:1/api/v1").endpoint() == (
        "http://127.0.0.1:1/api/v1"
    )


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ({"type": "dashscope", "api_key": "sk-hidden", "workspace": "ws"}, DashScopeCredential),
        ({"type": "dashscope_compatible", "api_key": "sk-hidden"}, DashScopeCompatibleCredential),
    ],
)
def test_credential_factory(data: dict[str, Any], cls: Any) -> None:
    credential = CredentialFactory.from_dict(data)
    assert type(credential) is cls
    assert data["type"] in CredentialFactory.known_types()
    assert "sk-hidden" not in repr(credential)
    assert credential.key() == "sk-hidden"  # type: ignore[attr-defined]


def test_a_bad_credential_field_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="bad dashscope credential"):
        CredentialFactory.from_dict({"type": "dashscope", "region": "mars"})


def test_the_credential_names_its_model_class() -> None:
    assert DashScopeCredential.chat_model_classes() == [DashScopeChatModel]


def test_a_spec_builds_the_native_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-env")
    model = model_from_spec("dashscope:qwen-max")
    assert isinstance(model, DashScopeChatModel)
    assert (model.model, model.context_size) == ("qwen-max", 32768)
    default = model_from_spec("dashscope")
    assert isinstance(default, DashScopeChatModel)
    assert default.model in NAMES
