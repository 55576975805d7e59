"""DashScope's fixtures: its scripted local server (`server`) and models bound to it
(`make_model`), made by `tests.providers._fixtures`.

This folder's `conftest.py` gives them to its tests; a module elsewhere binds them by name
(`server = fixtures.server`), so they hold for that module alone (never `pytest_plugins`, whose
fixtures hold for the whole session and shadow other providers' of the same name).
"""

from __future__ import annotations

from parley.providers.dashscope import DashScopeChatModel
from parley.providers.dashscope.server import DashScopeServer
from tests.providers._fixtures import ModelFactory, provider_fixtures

__all__ = ["ModelFactory", "make_model", "server"]

server, make_model = provider_fixtures(DashScopeServer, DashScopeChatModel, "qwen-plus", ())
