"""Test doubles for external services: tests of parley, and of code built on it, need no network.

Each provider's test server lives in its package (`parley.providers.<p>.server`), a local HTTP
server that speaks the provider's wire format to its official SDK, with faults to inject
(429 with Retry-After, 5xx, resets, cut streams, malformed chunks, error events, slow starts
and chunks). They are all named here too:

    from parley.testing import OpenAIServer, ScriptedModel

- `OpenAIServer`: OpenAI's Chat Completions, Responses, embeddings and speech APIs (and Azure
  OpenAI's paths).
- `AnthropicServer`: Anthropic's Messages API.
- `GeminiServer`: the Gemini API (and Vertex AI's paths): `generateContent`,
  `streamGenerateContent`, and the embedding calls.
- `OllamaServer`: Ollama's API (`/api/chat`, `/api/embed`, `/api/tags`, `/api/show`).
- `DashScopeServer`: DashScope's native API (text and multimodal generation, text and
  multimodal embedding, speech, and the SDK's uploads of local files).
- `DashScopeRealtimeServer`, `CosyVoiceServer`: DashScope's two realtime speech WebSocket
  protocols.
- `HubServer`: the Hugging Face Hub's download API, as `huggingface_hub` calls it.
- `ScriptedModel`: a chat model that replays scripted answers, with no HTTP at all.

Each is imported when first named, so that naming one loads no other provider's SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parley.models.testing import ScriptedModel
    from parley.providers.anthropic.server import AnthropicServer
    from parley.providers.dashscope.cosyvoice_server import CosyVoiceServer
    from parley.providers.dashscope.realtime_server import DashScopeRealtimeServer
    from parley.providers.dashscope.server import DashScopeServer
    from parley.providers.gemini.server import GeminiServer
    from parley.providers.local.hub_server import HubServer
    from parley.providers.ollama.server import OllamaServer
    from parley.providers.openai.server import OpenAIServer

_WHERE = {
    "AnthropicServer": "parley.providers.anthropic.server",
    "CosyVoiceServer": "parley.providers.dashscope.cosyvoice_server",
    "DashScopeRealtimeServer": "parley.providers.dashscope.realtime_server",
    "DashScopeServer": "parley.providers.dashscope.server",
    "GeminiServer": "parley.providers.gemini.server",
    "HubServer": "parley.providers.local.hub_server",
    "OllamaServer": "parley.providers.ollama.server",
    "OpenAIServer": "parley.providers.openai.server",
    "ScriptedModel": "parley.models.testing",
}

__all__ = [
    "AnthropicServer",
    "CosyVoiceServer",
    "DashScopeRealtimeServer",
    "DashScopeServer",
    "GeminiServer",
    "HubServer",
    "OllamaServer",
    "OpenAIServer",
    "ScriptedModel",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'parley.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
