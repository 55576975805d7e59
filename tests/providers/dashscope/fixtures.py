"""DashScope's `server` and `make_model` fixtures (made and bound as `_fixtures` says)."""

from __future__ import annotations

from parley.providers.dashscope import DashScopeChatModel
from parley.providers.dashscope.server import DashScopeServer
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

server, make_model = provider_fixtures(DashScopeServer, DashScopeChatModel, "qwen-plus", ())
