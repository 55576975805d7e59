"""Anthropic's model cards, its credential and the registry."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from parley import Msg
from parley.errors import ConfigurationError
from parley.models import CredentialFactory, ModelCard
from parley.models.cards import THINKING
from parley.models.spec import model_from_spec
from parley.providers.anthropic import AnthropicChatModel, AnthropicCredential
from parley.providers.anthropic.server import AnthropicServer, Reply

pytest_plugins = ["tests.models.anthropic_fixtures"]

ROOT = Path(__file__).parents[2]

CURRENT = {"claude-fable-5-2", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"}
"""The models Anthropic recommends today (its models overview, 2026-11): parley offers each."""


LIST_PRICES = {
    # USD per million: input, output, cache read, 5-minute cache write (None: no official
    # price read; see the card). From Anthropic's pricing page and model overviews, 2026-11.
    "claude-fable-5-1": (10.0, 50.0, 0.25, 12.5),
    "claude-mythos-5-1": (10.0, 50.0, 0.25, 12.5),
    "claude-fable-5": (10.0, 50.0, 1.0, 12.5),
    "claude-mythos-5": (10.0, 50.0, 1.0, 12.5),
    "claude-opus-5-5": (4.0, 20.0, 0.2, 5.0),
    "claude-opus-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-8": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-7": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-6": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-sonnet-5-5": (2.0, 10.0, 0.2, 2.5),
    "claude-sonnet-5": (2.0, 10.0, 0.2, 2.5),
    "claude-sonnet-4-6": (3.0, 15.0, None, None),
    "claude-sonnet-4-5": (3.0, 15.0, 0.3, None),
    "claude-haiku-5-5": (0.1, 0.5, None, 0.125),
    "claude-haiku-4-5": (1.0, 5.0, 0.1, None),
}
UNPRICED = {"claude-fable-5-2", "claude-mythos-5-2"}
"""No official page read gives their prices: their calls report no cost."""


def cards() -> dict[str, ModelCard]:
    return {card.name: card for card in AnthropicChatModel.list_models()}


CLAUDE = re.compile(r"\bclaude-[a-z0-9]+(?:-[a-z0-9]+)*")


def named_models() -> set[str]:
    """Every Claude model that parley's code, docs and README name (snapshots included)."""
    texts = [p.read_text() for p in (ROOT / "src" / "parley").rglob("*.py")]
    texts += [p.read_text() for p in (ROOT / "docs").rglob("*.md")]
    texts.append((ROOT / "README.md").read_text())
    return {name for text in texts for name in CLAUDE.findall(text)}


def test_every_model_parley_names_has_a_card() -> None:
    # What parley offers (the default, the current models) and every name its code and docs
    # show a user: each has a card, a dated snapshot its alias's. Not the SDK's `Model`
    # literal: a release of the SDK that drops or adds a name changes nothing parley offers.
    assert AnthropicChatModel.default_model in cards()
    assert set(cards()) >= CURRENT
    named = named_models()
    assert {"claude-sonnet-5-5", "claude-haiku-4-5-20251001"} <= named  # the scan finds them
    credential = AnthropicCredential(api_key="k")  # type: ignore[arg-type]
    cardless = sorted(n for n in named if AnthropicChatModel(credential, n).card() is None)
    assert not cardless, f"named in src/, docs/ or README.md without a card: {cardless}"


async def test_the_sdk_sends_every_card_s_model_as_named(
    server: AnthropicServer, make_model: Callable[..., Any]
) -> None:
    # Through the installed SDK, to the local Messages API server: each card's name is a
    # model the SDK takes, sent and answered unchanged.
    names = sorted(cards())
    server.add(*(Reply(text="ok") for _ in names))
    answered = [(await make_model(name).chat([Msg.user("Hi")])).model for name in names]
    assert answered == names
    assert [body["model"] for body in server.bodies()] == names
    server.assert_consumed()


def test_every_card_is_complete() -> None:
    for card in cards().values():
        assert card.label.startswith("Claude ")
        assert card.context_size in (200_000, 1_000_000)
        assert card.output_size in (64_000, 128_000)
        assert card.accepts("image/png")
        assert card.accepts("application/pdf")
        assert not card.accepts("audio/wav")
        assert card.produces(THINKING)
        properties = card.parameter_schema["properties"]
        assert properties["max_tokens"]["maximum"] == card.output_size
        # API version 2026-10-21 removed these: no form shows them.
        assert not {"temperature", "top_p", "seed"} & set(properties)


