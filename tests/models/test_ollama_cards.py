"""Ollama's model cards: the bundled ones, a server's (`/api/tags`, `/api/show`), the credential."""

from __future__ import annotations

from typing import Any

import pytest

from parley.errors import ConfigurationError, ModelConnectionError, ModelHTTPError, UserError
from parley.models import CredentialFactory, ModelCard
from parley.models.cards import THINKING
from parley.providers.ollama import TOOL_CALLS, OllamaChatModel, OllamaCredential
from parley.providers.ollama.server import OllamaServer, ServedModel
from tests._requires import require_module

require_module("ollama", "ollama")  # the SDK the models and the listing run on

BUNDLED = {
    "deepseek-r1",
    "gemma3",
    "gpt-oss",
    "llama3.1",
    "llama3.2",
    "llama3.3",
    "mistral",
    "qwen2.5",
    "qwen3",
}


def card(cards: list[ModelCard], name: str) -> ModelCard:
    return next(c for c in cards if c.name == name)


# -- bundled cards --------------------------------------------------------------------------


def test_every_bundled_card_loads() -> None:
    cards = OllamaChatModel.list_models()
    assert {c.name for c in cards} == BUNDLED
    assert OllamaCredential.list_models() == cards
    for each in cards:
        assert each.label
        assert each.context_size
        assert "text/plain" in each.input_types
        assert each.parameter_schema["properties"]["num_ctx"]


def test_cards_say_what_models_do() -> None:
    cards = OllamaChatModel.list_models()
    assert card(cards, "qwen3").produces(THINKING)
    assert card(cards, "qwen3").produces(TOOL_CALLS)
    assert not card(cards, "llama3.2").produces(THINKING)
    assert card(cards, "gemma3").accepts("image/png")
    assert not card(cards, "gemma3").produces(TOOL_CALLS)
    # `think` is no parameter of a model that does not think; gpt-oss takes levels only.
    assert "think" not in card(cards, "mistral").parameter_schema["properties"]
    think = card(cards, "gpt-oss").parameter_schema["properties"]["think"]
    assert think["enum"] == ["low", "medium", "high"]


def test_a_tagged_model_takes_its_familys_card() -> None:
    model = OllamaChatModel(OllamaCredential(), "qwen3:8b")
    own = model.card()
    assert own is not None
    assert (own.name, own.label, own.context_size) == ("qwen3:8b", "Qwen3 8b", 40960)
    assert model.context_size == 40960
    assert OllamaChatModel(OllamaCredential(), "library/gemma3:latest").context_size == 131072
    assert OllamaChatModel(OllamaCredential(), "my-own-model").card() is None


# -- the credential -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://localhost:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("box:8080", "http://box:8080"),
        ("[::1]", "http://[::1]:11434"),
        ("https://ollama.example.com/", "https://ollama.example.com"),
        ("http://127.0.0.1:11434/proxy/", "http://127.0.0.1:11434/proxy"),
    ],
)
def test_host_forms(host: str | None, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert OllamaCredential(host=host).endpoint() == url


def test_host_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5")
    assert OllamaCredential().endpoint() == "http://10.0.0.5:11434"
    assert OllamaCredential(host="http://127.0.0.1:1").endpoint() == "http://127.0.0.1:1"


@pytest.mark.parametrize("host", ["ftp://box", "box:port"])
def test_bad_hosts_are_configuration_errors(host: str) -> None:
    with pytest.raises(ConfigurationError, match="not an Ollama host"):
        OllamaCredential(host=host).endpoint()


def test_credential_factory_and_registry() -> None:
    credential = CredentialFactory.from_dict(
        {"type": "ollama", "host": "http://127.0.0.1:9", "headers": {"X-Token": "t0ken"}}
    )
    assert type(credential) is OllamaCredential
    assert "ollama" in CredentialFactory.known_types()
    assert credential.chat_model_classes() == [OllamaChatModel]
    assert "t0ken" not in repr(credential)
    assert credential.header_values() == {"X-Token": "t0ken"}  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="bad ollama credential"):
        CredentialFactory.from_dict({"type": "ollama", "api_key": "no such field"})


