"""Anthropic's fixtures for the tests of this folder: `server` and `make_model` (`fixtures.py`)."""

from tests.providers.anthropic.fixtures import make_model, server

__all__ = ["make_model", "server"]
