"""Seed 003's credential API across every built-in provider, as a fresh process sees it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

TIMEOUT = 120

# A process that has imported nothing of parley's providers, with no provider SDK installed:
# `CredentialFactory` must still know every provider, and each credential its model classes.
_SCRIPT = """
import json, sys
for sdk in ("dashscope", "openai", "anthropic", "google", "google.genai", "ollama",
            "websockets", "httpx_aiohttp", "aiohttp", "llama_cpp", "onnxruntime"):
    sys.modules[sdk] = None  # as if not installed: importing it raises ImportError
from parley.models.credentials import CredentialFactory
name = lambda cls: cls.__name__ if cls is not None else None
found = {}
for kind in CredentialFactory.known_types():
    credential = CredentialFactory.from_dict({"type": kind})
    found[kind] = {
        "credential": type(credential).__name__,
        "chat": name(credential.get_chat_model_class()),
        "chats": [name(c) for c in credential.chat_model_classes()],
        "embedding": name(credential.get_embedding_model_class()),
        "tts": [name(c) for c in credential.get_tts_model_classes()],
        "cards": sorted({card.name for card in credential.list_models()}),
    }
print(json.dumps(found))
"""

# Seed 003's classes, each under the credential that drives it.
EXPECTED = {
    "openai": (
        "OpenAICredential",
        ["OpenAIChatModel", "OpenAIResponseModel"],
        "OpenAIEmbeddingModel",
        ["OpenAITTSModel"],
    ),
    "openai_compatible": (
        "OpenAICompatibleCredential",
        ["OpenAICompatibleChatModel"],
        "OpenAICompatibleEmbeddingModel",
        [],
    ),
    "azure_openai": ("AzureOpenAICredential", ["AzureOpenAIChatModel"], None, []),
    "deepseek": ("DeepSeekCredential", ["DeepSeekChatModel"], None, []),
    "moonshot": ("MoonshotCredential", ["MoonshotChatModel"], None, []),
    "xai": ("XAICredential", ["XAIChatModel"], None, []),
    "dashscope_compatible": (
        "DashScopeCompatibleCredential",
        ["DashScopeCompatibleChatModel"],
        None,
        [],
    ),
    "anthropic": ("AnthropicCredential", ["AnthropicChatModel"], None, []),
    "gemini": ("GeminiCredential", ["GeminiChatModel"], "GeminiEmbeddingModel", []),
    "ollama": ("OllamaCredential", ["OllamaChatModel"], "OllamaEmbeddingModel", []),
    "dashscope": (
        "DashScopeCredential",
        ["DashScopeChatModel"],
        "DashScopeEmbeddingModel",
        ["DashScopeTTSModel", "DashScopeRealtimeTTSModel", "DashScopeCosyVoiceRealtimeTTSModel"],
    ),
    "local": (
        "LocalCredential",
        ["LocalChatModel"],
        "LocalEmbeddingModel",
        ["LocalTTSModel", "LocalRealtimeTTSModel"],
    ),
}


def _registry() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return found


def test_the_factory_knows_every_provider_and_its_model_classes() -> None:
    found = _registry()
    assert set(found) == set(EXPECTED)
    for kind, (credential, chats, embedding, tts) in EXPECTED.items():
        entry = found[kind]
        assert entry["credential"] == credential, kind
        assert entry["chats"] == chats, kind
        assert entry["chat"] == chats[0], kind  # seed 003's singular name: the first class
        assert entry["embedding"] == embedding, kind
        assert entry["tts"] == tts, kind
        # Every provider but the generic OpenAI-compatible one and Azure (whose deployments
        # have their owners' names) ships its models' cards.
        assert bool(entry["cards"]) is (kind not in ("openai_compatible", "azure_openai")), kind
    # The nine chat model classes seed 003 lists, each reachable from a credential.
    seed = {
        "OpenAIChatModel",
        "OpenAIResponseModel",
        "AnthropicChatModel",
        "DashScopeChatModel",
        "DeepSeekChatModel",
        "GeminiChatModel",
        "MoonshotChatModel",
        "XAIChatModel",
        "OllamaChatModel",
    }
    assert seed <= {name for entry in found.values() for name in entry["chats"]}