def test_a_model_refuses_another_providers_credential() -> None:
    from parley.providers.openai import OpenAICredential  # noqa: PLC0415

    with pytest.raises(UserError, match="needs a OllamaCredential"):
        OllamaChatModel(OpenAICredential(api_key="k"), "qwen3")  # type: ignore[arg-type]


# -- a server's models ----------------------------------------------------------------------

SERVED = [
    ServedModel(
        "qwen3:8b",
        ["completion", "tools", "thinking"],
        context_length=40960,
        architecture="qwen3",
        parameter_size="8.2B",
    ),
    ServedModel("llama3.2:latest", ["completion", "tools"], context_length=131072),
    ServedModel(
        "gemma3:4b", ["completion", "vision"], context_length=131072, architecture="gemma3"
    ),
    ServedModel("nomic-embed-text:latest", ["embedding"], architecture="nomic-bert"),
    ServedModel("hf.co/me/tiny:Q4_K_M", ["completion", "thinking", "audio"], context_length=2048),
]


@pytest.fixture
def served() -> Any:
    with OllamaServer(models=SERVED) as running:
        yield running


async def test_server_models_without_asking_each(served: OllamaServer) -> None:
    cards = await served.credential().list_server_models()
    assert [c.name for c in cards] == [
        "gemma3:4b",
        "hf.co/me/tiny:Q4_K_M",
        "llama3.2:latest",
        "nomic-embed-text:latest",  # what it can do is not known without asking
        "qwen3:8b",
    ]
    qwen = card(cards, "qwen3:8b")
    assert (qwen.label, qwen.context_size) == ("Qwen3 8b", 40960)  # from the bundled card
    assert card(cards, "llama3.2:latest").label == "Llama 3.2"
    assert card(cards, "hf.co/me/tiny:Q4_K_M").label == "hf.co/me/tiny:Q4_K_M"
    assert [r.path for r in served.requests] == ["/api/tags"]


async def test_server_models_with_their_capabilities(served: OllamaServer) -> None:
    cards = await served.credential().list_server_models(capabilities=True)
    assert [c.name for c in cards] == [
        "gemma3:4b",
        "hf.co/me/tiny:Q4_K_M",
        "llama3.2:latest",
        "qwen3:8b",
    ]  # the embedding model cannot chat
    tiny = card(cards, "hf.co/me/tiny:Q4_K_M")
    assert tiny.input_types == ["text/plain", "audio/wav", "audio/mpeg"]
    assert tiny.output_types == ["text/plain", THINKING]
    assert tiny.context_size == 2048  # the model's own, from `model_info`
    assert "think" in tiny.parameter_schema["properties"]
    gemma = card(cards, "gemma3:4b")
    assert gemma.accepts("image/jpeg")
    assert gemma.output_types == ["text/plain"]
    assert "think" not in gemma.parameter_schema["properties"]
    qwen = card(cards, "qwen3:8b")
    assert qwen.output_types == ["text/plain", THINKING, TOOL_CALLS]
    shown = [r.json["model"] for r in served.requests if r.path == "/api/show"]
    assert sorted(shown) == sorted(m.name for m in SERVED)


def test_server_models_sync(served: OllamaServer) -> None:
    names = [c.name for c in served.credential().list_server_models_sync(capabilities=True)]
    assert "qwen3:8b" in names


async def test_server_models_from_an_unreachable_server() -> None:
    with OllamaServer() as gone:
        credential = gone.credential()
    with pytest.raises(ModelConnectionError, match="cannot reach ollama"):
        await credential.list_server_models()


async def test_a_model_gone_while_listing_is_an_error(served: OllamaServer) -> None:
    served.models.append(ServedModel("vanished:1b", deleted=True))
    with pytest.raises(ModelHTTPError, match="ollama pull vanished:1b") as caught:
        await served.credential().list_server_models(capabilities=True)
    assert caught.value.status_code == 404


async def test_listing_a_remote_server_is_blocked_in_tests() -> None:
    with pytest.raises(UserError, match="blocked"):
        await OllamaCredential(host="https://ollama.example.com").list_server_models()
