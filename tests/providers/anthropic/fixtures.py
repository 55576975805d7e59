"""Anthropic's `server` and `make_model` fixtures (made and bound as `_fixtures` says)."""

from __future__ import annotations

from parley.providers.anthropic import AnthropicChatModel
from parley.providers.anthropic.server import AnthropicServer
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

MODEL = "claude-sonnet-5-5"

server, make_model = provider_fixtures(
    AnthropicServer,
    AnthropicChatModel,
    MODEL,
    (("anthropic", "anthropic"), ("aiohttp", "anthropic")),
)
