"""`parley chat --model <provider>:<model>` for every hosted provider, and `parley models`.

Each run is a real `parley` process configured the way a user configures the provider's own
SDK: the key and the base URL in the provider's usual environment variables, here pointing at
a local server that speaks the provider's wire format.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._requires import require_module
from tests.cli._run import run_parley

TIMEOUT = 120


@dataclass(frozen=True)
class Provider:
    """A hosted provider as a user configures it, and the project's stand-in for its server."""

    name: str
    """Its package under `parley.providers` (and the extra that installs its SDK)."""
    server_class: str
    """Its stand-in server's class, in the package's `server` module."""
    spec: str
    sdk: str
    env_key: dict[str, str]
    """The variable that holds the key, and a key (none for Ollama)."""
    env_url: str
    """The variable that holds the server's base URL."""
    key: tuple[str, str] | None = None
    """The header that carries the key from the environment, and its value."""
    loads: bool = False
    """`parley chat` loads the model first (Ollama: into the server's memory, one request)."""

    def _stand_in(self) -> Any:
        return importlib.import_module(f"parley.providers.{self.name}.server")

    def server(self, replies: list[Any]) -> Any:
        """The stand-in server (`OpenAIServer`, ...), a context manager, for these replies."""
        return getattr(self._stand_in(), self.server_class)(replies)

    def reply(self, text: str) -> Any:
        """The stand-in's reply step with this text."""
        return self._stand_in().Reply(text=text)

    def env(self, url: str) -> dict[str, str]:
        """The provider's variables, its base URL pointing at `url`."""
        return {**self.env_key, self.env_url: url}


PROVIDERS = {
    provider.name: provider
    for provider in (
        Provider(
            "openai",
            "OpenAIServer",
            "openai:gpt-4o-mini",
            "openai",
            {"OPENAI_API_KEY": "sk-test"},
            "OPENAI_BASE_URL",
            key=("authorization", "Bearer sk-test"),
        ),
        Provider(
            "anthropic",
            "AnthropicServer",
            "anthropic:claude-sonnet-4-5",
            "anthropic",
            {"ANTHROPIC_API_KEY": "sk-ant-test"},
            "ANTHROPIC_BASE_URL",
            key=("authorization", "Bearer sk-ant-test"),
        ),
        Provider(
            "gemini",
            "GeminiServer",
            "gemini:gemini-2.5-flash",
            "google.genai",
            {"GEMINI_API_KEY": "test-key"},
            "GOOGLE_GEMINI_BASE_URL",
            key=("x-goog-api-key", "test-key"),
        ),
        Provider("ollama", "OllamaServer", "ollama:qwen3", "ollama", {}, "OLLAMA_HOST", loads=True),
        Provider(
            "dashscope",
            "DashScopeServer",
            "dashscope:qwen-plus",
            "dashscope",
            {"DASHSCOPE_API_KEY": "sk-test"},
            "DASHSCOPE_HTTP_BASE_URL",
            key=("authorization", "Bearer sk-test"),
        ),
    )
}


def _clean_env(tmp_path: Path) -> dict[str, str]:
    keys = ("_API_KEY", "_BASE_URL", "OLLAMA_HOST", "GOOGLE_CLOUD")
    env = {k: v for k, v in os.environ.items() if not any(part in k for part in keys)}
    env["HOME"] = str(tmp_path)  # no SDK profile or config from the developer's home
    return env


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_chat_with_a_hosted_provider_configured_as_its_sdk_is(name: str, tmp_path: Path) -> None:
    provider = PROVIDERS[name]
    require_module(provider.sdk, provider.name)
    answer = f"Hello from {name}."
    replies = [provider.reply(answer)]
    if provider.loads:
        replies.insert(0, provider.reply(""))
    with provider.server(replies) as server:
        env = {**_clean_env(tmp_path), **provider.env(server.url)}
        done = run_parley("chat", "--model", provider.spec, "Say hello.", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == answer
        asked = server.requests[-1]
    assert "Say hello." in repr(asked.json)
    if provider.key is not None:  # the key came from the provider's usual variable
        header, value = provider.key
        assert asked.headers[header] == value


@pytest.mark.parametrize("name", sorted(n for n in PROVIDERS if n != "ollama"))
def test_chat_without_the_key_says_which_variable_to_set(name: str, tmp_path: Path) -> None:
    provider = PROVIDERS[name]
    require_module(provider.sdk, provider.name)
    with provider.server([provider.reply("unused")]) as server:
        given = provider.env(server.url)
        [variable] = [k for k in given if k.endswith("_API_KEY")]
        env = {**_clean_env(tmp_path), **{k: v for k, v in given.items() if k != variable}}
        done = run_parley("chat", "--model", provider.spec, "Say hello.", env=env, cwd=tmp_path)
        assert server.requests == []
    assert done.returncode == 2, done.stderr
    assert variable in done.stderr
    assert "Traceback" not in done.stderr


def test_models_lists_every_provider_s_cards(tmp_path: Path) -> None:
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415

    done = run_parley("models", env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {tuple(line.split()[:2]) for line in done.stdout.splitlines()[1:] if line.strip()}
    # Every card of every built-in provider, as the registry has them (the generic
    # OpenAI-compatible provider has none: its server says what it serves). Credentials other
    # tests registered in this process are not the command's.
    built_in = [
        CredentialFactory.credential_class(kind) for kind in CredentialFactory.known_types()
    ]
    known = {
        (cls.model_fields["type"].default, card.name)
        for cls in built_in
        if cls.__module__.startswith("parley.")
        for card in cls.list_models()
    }
    assert known <= listed, done.stdout
    providers = {kind for kind, _ in listed}
    expected = {
        "openai",
        "deepseek",
        "moonshot",
        "xai",
        "dashscope_compatible",
        "anthropic",
        "gemini",
        "ollama",
        "dashscope",
        "local",
    }
    assert expected <= providers, done.stdout
    assert {("anthropic", "claude-sonnet-4-5"), ("gemini", "gemini-2.5-pro")} <= listed
    assert {("dashscope", "qwen-vl-max"), ("dashscope", "qwen3-omni-flash")} <= listed
    assert ("ollama", "qwen3") in listed
