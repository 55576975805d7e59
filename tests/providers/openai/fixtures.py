"""The OpenAI family's `server` and `make_model` fixtures (made and bound as `_fixtures` says)."""

from __future__ import annotations

from parley.providers.openai.chat import OpenAIChatModel
from parley.providers.openai.server import OpenAIServer
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

server, make_model = provider_fixtures(OpenAIServer, OpenAIChatModel, "gpt-4o-mini", ())
