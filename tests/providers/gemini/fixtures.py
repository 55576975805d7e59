"""Gemini's `server` and `make_model` fixtures (made and bound as `_fixtures` says)."""

from __future__ import annotations

from parley.providers.gemini import GeminiChatModel
from parley.providers.gemini.server import GeminiServer
from tests._requires import require_module
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

require_module("google.genai", "gemini")

server, make_model = provider_fixtures(GeminiServer, GeminiChatModel, "gemini-2.5-flash", ())
