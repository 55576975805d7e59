"""Ollama's `server` and `make_model` fixtures (made and bound as `_fixtures` says)."""

from __future__ import annotations

from parley.providers.ollama import OllamaChatModel
from parley.providers.ollama.server import OllamaServer
from tests._requires import require_module
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

require_module("ollama", "ollama")  # the SDK the models and the listing run on
require_module("httpx_aiohttp", "ollama")  # the HTTP client parley builds the SDK with

server, make_model = provider_fixtures(OllamaServer, OllamaChatModel, "qwen3", ())