def test_thinking_modes_follow_anthropics_table() -> None:
    found = cards()
    properties = {name: card.parameter_schema["properties"] for name, card in found.items()}
    # Always on: only adaptive.
    assert properties["claude-fable-5-2"]["thinking"]["enum"] == ["adaptive"]
    assert properties["claude-opus-5-5"]["thinking"]["default"] == "adaptive"
    # Sonnet 5.5's lowest setting is `between_tools`; it refuses `disabled`. Sonnet 5 and
    # Opus 5 take `disabled` but no extended thinking.
    assert properties["claude-sonnet-5-5"]["thinking"]["enum"] == ["adaptive", "between_tools"]
    takes = [n for n, props in properties.items() if "between_tools" in props["thinking"]["enum"]]
    assert takes == ["claude-sonnet-5-5"]  # the only one (Anthropic's thinking troubleshooting)
    for name in ("claude-sonnet-5", "claude-opus-5", "claude-haiku-5-5"):
        assert properties[name]["thinking"]["enum"] == ["adaptive", "disabled"]
    # Claude 4.7 and later refuse extended thinking (a budget).
    for name in ("claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-5-5", "claude-fable-5"):
        assert "thinking_budget" not in properties[name]
    # Claude 4.5 models think only with a budget; Haiku 4.5 has no effort.
    assert properties["claude-haiku-4-5"]["thinking"]["enum"] == ["enabled", "disabled"]
    assert "thinking_budget" in properties["claude-haiku-4-5"]
    assert "effort" not in properties["claude-haiku-4-5"]
    assert found["claude-sonnet-4-5"].status == "deprecated"


def test_every_priced_claude_card_keeps_its_list_price() -> None:
    found = cards()
    assert set(LIST_PRICES) | UNPRICED == set(found)  # a new card needs its price looked up
    for name, prices in LIST_PRICES.items():
        pricing = found[name].pricing
        assert pricing is not None, f"{name} lost its price"
        listed = (pricing.input, pricing.output, pricing.cached_input, pricing.cache_write)
        assert listed == prices, name
        assert (pricing.currency, pricing.as_of) == ("USD", "2026-11")
    assert all(found[name].pricing is None for name in UNPRICED)


def test_haiku_5_5_costs_five_times_as_much_over_100k_prompt_tokens() -> None:
    pricing = cards()["claude-haiku-5-5"].pricing
    assert pricing is not None
    short = pricing.cost(100_000, 1000, cache_write_tokens=1000)
    assert short == pytest.approx((99_000 * 0.1 + 1000 * 0.125 + 1000 * 0.5) / 1e6)
    assert pricing.cost(100_001, 1000, cache_write_tokens=1000) == pytest.approx(
        (99_001 * 0.5 + 1000 * 0.625 + 1000 * 2.5) / 1e6
    )


def test_the_recommended_model_is_listed_first() -> None:
    assert AnthropicChatModel.list_models()[0].name == AnthropicChatModel.default_model
    assert AnthropicCredential.list_models()[0].name == "claude-sonnet-5-5"


def test_context_size_comes_from_the_card_also_for_snapshots() -> None:
    credential = AnthropicCredential(api_key="k")  # type: ignore[arg-type]
    assert AnthropicChatModel(credential, "claude-haiku-4-5-20251001").context_size == 200_000
    assert AnthropicChatModel(credential, "claude-opus-4-8").context_size == 1_000_000
    assert AnthropicChatModel(credential, "claude-opus-4-8", context_size=5).context_size == 5
    assert AnthropicChatModel(credential, "claude-unknown").context_size is None


def test_credential_names_its_model_class() -> None:
    assert AnthropicCredential.chat_model_classes() == [AnthropicChatModel]
    assert AnthropicCredential.default_base_url == "https://api.anthropic.com"


def test_credential_factory_and_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    credential = CredentialFactory.from_dict({"type": "anthropic"})
    assert type(credential) is AnthropicCredential
    assert credential.key() == "sk-ant-env"  # type: ignore[attr-defined]
    assert "anthropic" in CredentialFactory.known_types()
    model = model_from_spec("anthropic:claude-opus-4-8")
    assert type(model) is AnthropicChatModel
    assert model.model == "claude-opus-4-8"
    assert model_from_spec("anthropic").model == "claude-sonnet-5-5"


def test_bad_credential_fields_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="bad anthropic credential"):
        CredentialFactory.from_dict({"type": "anthropic", "api_kee": "sk"})


def test_secret_never_in_repr_str_or_dump() -> None:
    credential = CredentialFactory.from_dict({"type": "anthropic", "api_key": "sk-ant-hidden"})
    for text in (repr(credential), str(credential), credential.model_dump_json()):
        assert "sk-ant-hidden" not in text
    assert credential.key() == "sk-ant-hidden"  # type: ignore[attr-defined]
