"""`parley chat --model <provider>:<model>` for every hosted provider, and `parley models`.

Each run is a real `parley` process configured the way a user configures the provider's own
SDK: the key and the base URL in the provider's usual environment variables, here pointing at
a local server that speaks the provider's wire format.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._requires import require_module

TIMEOUT = 120


@dataclass(frozen=True)
class Provider:
    spec: str
    sdk: str
    extra: str
    server: Callable[[list[Any]], AbstractContextManager[Any]]
    reply: Callable[[str], Any]
    env: Callable[[str], dict[str, str]]
    key: tuple[str, str] | None = None
    """The header that carries the key from the environment, and its value."""
    loads: bool = False
    """`parley chat` loads the model first (Ollama: into the server's memory, one request)."""


def _openai() -> Provider:
    from parley.providers.openai.server import OpenAIServer, Reply  # noqa: PLC0415

    return Provider(
        "openai:gpt-4o-mini",
        "openai",
        "openai",
        OpenAIServer,
        lambda text: Reply(text=text),
        lambda url: {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": url},
        key=("authorization", "Bearer sk-test"),
    )


def _anthropic() -> Provider:
    from parley.providers.anthropic._server_wire import Reply  # noqa: PLC0415
    from parley.providers.anthropic.server import AnthropicServer  # noqa: PLC0415

    return Provider(
        "anthropic:claude-sonnet-4-5",
        "anthropic",
        "anthropic",
        AnthropicServer,
        lambda text: Reply(text=text),
        lambda url: {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": url},
        key=("authorization", "Bearer sk-ant-test"),
    )


def _gemini() -> Provider:
    from parley.providers.gemini._server_wire import Reply  # noqa: PLC0415
    from parley.providers.gemini.server import GeminiServer  # noqa: PLC0415

    return Provider(
        "gemini:gemini-2.5-flash",
        "google.genai",
        "gemini",
        GeminiServer,
        lambda text: Reply(text=text),
        lambda url: {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": url},
        key=("x-goog-api-key", "test-key"),
    )


def _ollama() -> Provider:
    from parley.providers.ollama._server_wire import Reply  # noqa: PLC0415
    from parley.providers.ollama.server import OllamaServer  # noqa: PLC0415

    return Provider(
        "ollama:qwen3",
        "ollama",
        "ollama",
        OllamaServer,
        lambda text: Reply(text=text),
        lambda url: {"OLLAMA_HOST": url},
        loads=True,
    )


def _dashscope() -> Provider:
    from parley.providers.dashscope._server_wire import Reply  # noqa: PLC0415
    from parley.providers.dashscope.server import DashScopeServer  # noqa: PLC0415

    return Provider(
        "dashscope:qwen-plus",
        "dashscope",
        "dashscope",
        DashScopeServer,
        lambda text: Reply(text=text),
        lambda url: {"DASHSCOPE_API_KEY": "sk-test", "DASHSCOPE_HTTP_BASE_URL": url},
        key=("authorization", "Bearer sk-test"),
    )


PROVIDERS = {
    "openai": _openai,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "ollama": _ollama,
    "dashscope": _dashscope,
}


def _clean_env(tmp_path: Path) -> dict[str, str]:
    keys = ("_API_KEY", "_BASE_URL", "OLLAMA_HOST", "GOOGLE_CLOUD")
    env = {k: v for k, v in os.environ.items() if not any(part in k for part in keys)}
    env["HOME"] = str(tmp_path)  # no SDK profile or config from the developer's home
    return env


def _parley(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the `parley` command in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "parley", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_chat_with_a_hosted_provider_configured_as_its_sdk_is(name: str, tmp_path: Path) -> None:
    provider = PROVIDERS[name]()
    require_module(provider.sdk, provider.extra)
    answer = f"Hello from {name}."
    replies = [provider.reply(answer)]
    if provider.loads:
        replies.insert(0, provider.reply(""))
    with provider.server(replies) as server:
        env = {**_clean_env(tmp_path), **provider.env(server.url)}
        done = _parley("chat", "--model", provider.spec, "Say hello.", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == answer
        asked = server.requests[-1]
    assert "Say hello." in repr(asked.json)
    if provider.key is not None:  # the key came from the provider's usual variable
        header, value = provider.key
        assert asked.headers[header] == value


@pytest.mark.parametrize("name", sorted(n for n in PROVIDERS if n != "ollama"))
def test_chat_without_the_key_says_which_variable_to_set(name: str, tmp_path: Path) -> None:
    provider = PROVIDERS[name]()
    require_module(provider.sdk, provider.extra)
    with provider.server([provider.reply("unused")]) as server:
        given = provider.env(server.url)
        [variable] = [k for k in given if k.endswith("_API_KEY")]
        env = {**_clean_env(tmp_path), **{k: v for k, v in given.items() if k != variable}}
        done = _parley("chat", "--model", provider.spec, "Say hello.", env=env, cwd=tmp_path)
        assert server.requests == []
    assert done.returncode == 2, done.stderr
    assert variable in done.stderr
    assert "Traceback" not in done.stderr


def test_models_lists_every_provider_s_cards(tmp_path: Path) -> None:
    from parley.models.credentials import CredentialFactory  # noqa: PLC0415

    done = _parley("models", env=_clean_env(tmp_path), cwd=tmp_path)
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
